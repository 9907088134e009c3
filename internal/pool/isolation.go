package pool

import (
	"maps"
	"slices"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// Isolation: can this agent still reach the fleet?
//
// An agent that sees a db node's agent fail cannot tell, from its own view
// alone, whether the node failed or whether it is itself the one cut off.
// So before it acts on such a failure it asks: it pings (with its own
// pings, see package gossip) a sample of the fleet. The agent is connected
// when a strict majority of the db agents, or a strict majority of all
// members, answered (itself counted). Otherwise, when at least two peers did
// not answer, it is isolated, and the failure is not acted on: the node is
// held in the role it had just before (Hold). A lone peer's failure is never
// isolation (with one peer there is nothing to compare with).
//
// The two majorities are the two ways the fleet can shrink without this
// agent being cut off: app agents scaled in or lost (the db agents are still
// reachable) and a rack of db hosts lost (most members still are). Both at
// once is held, for at most the isolation bound.
//
// The fleet is the members alive in this agent's view plus those that failed
// within the window (FleetTracker): a member gone longer than that no longer
// counts, so an old scale-in never makes a later failure look like
// isolation.

// DefaultIsolationWindow is the window of a zero FleetTracker window.
const DefaultIsolationWindow = 10 * time.Second

// Isolation bounds.
const (
	// DefaultIsolationMax is how long a node stays held at most.
	DefaultIsolationMax = time.Minute
	MinIsolationMax     = 5 * time.Second
	MaxIsolationMax     = time.Hour
	// SettleMax bounds how long, once this agent is connected again, a held
	// node that answers its pings is kept while gossip still has it failed.
	SettleMax = 10 * time.Second
)

// FleetMember is a member that counts when judging reachability.
type FleetMember struct {
	Name   string
	DB     bool // a db agent (role db)
	Failed bool // failed in this agent's view (within the window)
}

// Fleet is the members that count: alive in this agent's view, or failed
// within the window. Sorted by name.
type Fleet []FleetMember

// Names returns the members' names.
func (f Fleet) Names() []string {
	out := make([]string, len(f))
	for i, m := range f {
		out[i] = m.Name
	}
	return out
}

// FleetTracker keeps the fleet from successive member lists. It is not safe
// for concurrent use and never reads the clock.
type FleetTracker struct {
	window   time.Duration
	failedAt map[string]time.Time // when a member was first seen failed
	listed   map[string]bool      // alive or failed at the last Observe
}

// NewFleetTracker returns a tracker; window 0 means DefaultIsolationWindow.
func NewFleetTracker(window time.Duration) *FleetTracker {
	if window <= 0 {
		window = DefaultIsolationWindow
	}
	return &FleetTracker{window: window, failedAt: map[string]time.Time{}}
}

// Observe records the member list seen at now and returns the fleet. Left
// and leaving members never count: they said goodbye.
func (t *FleetTracker) Observe(now time.Time, members []Member) Fleet {
	seen := make(map[string]bool, len(members))
	t.listed = make(map[string]bool, len(members))
	var f Fleet
	for _, m := range dedupe(members) {
		seen[m.Name] = true
		t.listed[m.Name] = m.Status == StatusAlive || m.Status == StatusFailed
		if m.Status != StatusFailed {
			delete(t.failedAt, m.Name)
		} else if _, ok := t.failedAt[m.Name]; !ok {
			t.failedAt[m.Name] = now
		}
		switch m.Status {
		case StatusAlive:
		case StatusFailed:
			if now.Sub(t.failedAt[m.Name]) > t.window {
				continue
			}
		default:
			continue
		}
		f = append(f, FleetMember{Name: m.Name, DB: m.Tags[tags.KeyRole] == tags.RoleDB, Failed: m.Status == StatusFailed})
	}
	for name := range t.failedAt {
		if !seen[name] {
			delete(t.failedAt, name)
		}
	}
	return f
}

// Still returns the members of f still listed, alive or failed, at the last
// Observe, with their current status: an isolated agent judges against the
// fleet it had when the isolation began, less the members that left.
func (t *FleetTracker) Still(f Fleet) Fleet {
	var out Fleet
	for _, m := range f {
		if t.listed[m.Name] {
			_, failed := t.failedAt[m.Name]
			m.Failed = failed
			out = append(out, m)
		}
	}
	return out
}

// ReachRound is one reachability check: which members were pinged, and
// whether each answered one of this agent's own pings; and which of those
// that did not answered a peer that did, asked to ping them for this agent
// (a relayed ping).
type ReachRound struct {
	Started, Finished time.Time
	Answered          map[string]bool // asked member → answered
	Relayed           map[string]bool // member that did not answer → answered a peer's relayed ping
}

// Reached reports whether name answered this agent or a relayed ping.
func (r ReachRound) Reached(name string) bool { return r.Answered[name] || r.Relayed[name] }

// Done reports whether the round has finished.
func (r ReachRound) Done() bool { return !r.Finished.IsZero() }

// Reach is how much of the fleet a round reached.
type Reach struct {
	// Reached and Fleet count all members, ReachedDB and FleetDB the db
	// agents; this agent counts as reached. When only a sample was asked,
	// Reached and ReachedDB are estimates, rounded down.
	Reached, Fleet, ReachedDB, FleetDB int
	// Unreached is the estimated number of peers that did not answer.
	Unreached int
}

// Connected reports whether the reach is a strict majority of the db
// agents or of all members, or too few peers were lost to tell (fewer than
// two).
func (r Reach) Connected() bool {
	return 2*r.ReachedDB > r.FleetDB && r.FleetDB > 0 || 2*r.Reached > r.Fleet || r.Unreached < 2
}

// JudgeReach computes what round says of the fleet f for the agent self. A
// member the round asked counts as reached when it answered this agent or a
// peer that relayed the ping (a member that answers a peer this agent
// reaches is on this agent's side of any cut); a failed member it did not
// ask counts as not reached; any other member it did not ask counts in the
// proportion of the alive members it asked in its group (db agents, other
// members).
func JudgeReach(f Fleet, self string, round ReachRound) Reach {
	type group struct{ members, reached, sampled, sampledOK, unsampled int }
	var db, other group
	selfDB := false
	for _, m := range f {
		if m.Name == self {
			selfDB = m.DB
			continue
		}
		g := &other
		if m.DB {
			g = &db
		}
		g.members++
		_, asked := round.Answered[m.Name]
		ok := asked && round.Reached(m.Name)
		switch {
		case asked && ok:
			g.reached++
		case asked || m.Failed:
		default:
			g.unsampled++
		}
		if asked && !m.Failed {
			g.sampled++
			if ok {
				g.sampledOK++
			}
		}
	}
	est := func(g group) int {
		if g.sampled == 0 {
			return g.reached
		}
		return g.reached + g.unsampled*g.sampledOK/g.sampled
	}
	r := Reach{FleetDB: db.members, ReachedDB: est(db)}
	r.Fleet, r.Reached = db.members+other.members, r.ReachedDB+est(other)
	r.Unreached = r.Fleet - r.Reached
	// This agent is always part of the fleet, and reached.
	r.Fleet++
	r.Reached++
	if selfDB {
		r.FleetDB++
		r.ReachedDB++
	}
	return r
}

// Sample picks the members a round asks: the alive db agents and the alive
// other members, at most max of each (pick chooses at random), the failed
// ones too when withFailed (an agent that is cut off has everyone failed),
// and every name of extra. self is never asked.
func Sample(f Fleet, self string, extra []string, max int, withFailed bool, pick func(n int) int) []string {
	var db, other []string
	for _, m := range f {
		switch {
		case m.Name == self, m.Failed && !withFailed:
		case m.DB:
			db = append(db, m.Name)
		default:
			other = append(other, m.Name)
		}
	}
	take := func(names []string) []string {
		for len(names) > max {
			i := pick(len(names))
			names = append(names[:i], names[i+1:]...)
		}
		return names
	}
	set := map[string]bool{}
	for _, n := range append(append(take(db), take(other)...), extra...) {
		if n != self {
			set[n] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// IsolationState is what the router shows of isolation.
type IsolationState struct {
	Isolated bool
	Since    time.Time // when the isolation began; zero when not isolated
	// Reach is what the latest finished round reached.
	Reach Reach
	// Held is the number of nodes held in their role because their
	// failure could not be verified; Expired, that the bound released some.
	Held    int
	Expired bool
}
