package pool

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// DampConfig tunes a Damper. Zero fields take the defaults.
type DampConfig struct {
	HalfLife time.Duration // penalty half-life; default 60s
	Penalty  float64       // added on each removal; default 1000
	Suppress float64       // a removal that leaves the penalty above this holds re-entry; default 2500
	Reuse    float64       // a held node may re-enter once its penalty decays below this; default 1000
	MaxHold  time.Duration // the longest a node is held after its last removal; default 5m
}

// Damping defaults.
const (
	DefaultHalfLife = 60 * time.Second
	DefaultPenalty  = 1000
	DefaultSuppress = 2500
	DefaultReuse    = 1000
	DefaultMaxHold  = 5 * time.Minute
	// TopologyGrace: a reader removed within this time of a change of its
	// cluster's writer adds no penalty (see Damper).
	TopologyGrace = 30 * time.Second
)

func (c DampConfig) withDefaults() DampConfig {
	if c.HalfLife <= 0 {
		c.HalfLife = DefaultHalfLife
	}
	if c.Penalty <= 0 {
		c.Penalty = DefaultPenalty
	}
	if c.Suppress <= 0 {
		c.Suppress = DefaultSuppress
	}
	if c.Reuse <= 0 {
		c.Reuse = DefaultReuse
	}
	if c.MaxHold <= 0 {
		c.MaxHold = DefaultMaxHold
	}
	return c
}

// Damper holds back readers that flap, like BGP route flap damping.
//
// Each node (per cluster) has a penalty that halves every HalfLife. Every time
// Compute's pool removes the node from the readers (reader → out) for a
// health reason (Reason.Health: its agent failed, its probe says critical or
// warning, replication stopped or lags, ...), the penalty grows by Penalty; if
// it then exceeds Suppress the node is suppressed: when
// it qualifies as a reader again it is held out with reason damped until its
// penalty decays below Reuse. The penalty is capped so that no hold outlasts
// MaxHold after the last removal. With the defaults a node may enter the
// reader role about three times in quick succession; the third removal holds
// it for about 95 s, and a node that flaps more often than every ~40 s stays
// held. A removal is never delayed: damping only ever holds re-entry.
//
// An operator's drain is not a flap: a removal for maintenance, a graceful
// leave, bad tags or a name, a writer conflict, or a node that vanished from
// the view (pruned, or moved to another cluster) adds no penalty, so
// `shoal maint enable`/`disable` or a rolling restart never gets a node
// damped. Such a removal does not lift a suppression already earned either.
//
// Nor is a topology change: a reader removed within TopologyGrace of a
// change of its cluster's writer (a switchover, an outside promotion, the
// writer lost) adds no penalty. Its replication is being re-pointed, or its
// source went away: that says nothing of the reader's own health. Two planned
// switchovers a minute apart used to damp the old primary (issue 26).
//
// Damping never takes the readers below the policy's floor: if it would, the
// held nodes with the lowest penalty (then by name) stay in with reason floor.
// The writer is never damped: there is at most one writer candidate and no
// substitute, so holding it out would turn an intermittent write outage into
// a continuous one; a flapping writer shows in Diff and the history instead.
//
// A Damper is not safe for concurrent use. It never reads the clock: the
// caller passes the time of each pool.
type Damper struct {
	cfg   DampConfig
	max   float64 // penalty cap
	nodes map[placeKey]*dampState
	// writers: each cluster's writer in the last pool given to Apply, and
	// when it last changed (zero: never seen to change).
	writers map[string]writerSeen
}

type writerSeen struct {
	name    string
	changed time.Time
}

type dampState struct {
	penalty    float64
	at         time.Time // when penalty was last brought up to date
	suppressed bool
	until      time.Time // while suppressed: when the penalty decays below Reuse
	reader     bool      // a reader in the last pool given to Apply
}

// NewDamper returns a Damper with cfg, zero fields taking the defaults.
func NewDamper(cfg DampConfig) *Damper {
	cfg = cfg.withDefaults()
	return &Damper{
		cfg:     cfg,
		max:     cfg.Reuse * math.Exp2(float64(cfg.MaxHold)/float64(cfg.HalfLife)),
		nodes:   map[placeKey]*dampState{},
		writers: map[string]writerSeen{},
	}
}

// Penalty returns a node's penalty at now (0 if unknown), for metrics and tests.
func (d *Damper) Penalty(cluster, node string, now time.Time) float64 {
	s := d.nodes[placeKey{cluster, node}]
	if s == nil {
		return 0
	}
	return s.decayed(now, d.cfg.HalfLife)
}

// Apply records the pool Compute returned at now and returns a copy with held
// readers moved to Out with reason damped. p is not modified. Pass the
// returned pool, not p, as prev to the next Compute and to Diff.
func (d *Damper) Apply(now time.Time, p *Pool, policy Policy) *Pool {
	out := p.Clone()
	if out == nil {
		out = &Pool{}
	}
	seen := map[placeKey]bool{}
	for i := range out.Clusters {
		d.applyCluster(now, &out.Clusters[i], policy, seen)
	}
	for c := range d.writers {
		if out.Cluster(c) == nil {
			delete(d.writers, c) // the cluster is gone: forget its writer
		}
	}
	// Nodes that vanished from the readers without a trace (gone from the
	// member list, or moved to another cluster) were removed too.
	for k, s := range d.nodes {
		if seen[k] {
			continue
		}
		d.update(s, now)
		s.reader = false // vanished: not a health removal, no penalty
		if !s.suppressed && s.penalty < 1 {
			delete(d.nodes, k)
		}
	}
	return out
}

func (d *Damper) applyCluster(now time.Time, c *Cluster, policy Policy, seen map[placeKey]bool) {
	writer := c.Writer()
	ws, known := d.writers[c.Name]
	if known && ws.name != writer {
		ws.changed = now
	}
	ws.name = writer
	d.writers[c.Name] = ws
	topology := !ws.changed.IsZero() && now.Sub(ws.changed) < TopologyGrace
	inReaders := map[string]bool{}
	for _, n := range c.Readers {
		if n.Name != writer {
			inReaders[n.Name] = true
		}
	}
	outReason := map[string]Reason{}
	for _, n := range c.Out {
		outReason[n.Name] = n.Reason
	}
	for _, list := range [][]Node{c.Writers, c.Readers, c.Out} {
		for _, n := range list {
			k := placeKey{c.Name, n.Name}
			if seen[k] {
				continue
			}
			seen[k] = true
			s := d.nodes[k]
			if s == nil {
				if !inReaders[n.Name] {
					continue // nothing to remember
				}
				s = &dampState{at: now}
				d.nodes[k] = s
			}
			d.update(s, now)
			switch {
			case s.reader && n.Name == writer:
				s.reader = false // promoted: not a flap
			case s.reader && !inReaders[n.Name]:
				s.reader = false
				if outReason[n.Name].Health() && !topology {
					d.removed(s, now)
				}
			case !s.reader && inReaders[n.Name]:
				s.reader = true
			}
			if !s.reader && !s.suppressed && s.penalty < 1 {
				delete(d.nodes, k) // decayed to nothing
			}
		}
	}

	// Hold suppressed readers, unless that breaks the floor.
	var held []Node
	readers := c.Readers[:0]
	for _, n := range c.Readers {
		s := d.nodes[placeKey{c.Name, n.Name}]
		if inReaders[n.Name] && s != nil && s.suppressed {
			held = append(held, n)
			continue
		}
		readers = append(readers, n)
	}
	slices.SortFunc(held, func(a, b Node) int {
		pa, pb := d.nodes[placeKey{c.Name, a.Name}].penalty, d.nodes[placeKey{c.Name, b.Name}].penalty
		if pa != pb {
			if pa < pb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	need := policy.minReaders() - len(readers)
	for _, n := range held {
		s := d.nodes[placeKey{c.Name, n.Name}]
		detail := fmt.Sprintf("flapping: penalty %.0f, re-entry below %.0f", s.penalty, d.cfg.Reuse)
		if need > 0 {
			need--
			readers = append(readers, Node{Name: n.Name, Addr: n.Addr, Reason: ReasonFloor, Detail: "damped: " + detail})
			continue
		}
		c.Out = append(c.Out, Node{Name: n.Name, Addr: n.Addr, Reason: ReasonDamped, Detail: detail, Until: s.until})
	}
	c.Readers = readers
	sortNodes(c.Readers)
	sortNodes(c.Out)
	if len(c.Readers) == 0 {
		c.Readers = nil
	}
}

// update decays s to now and lifts a suppression whose penalty fell below Reuse.
func (d *Damper) update(s *dampState, now time.Time) {
	s.penalty = s.decayed(now, d.cfg.HalfLife)
	if now.After(s.at) {
		s.at = now
	}
	if s.suppressed && s.penalty < d.cfg.Reuse {
		s.suppressed = false
		s.until = time.Time{}
	}
}

// removed records a health-driven removal from the readers at now (s is
// already brought up to date).
func (d *Damper) removed(s *dampState, now time.Time) {
	s.reader = false
	s.penalty = math.Min(s.penalty+d.cfg.Penalty, d.max)
	if s.penalty > d.cfg.Suppress {
		s.suppressed = true
	}
	if s.suppressed {
		// Computed once per removal, so it does not jitter as the
		// penalty decays: re-entry is at the first pool at or after it.
		hold := float64(d.cfg.HalfLife) * math.Log2(s.penalty/d.cfg.Reuse)
		s.until = now.Add(time.Duration(math.Ceil(hold)))
	}
}

// decayed returns the penalty at now; time going backwards decays nothing.
func (s *dampState) decayed(now time.Time, halfLife time.Duration) float64 {
	dt := now.Sub(s.at)
	if dt <= 0 {
		return s.penalty
	}
	return s.penalty * math.Exp2(-float64(dt)/float64(halfLife))
}
