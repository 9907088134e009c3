package pool

import (
	"fmt"
	"time"
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
}

// Defaults for a zero Policy.
const (
	DefaultMaxLag     = 10 * time.Second
	DefaultMinReaders = 1
)

// Policy tunes Compute. The zero value means the defaults.
type Policy struct {
	// MaxLag is the most replication lag a reader may have; 0 means DefaultMaxLag.
	MaxLag time.Duration
	// MinReaders is the reader floor; 0 means DefaultMinReaders, a negative
	// value disables the reader floor.
	MinReaders int
	// WriterServesReads lists the writer among the readers too.
	WriterServesReads bool
}

func (p Policy) maxLag() time.Duration {
	if p.MaxLag <= 0 {
		return DefaultMaxLag
	}
	return p.MaxLag
}

func (p Policy) minReaders() int {
	switch {
	case p.MinReaders < 0:
		return 0
	case p.MinReaders == 0:
		return DefaultMinReaders
	}
	return p.MinReaders
}

// Pool is the routing pool: one entry per cluster, sorted by name.
type Pool struct {
	Clusters []Cluster
}

// Cluster is the pool of one cluster. Every db member of the cluster is in
// exactly one of Writers, Readers and Out, except that the writer is also in
// Readers when the policy says the writer serves reads. Each list is sorted by
// name.
type Cluster struct {
	Name     string
	Writers  []Node   // at most one
	Readers  []Node   //
	Out      []Node   // every other db member, with its reason
	Conflict []string // names of all writer candidates when there is a conflict, sorted
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
		}
	}
	return q
}

func cloneNodes(ns []Node) []Node {
	if ns == nil {
		return nil
	}
	return append([]Node(nil), ns...)
}
