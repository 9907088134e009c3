package tags

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxDomains is the most GTID domains a position carries in the health tag.
// A server with more publishes no position, and every agent judges its
// freshness by Seconds_Behind_Master as before (docs/pool.md).
const MaxDomains = 2

// Domain is the last transaction a server applied in one GTID replication
// domain: MariaDB's domain id and sequence number (gtid_current_pos without
// the server id), or for MySQL the CRC-32 of a source UUID and the highest
// transaction number of its gtid_executed interval.
type Domain struct {
	ID  uint32
	Seq uint64
}

// Position is a server's replication position: one Domain per GTID domain,
// sorted by ID, at most MaxDomains. The zero value is "no GTID position".
// It is comparable, so Health stays comparable.
type Position struct {
	N       uint8 // domains in use
	Domains [MaxDomains]Domain
}

// Known reports whether p holds a GTID position.
func (p Position) Known() bool { return p.N > 0 }

// List returns the domains in use.
func (p Position) List() []Domain { return p.Domains[:min(int(p.N), MaxDomains)] }

// Seq returns the sequence number of domain id, and whether p has it.
func (p Position) Seq(id uint32) (uint64, bool) {
	for _, d := range p.List() {
		if d.ID == id {
			return d.Seq, true
		}
	}
	return 0, false
}

// Behind returns how many transactions w (the writer's position) has that p
// lacks: the sum, over w's domains, of how far p's sequence number is below
// w's (all of w's when p lacks the domain). Domains where p is ahead count 0.
func (p Position) Behind(w Position) uint64 {
	var n uint64
	for _, d := range w.List() {
		s, _ := p.Seq(d.ID)
		if d.Seq > s {
			n += d.Seq - s
		}
	}
	return n
}

// Covers reports whether p has every transaction of w: Behind(w) == 0.
func (p Position) Covers(w Position) bool { return p.Behind(w) == 0 }

// String is the tag form: "domain:seq" per domain, comma separated, "" for
// none.
func (p Position) String() string {
	var b []byte
	for i, d := range p.List() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(d.ID), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, d.Seq, 10)
	}
	return string(b)
}

// normalize returns p as NewPosition builds it: domains sorted and unique,
// N at most MaxDomains, unused entries zero.
func (p Position) normalize() Position {
	q, _ := NewPosition(p.List()) // at most MaxDomains domains: no error
	return q
}

// ErrTooManyDomains is returned by NewPosition for more than MaxDomains.
var ErrTooManyDomains = fmt.Errorf("more than %d GTID domains", MaxDomains)

// NewPosition returns the position of ds, sorted by domain id. A domain
// given twice keeps its highest sequence number.
func NewPosition(ds []Domain) (Position, error) {
	var p Position
	for _, d := range ds {
		i := 0
		for i < int(p.N) && p.Domains[i].ID < d.ID {
			i++
		}
		if i < int(p.N) && p.Domains[i].ID == d.ID {
			p.Domains[i].Seq = max(p.Domains[i].Seq, d.Seq)
			continue
		}
		if p.N == MaxDomains {
			return Position{}, ErrTooManyDomains
		}
		copy(p.Domains[i+1:], p.Domains[i:p.N])
		p.Domains[i] = d
		p.N++
	}
	return p, nil
}

// ParsePosition reads the tag form written by String.
func ParsePosition(v string) (Position, error) {
	if v == "" {
		return Position{}, errors.New("empty position")
	}
	parts := strings.Split(v, ",")
	if len(parts) > MaxDomains {
		return Position{}, ErrTooManyDomains
	}
	var ds []Domain
	for _, part := range parts {
		id, seq, ok := strings.Cut(part, ":")
		if !ok {
			return Position{}, fmt.Errorf("domain %q: want domain:seq", short(part))
		}
		d, err := strconv.ParseUint(id, 10, 32)
		if err != nil || id != strconv.FormatUint(d, 10) {
			return Position{}, fmt.Errorf("domain id %q: want 0..4294967295", short(id))
		}
		s, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || seq != strconv.FormatUint(s, 10) {
			return Position{}, fmt.Errorf("sequence number %q: want 0..18446744073709551615", short(seq))
		}
		ds = append(ds, Domain{ID: uint32(d), Seq: s})
	}
	p, err := NewPosition(ds)
	if err == nil && p.N != uint8(len(ds)) {
		return Position{}, errors.New("domain given twice")
	}
	return p, err
}
