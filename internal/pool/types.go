package pool

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
	"github.com/shoaldb/shoal/internal/tags"
)

// Status is a member's gossip status. The values and their order are those of
// serf.MemberStatus, so the agent converts with Status(m.Status); this package
// does not import serf.
type Status uint8

// Member statuses.
const (
	StatusNone Status = iota
	StatusAlive
	StatusLeaving
	StatusLeft
	StatusFailed
)

func (s Status) String() string {
	switch s {
	case StatusNone:
		return "none"
	case StatusAlive:
		return "alive"
	case StatusLeaving:
		return "leaving"
	case StatusLeft:
		return "left"
	case StatusFailed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Member is one gossip member as this agent sees it.
type Member struct {
	Name   string
	Addr   string // the address sinks route to, "host:port"
	Status Status
	Tags   map[string]string
	// Bad is ReasonBadName or ReasonBadTags when the member broke the rules
	// for gossiped names and tags (package member), with BadDetail saying
	// which rule. Such a member is always out, whatever its tags say; Name
	// and Tags then hold escaped display forms, never the raw bytes.
	Bad       Reason
	BadDetail string
	// Health is the member's health tag, decoded once where the member was
	// admitted (package member; tags.Published): nil when it publishes none
	// (reason no-health) or the tag does not decode, and then HealthErr
	// says why (reason bad-health-tag).
	Health    *tags.Health
	HealthErr string
	// PosPrev is, when Health's position came from the position stream
	// (gossip.Positions) rather than the tag, the member's position before
	// it, reached at about PosPrevAt (this agent's clock): History dates it
	// from there when it missed that position. Zero otherwise.
	PosPrev   tags.Position
	PosPrevAt time.Time
}

// Defaults and limits of the pool settings.
const (
	DefaultMaxLag      = 10 * time.Second
	DefaultMinReaders  = 1
	DefaultDamping     = true
	MinMaxLag          = time.Second
	MinIsolationWindow = time.Second
	MinDampHalfLife    = time.Second
	MaxDampHalfLife    = time.Hour
)

// Policy tunes Compute. A zero MaxLag means DefaultMaxLag; a zero
// MinReaders means no reader floor, as pool.min_readers: 0 does
// (DefaultSettings has the default floor).
type Policy struct {
	// MaxLag is the most replication lag a reader may have.
	MaxLag time.Duration
	// MinReaders is the reader floor: soft reasons never drain readers
	// below it. 0 (or less) means none.
	MinReaders int
	// WriterServesReads lists the writer among the readers too.
	WriterServesReads bool
	// ReadFallback says what the reader floor does with a stale reader
	// (stale, lag, replication-stopped). The zero value is ReadFallbackStaleReader,
	// the floor of old; DefaultSettings has ReadFallbackWriter.
	ReadFallback ReadFallback
}

// ReadFallback is what serves reads when too few readers are fresh: the
// value of pool.read_fallback.
type ReadFallback string

// Read fallbacks.
const (
	// ReadFallbackWriter: when the reader floor would keep a stale reader
	// and the cluster has a passing writer, the writer serves reads instead
	// (listed among the readers with reason fallback) and every stale
	// reader is out. Without a passing writer, as ReadFallbackStaleReader.
	ReadFallbackWriter ReadFallback = "writer"
	// ReadFallbackNone: the floor never keeps a stale reader.
	ReadFallbackNone ReadFallback = "none"
	// ReadFallbackStaleReader: the floor keeps the least-stale readers.
	ReadFallbackStaleReader ReadFallback = "stale-reader"
)

// ReadFallbacks lists the valid values of pool.read_fallback.
func ReadFallbacks() []ReadFallback {
	return []ReadFallback{ReadFallbackWriter, ReadFallbackNone, ReadFallbackStaleReader}
}

func (p Policy) maxLag() time.Duration {
	if p.MaxLag <= 0 {
		return DefaultMaxLag
	}
	return p.MaxLag
}

func (p Policy) minReaders() int { return max(p.MinReaders, 0) }

// Settings are the pool settings as a user gives them: the agent's pool
// section, with its yaml keys. Every agent of a cluster should use the same.
type Settings struct {
	MaxLag            time.Duration `yaml:"max_lag"`
	MinReaders        int           `yaml:"min_readers"` // 0: no reader floor
	WriterServesReads bool          `yaml:"writer_serves_reads"`
	// ReadFallback is what the reader floor does with stale readers.
	ReadFallback ReadFallback `yaml:"read_fallback"`
	// IsolationWindow: members that failed within it still count in the
	// fleet an agent must reach (see FleetTracker). IsolationMax bounds how
	// long an agent that cannot reach the fleet holds a node (see
	// isolation.go).
	IsolationWindow time.Duration `yaml:"isolation_window"`
	IsolationMax    time.Duration `yaml:"isolation_max"`
	// Damping holds a flapping reader out (see Damper).
	Damping      bool          `yaml:"damping"`
	DampHalfLife time.Duration `yaml:"damp_half_life"`
}

// DefaultSettings returns the settings the agent starts from.
func DefaultSettings() Settings {
	return Settings{MaxLag: DefaultMaxLag, MinReaders: DefaultMinReaders, ReadFallback: ReadFallbackWriter,
		IsolationWindow: DefaultIsolationWindow, IsolationMax: DefaultIsolationMax, Damping: DefaultDamping, DampHalfLife: DefaultHalfLife}
}

// Check checks the settings as given: every problem is a *setting.Error
// naming the setting's key.
func (s Settings) Check() error {
	var errs setting.Errors
	if s.MaxLag < MinMaxLag {
		errs.Addf("max_lag", s.MaxLag, "must be at least %s", MinMaxLag)
	}
	if s.MinReaders < 0 {
		errs.Addf("min_readers", s.MinReaders, "must be 0 or more")
	}
	if !slices.Contains(ReadFallbacks(), s.ReadFallback) {
		errs.Addf("read_fallback", s.ReadFallback, "must be writer, none or stale-reader")
	}
	if s.DampHalfLife < MinDampHalfLife || s.DampHalfLife > MaxDampHalfLife {
		errs.Addf("damp_half_life", s.DampHalfLife, "must be from %s to %s", MinDampHalfLife, shortHours(MaxDampHalfLife))
	}
	if s.IsolationWindow < MinIsolationWindow {
		errs.Addf("isolation_window", s.IsolationWindow, "must be at least %s", MinIsolationWindow)
	}
	if s.IsolationMax < MinIsolationMax || s.IsolationMax > MaxIsolationMax {
		errs.Addf("isolation_max", s.IsolationMax, "must be from %s to %s", MinIsolationMax, shortHours(MaxIsolationMax))
	}
	return errs.Err()
}

// shortHours formats whole hours as "1h", as a user writes them.
func shortHours(d time.Duration) string { return strings.TrimSuffix(d.String(), "0m0s") }

// Policy is the policy Compute applies.
func (s Settings) Policy() Policy {
	return Policy{MaxLag: s.MaxLag, MinReaders: s.MinReaders, WriterServesReads: s.WriterServesReads,
		ReadFallback: s.ReadFallback}
}

// Damp is the damping configuration.
func (s Settings) Damp() DampConfig { return DampConfig{HalfLife: s.DampHalfLife} }

// Pool is the routing pool: one entry per cluster, sorted by name.
type Pool struct {
	Clusters []Cluster
}

// Cluster is the pool of one cluster. Every db member of the cluster is in
// exactly one of Writers, Readers and Out, except that the writer is also in
// Readers when the policy says the writer serves reads, or with reason
// fallback in place of stale readers (Policy.ReadFallback). Each list is
// sorted by name.
type Cluster struct {
	Name     string
	Writers  []Node   // at most one
	Readers  []Node   //
	Out      []Node   // every other db member, with its reason
	Conflict []string // names of all writer candidates when there is a conflict, sorted
	// Term is the writer term the writer rule followed: nil when the
	// cluster requires none; Number 0 when it requires one and none is known.
	Term *Term
	// AskTerm: a newer term may exist than this agent knows (none known, or a
	// writable server other than the holder while the holder is not writable):
	// the agent asks the voters for it.
	AskTerm bool
	// Unsafe, when not "", says why the cluster's writes are not
	// protected: UnsafeNoTerm when none of its db members votes (no
	// consensus key), so any single writable server is its writer.
	Unsafe string
}

// Node is a member's place in the pool.
type Node struct {
	Name   string
	Addr   string
	Reason Reason // empty when in normally
	Detail string // specifics for operators, e.g. the probe's reason code
	// Until is, for a node held out with reason damped, when the hold
	// ends (its penalty decays below the re-entry threshold) if it stays
	// healthy; zero otherwise.
	Until time.Time
}

// Cluster returns the named cluster, or nil. p may be nil.
func (p *Pool) Cluster(name string) *Cluster {
	if p == nil {
		return nil
	}
	for i := range p.Clusters {
		if p.Clusters[i].Name == name {
			return &p.Clusters[i]
		}
	}
	return nil
}

// Writer returns the name of the cluster's writer, or "". c may be nil.
func (c *Cluster) Writer() string {
	if c == nil || len(c.Writers) == 0 {
		return ""
	}
	return c.Writers[0].Name
}

// Clone returns a deep copy of p.
func (p *Pool) Clone() *Pool {
	if p == nil {
		return nil
	}
	q := &Pool{Clusters: make([]Cluster, len(p.Clusters))}
	for i, c := range p.Clusters {
		q.Clusters[i] = Cluster{
			Name:     c.Name,
			Writers:  cloneNodes(c.Writers),
			Readers:  cloneNodes(c.Readers),
			Out:      cloneNodes(c.Out),
			Conflict: append([]string(nil), c.Conflict...),
			Term:     cloneTerm(c.Term),
			AskTerm:  c.AskTerm,
			Unsafe:   c.Unsafe,
		}
	}
	return q
}

func cloneTerm(t *Term) *Term {
	if t == nil {
		return nil
	}
	u := *t
	return &u
}

func cloneNodes(ns []Node) []Node {
	if ns == nil {
		return nil
	}
	return append([]Node(nil), ns...)
}
