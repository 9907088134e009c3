package pool

import (
	"fmt"
	"math"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// LagSource says how a replica's lag was measured.
type LagSource string

// Lag sources.
const (
	// LagGTID: against the writer's GTID position, as this agent saw the
	// writer pass the replica's position (History).
	LagGTID LagSource = "gtid"
	// LagSBM: the replica's own Seconds_Behind_Master, which stays 0 on a
	// silently cut link until slave_net_timeout.
	LagSBM LagSource = "sbm"
)

// Lag is a replica's replication lag as this agent judges it.
type Lag struct {
	Source LagSource
	// Known is false when the lag cannot be told: Seconds_Behind_Master is
	// NULL (sbm).
	Known   bool
	Seconds float64
	// AtLeast (gtid): the writer passed the replica's position before this
	// agent's history of the writer begins, so Seconds is a lower bound.
	AtLeast bool
	// Transactions (gtid) the writer has that the replica lacks.
	Transactions uint64
}

// Freshness is what Compute needs to judge replicas against the writer's
// GTID position: this agent's History of positions and the time now. The
// zero value judges every replica by Seconds_Behind_Master.
type Freshness struct {
	Now     time.Time
	History *History
}

// Lags is Compute's judgement of each replica's lag.
type Lags struct {
	// Nodes maps cluster → replica name → lag, for every read-only replica
	// of a cluster that is not out for a hard reason.
	Nodes map[string]map[string]Lag
	// Recheck is the earliest time at which a replica judged fresh turns
	// stale unless a position changes first; zero for none. The router
	// recomputes then, so that a replica leaves on time even when nothing
	// is gossiped.
	Recheck time.Time
}

// History is what this agent saw of each db server's GTID position, with
// the times at which it saw each one: the clock that replica lag is
// measured with. Receipt times are this agent's own, so the hosts' clocks
// never enter the estimate; what does is how late the writer's position
// reaches this agent (its probe interval, its publishing cadence and the
// gossip delay), which makes a lag look smaller by that much.
//
// A History is not safe for concurrent use: the router owns it.
type History struct {
	keep  time.Duration
	nodes map[string]*track
}

// Bounds of a History.
const (
	// DefaultHistoryKeep is how long positions are kept: a replica whose
	// position is older than every kept sample has a lag of at least this.
	DefaultHistoryKeep = 10 * time.Minute
	// maxSamples bounds each node's samples (a writer publishing every
	// 250 ms fills 2,400 in 10 minutes); the oldest go first.
	maxSamples = 4096
)

// track is one node's positions, oldest first. Each sample's position
// covers the one before it.
type track struct {
	samples []sample
	// aliveAt is the last time this agent saw the node alive; away is set
	// while it is not (failed, cut off from this agent): positions it
	// reaches meanwhile are seen only when it is back.
	aliveAt time.Time
	away    bool
}

type sample struct {
	pos tags.Position
	at  time.Time // when this agent first saw pos
	// since, for the first position seen after the node was away, is the
	// last time it was seen alive before: it may have reached pos at any
	// moment since then (see gtidLag).
	since time.Time
}

// NewHistory returns an empty History keeping positions for keep
// (DefaultHistoryKeep when 0 or less).
func NewHistory(keep time.Duration) *History {
	if keep <= 0 {
		keep = DefaultHistoryKeep
	}
	return &History{keep: keep, nodes: map[string]*track{}}
}

// Observe records, at now, the GTID position each db member publishes.
// A position that lacks a transaction of the one seen before it (a server
// restored from a backup, a name reused) starts the node's history anew.
// Nodes no longer in members are forgotten.
func (h *History) Observe(now time.Time, members []Member) {
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if m.Health == nil || !m.Health.Position.Known() || m.Bad != ReasonNone {
			continue
		}
		seen[m.Name] = true
		pos := m.Health.Position
		t := h.nodes[m.Name]
		if t == nil {
			t = &track{aliveAt: now}
			h.nodes[m.Name] = t
		}
		if m.Status != StatusAlive {
			// Its tags are the last it sent before this agent lost it.
			t.away = true
			continue
		}
		away := t.away
		t.away = false
		var since time.Time
		if away {
			since = t.aliveAt
		}
		t.aliveAt = now
		if n := len(t.samples); n > 0 {
			last := t.samples[n-1]
			if last.pos == pos {
				continue
			}
			if !pos.Covers(last.pos) {
				t.samples = t.samples[:0]
				since = time.Time{}
			} else if missed(m, last, now) {
				// The stream's position before this one, which this agent
				// missed: dated from when it was reached, not from now.
				t.add(sample{pos: m.PosPrev, at: m.PosPrevAt, since: since})
				since = time.Time{}
			}
		}
		t.add(sample{pos: pos, at: now, since: since})
	}
	for name, t := range h.nodes {
		if !seen[name] {
			delete(h.nodes, name)
			continue
		}
		// Keep the newest sample whatever its age: it is the node's current
		// position, seen when it was reached.
		cut := 0
		for cut < len(t.samples)-1 && now.Sub(t.samples[cut].at) > h.keep {
			cut++
		}
		if cut > 0 {
			t.samples = append(t.samples[:0], t.samples[cut:]...)
		}
	}
}

// missed reports whether m's stream position before its current one lies
// between last and it, unseen by this agent.
func missed(m Member, last sample, now time.Time) bool {
	p := m.PosPrev
	return p.Known() && p != last.pos && p.Covers(last.pos) && m.Health.Position.Covers(p) &&
		m.PosPrevAt.After(last.at) && m.PosPrevAt.Before(now)
}

// add appends s, dropping the oldest sample when full.
func (t *track) add(s sample) {
	if len(t.samples) == maxSamples {
		t.samples = append(t.samples[:0], t.samples[1:]...)
	}
	t.samples = append(t.samples, s)
}

// passed returns when this agent first saw writer at a position beyond p:
// the time since which a replica at p misses the writer's data. ok is
// false when writer's history has no position beyond p (p covers what the
// writer has). atLeast is true when the oldest kept sample is already
// beyond p, so the writer passed p before that.
//
// When the writer was away from this agent (failed, cut off) before that
// sample, it may have passed p at any time since it was last seen; the
// replica's own track tells which: a replica whose position did not move
// while the writer was away (cut off with it, or from it) is judged from
// the last time the writer was seen, as the writes it lacks may be that
// old; one that moved meanwhile was replicating, and its lag is judged as
// usual. Without this, a replica cut off with this agent from a writer
// that went on taking writes looked fresh for max_lag after the heal.
func (h *History) passed(writer, replica string, p tags.Position) (at time.Time, atLeast, ok bool) {
	t := h.nodes[writer]
	if t == nil {
		return time.Time{}, false, false
	}
	for i, s := range t.samples {
		if !p.Covers(s.pos) {
			if !s.since.IsZero() && !h.movedBetween(replica, s.since, s.at) {
				return s.since, i == 0, true
			}
			return s.at, i == 0, true
		}
	}
	return time.Time{}, false, false
}

// movedBetween reports whether this agent saw node reach a new position
// in (from, to].
func (h *History) movedBetween(node string, from, to time.Time) bool {
	t := h.nodes[node]
	if t == nil {
		return false
	}
	for _, s := range t.samples {
		if s.at.After(from) && !s.at.After(to) {
			return true
		}
	}
	return false
}

// gtidLag is the lag of a replica at pos against writer w, or false when
// it cannot be measured by GTID: no History, or a position unknown.
func (f Freshness) gtidLag(w, r eval) (Lag, time.Time, bool) {
	if f.History == nil || !w.pos.Known() || !r.pos.Known() {
		return Lag{}, time.Time{}, false
	}
	l := Lag{Source: LagGTID, Known: true, Transactions: r.pos.Behind(w.pos)}
	if l.Transactions == 0 {
		return l, time.Time{}, true
	}
	at, atLeast, ok := f.History.passed(w.node.Name, r.node.Name, r.pos)
	if !ok {
		// The writer's published position is beyond the replica's, but
		// this agent has not recorded it yet (Observe runs first, so only
		// a caller without it): no time, no seconds.
		return l, time.Time{}, true
	}
	l.Seconds = max(f.Now.Sub(at).Seconds(), 0)
	l.AtLeast = atLeast
	return l, at, true
}

// judgeFreshness judges the replicas of es against the cluster's writer w,
// records their lag in lags and returns es with the kinds changed: by GTID
// when both positions are known, a replica is stale when the writer passed
// its position more than max_lag ago, and otherwise fresh whatever its
// Seconds_Behind_Master says (which stays 0 on a silently cut link and
// can be high on a replica that is caught up); replication-stopped and
// warning are kept. Without GTID positions the Seconds_Behind_Master rule
// of evaluate stands. recheck is lowered to when a fresh replica would
// turn stale.
func judgeFreshness(es []eval, w *eval, f Freshness, policy Policy, lags map[string]Lag, recheck *time.Time) {
	for i := range es {
		e := &es[i]
		if !e.replica {
			continue
		}
		sbm := Lag{Source: LagSBM, Known: e.lagKnown, Seconds: float64(e.lag)}
		if w == nil {
			lags[e.node.Name] = sbm
			continue
		}
		l, at, ok := f.gtidLag(*w, *e)
		if !ok {
			lags[e.node.Name] = sbm
			continue
		}
		lags[e.node.Name] = l
		if e.kind != kindReader && (e.kind != kindSoftReader || e.node.Reason != ReasonLag) {
			continue
		}
		e.lagKnown, e.lag = true, uint32(min(math.Ceil(l.Seconds), tags.MaxLagSeconds))
		if time.Duration(l.Seconds*float64(time.Second)) > policy.maxLag() {
			e.kind, e.node.Reason = kindSoftReader, ReasonStale
			e.node.Detail = fmt.Sprintf("behind the writer %s by more than max_lag %s (gtid)", w.node.Name, policy.maxLag())
			continue
		}
		e.kind, e.node.Reason, e.node.Detail = kindReader, ReasonNone, ""
		if !at.IsZero() {
			if due := at.Add(policy.maxLag() + time.Millisecond); recheck.IsZero() || due.Before(*recheck) {
				*recheck = due
			}
		}
	}
}
