package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/tags"
)

// The position stream. A db agent's GTID position changes with every write
// its server takes; gossiped in the health tag, each change re-sent the
// whole tag set (up to 512 bytes) through memberlist's broadcast queue, to
// every member, several times over (docs/benchmarks.md 7b: +18 KB/s per
// agent for a primary taking a write every 100 ms), and crowded failure
// messages out of the piggyback budget. Positions travel here instead, in
// packets of their own: a few tens of bytes per position, pushed to
// `fanout` random shoal agents, each of which passes a position it had not
// seen to `fanout` others, once (an epidemic push; it reaches a member in
// O(log N) hops, with no wait for a gossip interval). A member that
// misses one position gets the next; each carries the one before it and
// how long before it was reached, so that a receiver that missed the
// earlier one still dates it (pool.History).
//
// The packets are sealed as memberlist's own are (label, the keyring's
// primary key) and start with a byte memberlist never sends first
// (posMarker), by which the transport takes them before memberlist
// sees them. They are sent only to members with shoal's role tag: a stock
// serf agent never gets one. The health tag still carries the position,
// at a slow cadence (publish.StreamPositionInterval), for what joins late
// and for agents of a release without the stream.
const (
	posMarker      = 0xD5 // memberlist's first byte is a message type (< 32), a label (244) or an encryption version (0, 1)
	posWireVersion = 1
	// DefaultPosFanout is the members each position is pushed to by every
	// agent that passes it on (docs/scale.md: coverage per fanout).
	DefaultPosFanout = 3
	maxPosEntries    = 32   // entries per packet
	maxPosOrigin     = 128  // bytes of an origin's name
	maxPosOrigins    = 4096 // origins kept; more are forged or churned names
	maxPosAge        = time.Hour
	posQueueLen      = 256 // inbound packets and own positions awaiting the stream's loop
)

// Position cadences: the least time between two positions an agent
// publishes, less a tenth of slack for the probe's timing (as
// publish.positionInterval): the writer's receipt times are the clock
// replica lag is measured with, so they need resolution; a replica's
// position only needs to be fresh enough to compare with them.
const (
	PosWriterInterval = 250 * time.Millisecond
	PosReaderInterval = time.Second
)

// PosEntry is one position of the stream: origin's server reached Pos,
// PrevAge after it reached Prev (the position it published before, zero
// at the first). Epoch is the origin agent's start (unix ms) and Seq
// counts its positions since: a restart starts a newer sequence.
type PosEntry struct {
	Origin  string
	Epoch   uint64
	Seq     uint64
	Pos     tags.Position
	Prev    tags.Position
	PrevAge time.Duration
}

// newer reports whether e comes after o from the same origin.
func (e PosEntry) newer(o PosEntry) bool {
	if e.Epoch != o.Epoch {
		return e.Epoch > o.Epoch
	}
	return e.Seq > o.Seq
}

// appendPositions encodes es (at most maxPosEntries) after b.
func appendPositions(b []byte, es []PosEntry) []byte {
	b = append(b, posWireVersion)
	b = binary.AppendUvarint(b, uint64(len(es)))
	for _, e := range es {
		b = binary.AppendUvarint(b, uint64(len(e.Origin)))
		b = append(b, e.Origin...)
		b = binary.AppendUvarint(b, e.Epoch)
		b = binary.AppendUvarint(b, e.Seq)
		b = appendPos(b, e.Pos)
		b = appendPos(b, e.Prev)
		b = binary.AppendUvarint(b, uint64(e.PrevAge/time.Millisecond))
	}
	return b
}

func appendPos(b []byte, p tags.Position) []byte {
	ds := p.List()
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for _, d := range ds {
		b = binary.AppendUvarint(b, uint64(d.ID))
		b = binary.AppendUvarint(b, d.Seq)
	}
	return b
}

var errPosPacket = errors.New("malformed position packet")

// posReader reads the wire format; every read is bounds-checked.
type posReader struct {
	b   []byte
	err error
}

func (r *posReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errPosPacket
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *posReader) pos() tags.Position {
	n := r.uvarint()
	if n > tags.MaxDomains {
		r.err = fmt.Errorf("%w: %d GTID domains (at most %d)", errPosPacket, n, tags.MaxDomains)
		return tags.Position{}
	}
	ds := make([]tags.Domain, 0, n)
	for range n {
		id, seq := r.uvarint(), r.uvarint()
		if id > 0xFFFFFFFF {
			r.err = fmt.Errorf("%w: GTID domain %d", errPosPacket, id)
		}
		ds = append(ds, tags.Domain{ID: uint32(id), Seq: seq})
	}
	if r.err != nil {
		return tags.Position{}
	}
	p, err := tags.NewPosition(ds)
	if err != nil {
		r.err = fmt.Errorf("%w: %v", errPosPacket, err)
	}
	return p
}

// decodePositions reads a packet's plaintext. It never panics and
// allocates in proportion to the packet's size.
func decodePositions(b []byte) ([]PosEntry, error) {
	if len(b) < 1 || b[0] != posWireVersion {
		return nil, fmt.Errorf("%w: version", errPosPacket)
	}
	r := &posReader{b: b[1:]}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > maxPosEntries) {
		return nil, fmt.Errorf("%w: %d entries (1 to %d)", errPosPacket, n, maxPosEntries)
	}
	es := make([]PosEntry, 0, min(n, maxPosEntries))
	for i := uint64(0); i < n && r.err == nil; i++ {
		l := r.uvarint()
		if r.err == nil && (l == 0 || l > maxPosOrigin || l > uint64(len(r.b))) {
			return nil, fmt.Errorf("%w: origin name of %d bytes", errPosPacket, l)
		}
		var e PosEntry
		if r.err == nil {
			e.Origin = string(r.b[:l])
			r.b = r.b[l:]
		}
		e.Epoch, e.Seq = r.uvarint(), r.uvarint()
		e.Pos, e.Prev = r.pos(), r.pos()
		age := r.uvarint()
		if age > uint64(maxPosAge/time.Millisecond) {
			age = uint64(maxPosAge / time.Millisecond)
		}
		e.PrevAge = time.Duration(age) * time.Millisecond
		if r.err == nil && !e.Pos.Known() {
			r.err = fmt.Errorf("%w: an entry without a position", errPosPacket)
		}
		es = append(es, e)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the entries", errPosPacket, len(r.b))
	}
	return es, nil
}

// PosPeer is a member positions may be sent to.
type PosPeer struct {
	Name string
	Addr netip.AddrPort
}

// PositionsConfig configures a Positions stream.
type PositionsConfig struct {
	// Self returns this agent's member name (read at each publish: serf
	// may start after the stream is built).
	Self func() string
	// Fanout: the members each new position is pushed to
	// (DefaultPosFanout when 0 or less).
	Fanout int
	// Peers returns the members positions may go to: alive shoal agents.
	Peers func() []PosPeer
	// Send sends one packet.
	Send func(to netip.AddrPort, pkt []byte) error
	// Seal seals a packet's plaintext (sealOwn with the memberlist's
	// configuration); nil sends it as it is.
	Seal func(plain []byte) ([]byte, error)
	// Changed is called when this agent published a position, and, off
	// the receive path, when a position from another member was new.
	Changed func()
	Clock   clockwork.Clock
	Log     *slog.Logger
}

// PosStats counts the stream's work since it started.
type PosStats struct {
	Published     uint64 // own positions published
	PacketsSent   uint64
	BytesSent     uint64 // packet bytes, without IP and UDP headers
	SendErrors    uint64
	Received      uint64 // entries received
	New           uint64 // ... that were newer than what this agent had
	PacketsBad    uint64 // packets that did not open or decode
	QueueDropped  uint64 // packets dropped with the stream's queue full
	OriginsForgot uint64 // times the origins were forgotten at maxPosOrigins
}

// PosSample is the newest position this agent has of an origin: Pos,
// first seen at At, and Prev, reached at about PrevAt (by this agent's
// clock: At less the origin's PrevAge).
type PosSample struct {
	Pos    tags.Position
	At     time.Time
	Prev   tags.Position
	PrevAt time.Time
}

// Positions is this agent's end of the position stream.
type Positions struct {
	cfg   PositionsConfig
	epoch uint64
	in    chan posInbound

	mu     sync.Mutex
	seq    uint64
	own    PosEntry
	ownAt  time.Time
	known  map[string]posKnown
	rng    *rand.Rand
	counts struct {
		published, packets, bytes, sendErrs, received, fresh, bad, dropped, forgot atomic.Uint64
	}
}

type posKnown struct {
	e  PosEntry
	at time.Time
}

type posInbound struct {
	from    netip.AddrPort // zero for own positions
	entries []PosEntry
}

// NewPositions returns a stream; Run moves its packets.
func NewPositions(cfg PositionsConfig) *Positions {
	if cfg.Fanout <= 0 {
		cfg.Fanout = DefaultPosFanout
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	if cfg.Seal == nil {
		cfg.Seal = func(b []byte) ([]byte, error) { return b, nil }
	}
	return &Positions{cfg: cfg, epoch: uint64(cfg.Clock.Now().UnixMilli()), in: make(chan posInbound, posQueueLen),
		known: map[string]posKnown{}, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// Publish offers this agent's server position; writable servers publish
// every PosWriterInterval, others every PosReaderInterval. A change that
// comes sooner is held: the probe calls at every check, and the first
// call after the interval publishes the position of that moment.
func (p *Positions) Publish(pos tags.Position, writable bool) {
	if !pos.Known() {
		return
	}
	every := PosReaderInterval
	if writable {
		every = PosWriterInterval
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	if p.seq > 0 && (pos == p.own.Pos || now.Sub(p.ownAt) < every-every/10) {
		p.mu.Unlock()
		return
	}
	e := PosEntry{Origin: p.cfg.Self(), Epoch: p.epoch, Seq: p.seq + 1, Pos: pos}
	if p.seq > 0 {
		e.Prev, e.PrevAge = p.own.Pos, now.Sub(p.ownAt)
	}
	p.seq, p.own, p.ownAt = e.Seq, e, now
	p.remember(e, now)
	p.mu.Unlock()
	p.counts.published.Add(1)
	p.enqueue(posInbound{entries: []PosEntry{e}})
	p.cfg.Changed()
}

// Receive takes a packet from from: its plaintext, after the marker byte,
// opened (Transport does this; a transport of its own, in a simulation,
// whose Seal is nil, passes what Send was given less its first byte). It
// never blocks: a full queue drops the packet, counted, as is a packet
// that does not decode (the error says why).
func (p *Positions) Receive(from netip.AddrPort, plain []byte) error {
	es, err := decodePositions(plain)
	if err != nil {
		p.badPacket()
		return err
	}
	p.receive(from, es)
	return nil
}

func (p *Positions) receive(from netip.AddrPort, es []PosEntry) {
	p.counts.received.Add(uint64(len(es)))
	p.enqueue(posInbound{from: from, entries: es})
}

func (p *Positions) enqueue(in posInbound) {
	select {
	case p.in <- in:
	default:
		p.counts.dropped.Add(1)
	}
}

func (p *Positions) badPacket() { p.counts.bad.Add(1) }

// Latest returns the newest position of origin this agent has.
func (p *Positions) Latest(origin string) (PosSample, bool) {
	p.mu.Lock()
	k, ok := p.known[origin]
	p.mu.Unlock()
	if !ok {
		return PosSample{}, false
	}
	s := PosSample{Pos: k.e.Pos, At: k.at}
	if k.e.Prev.Known() {
		s.Prev, s.PrevAt = k.e.Prev, k.at.Add(-k.e.PrevAge)
	}
	return s, true
}

// Stats returns the counts so far.
func (p *Positions) Stats() PosStats {
	c := &p.counts
	return PosStats{Published: c.published.Load(), PacketsSent: c.packets.Load(), BytesSent: c.bytes.Load(),
		SendErrors: c.sendErrs.Load(), Received: c.received.Load(), New: c.fresh.Load(), PacketsBad: c.bad.Load(),
		QueueDropped: c.dropped.Load(), OriginsForgot: c.forgot.Load()}
}

// remember keeps e as origin's newest if it is; the caller holds mu.
func (p *Positions) remember(e PosEntry, now time.Time) bool {
	if k, ok := p.known[e.Origin]; ok && !e.newer(k.e) {
		return false
	}
	if _, ok := p.known[e.Origin]; !ok && len(p.known) >= maxPosOrigins {
		clear(p.known)
		p.counts.forgot.Add(1)
	}
	p.known[e.Origin] = posKnown{e: e, at: now}
	return true
}

// Run passes positions on until done is closed: each batch of new ones
// (own, or received and newer than this agent had) goes to Fanout random
// peers, other than the members it came from and is about.
func (p *Positions) Run(done <-chan struct{}) {
	for {
		var first posInbound
		select {
		case <-done:
			return
		case first = <-p.in:
		}
		batch := []posInbound{first}
	drain:
		for len(batch) < maxPosEntries {
			select {
			case in := <-p.in:
				batch = append(batch, in)
			default:
				break drain
			}
		}
		p.pass(batch)
	}
}

func (p *Positions) pass(batch []posInbound) {
	now := p.cfg.Clock.Now()
	self := p.cfg.Self()
	var out []PosEntry
	skip := map[string]bool{self: true}
	var from []netip.AddrPort
	fresh := false
	p.mu.Lock()
	for _, in := range batch {
		own := !in.from.IsValid()
		for _, e := range in.entries {
			if len(out) == maxPosEntries {
				break
			}
			if !own && (e.Origin == self || !p.remember(e, now)) {
				continue
			}
			if !own {
				fresh = true
				p.counts.fresh.Add(1)
			}
			out = append(out, e)
			skip[e.Origin] = true
		}
		if !own {
			from = append(from, in.from)
		}
	}
	p.mu.Unlock()
	if fresh {
		p.cfg.Changed()
	}
	if len(out) == 0 {
		return
	}
	pkt, err := p.cfg.Seal(appendPositions(nil, out))
	if err != nil {
		p.counts.sendErrs.Add(1)
		p.cfg.Log.Warn("position stream: seal a packet", "err", err)
		return
	}
	pkt = append([]byte{posMarker}, pkt...)
	for _, to := range p.pick(skip, from) {
		if err := p.cfg.Send(to.Addr, pkt); err != nil {
			p.counts.sendErrs.Add(1)
			continue
		}
		p.counts.packets.Add(1)
		p.counts.bytes.Add(uint64(len(pkt)))
	}
}

// pick returns up to Fanout random peers, none named in skip or at an
// address in from.
func (p *Positions) pick(skip map[string]bool, from []netip.AddrPort) []PosPeer {
	peers := p.cfg.Peers()
	cand := peers[:0:0]
	for _, m := range peers {
		if !skip[m.Name] && !containsAddr(from, m.Addr) && m.Addr.IsValid() {
			cand = append(cand, m)
		}
	}
	k := min(p.cfg.Fanout, len(cand))
	p.mu.Lock()
	for i := range k {
		j := i + p.rng.IntN(len(cand)-i)
		cand[i], cand[j] = cand[j], cand[i]
	}
	p.mu.Unlock()
	return cand[:k]
}

func containsAddr(as []netip.AddrPort, a netip.AddrPort) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// SerfPositionsConfig wires a stream to an agent's serf and transport.
type SerfPositionsConfig struct {
	Serf       func() *serf.Serf
	Transport  func() *Transport
	Memberlist *memberlist.Config
	Fanout     int
	Changed    func()
	Log        *slog.Logger
}

// NewSerfPositions returns the stream of an agent: peers are the alive
// members with shoal's role tag, packets leave from the gossip socket
// sealed as memberlist's configuration says, and the transport hands it
// the packets it receives (Transport.SetPositions, which the caller does).
func NewSerfPositions(c SerfPositionsConfig) *Positions {
	seal := sealFor(c.Memberlist)
	var (
		once sync.Once
		self string
	)
	return NewPositions(PositionsConfig{
		Self: func() string {
			once.Do(func() { self = c.Serf().LocalMember().Name })
			return self
		},
		Fanout: c.Fanout,
		Peers: func() []PosPeer {
			ms := c.Serf().Members()
			out := make([]PosPeer, 0, len(ms))
			for _, m := range ms {
				if m.Status != serf.StatusAlive || m.Tags[tags.KeyRole] == "" {
					continue
				}
				if a, ok := memberAddr(m); ok {
					out = append(out, PosPeer{Name: m.Name, Addr: a})
				}
			}
			return out
		},
		Send:    func(to netip.AddrPort, pkt []byte) error { return c.Transport().writePacket(pkt, to) },
		Seal:    func(b []byte) ([]byte, error) { return sealOwn(b, seal) },
		Changed: c.Changed,
		Log:     c.Log,
	})
}
