package pool

import "time"

// DefaultIsolationWindow is the window of a zero IsolationDetector window.
const DefaultIsolationWindow = 10 * time.Second

// IsolationDetector tells an agent when it is probably the one cut off: when
// most of the cluster seems to fail at once, the likelier story is that this
// agent lost its network, and the caller should freeze removals in its local
// sinks rather than drain every server.
//
// Rule: a member "goes failed" at the first observation that shows it failed
// after one that showed it alive. When at least two of the peers that were
// alive at the start of the window (alive now, or gone failed within the
// window), and more than half of them, went failed within the window, the
// agent is isolated. It stays isolated until that no longer holds for those
// members; members that leave or drop out of the member list no longer
// count, so the state cannot stick forever. Left and leaving members are
// never failures. The member list includes this agent itself, which is
// always alive in its own view and is not a peer: with one peer, losing it
// is never isolation; with two, losing both is; with three, losing two is
// (so in a 2|2 split both halves freeze); with four, losing two is not (the
// majority of a 3|2 split keeps removing).
//
// An IsolationDetector is not safe for concurrent use. It never reads the
// clock: the caller passes the time of each observation.
type IsolationDetector struct {
	window   time.Duration
	last     map[string]Status
	failedAt map[string]time.Time // when an alive member was first seen failed
	isolated bool
	since    time.Time
	baseline map[string]bool // while isolated: the members alive before
}

// IsolationState is the result of an observation.
type IsolationState struct {
	Isolated bool
	Since    time.Time // when the isolation began; zero when not isolated
	// Not isolated: members that went failed within the window, out of the
	// members alive at the start of the window. Isolated: members of the
	// baseline not alive now, out of the baseline members still listed.
	Failed, Baseline int
}

// NewIsolationDetector returns a detector with the given window; 0 means
// DefaultIsolationWindow.
func NewIsolationDetector(window time.Duration) *IsolationDetector {
	if window <= 0 {
		window = DefaultIsolationWindow
	}
	return &IsolationDetector{
		window:   window,
		last:     map[string]Status{},
		failedAt: map[string]time.Time{},
	}
}

// Observe records the member list seen at now and returns the state.
func (d *IsolationDetector) Observe(now time.Time, members []Member) IsolationState {
	cur := make(map[string]Status, len(members))
	for _, m := range dedupe(members) {
		cur[m.Name] = m.Status
	}
	for name, st := range cur {
		switch {
		case st == StatusFailed && d.last[name] == StatusAlive:
			d.failedAt[name] = now
		case st != StatusFailed:
			delete(d.failedAt, name)
		}
	}
	for name := range d.failedAt {
		if _, ok := cur[name]; !ok {
			delete(d.failedAt, name)
		}
	}
	d.last = cur

	if d.isolated {
		if st := d.checkRecovered(cur); st.Isolated {
			return st
		}
	}
	alive, recent := 0, 0
	for name, st := range cur {
		if st == StatusAlive {
			alive++
		} else if t, ok := d.failedAt[name]; ok && now.Sub(t) <= d.window {
			recent++
		}
	}
	baseline := alive + recent
	if !isolatedBy(recent, baseline) {
		return IsolationState{Failed: recent, Baseline: baseline}
	}
	d.isolated, d.since = true, now
	d.baseline = map[string]bool{}
	for name, st := range cur {
		if t, ok := d.failedAt[name]; st == StatusAlive || ok && now.Sub(t) <= d.window {
			d.baseline[name] = true
		}
	}
	return IsolationState{Isolated: true, Since: now, Failed: recent, Baseline: baseline}
}

// checkRecovered ends the isolation when more than half of the baseline
// members still listed (and not leaving or left) are alive; it then returns
// a zero state.
func (d *IsolationDetector) checkRecovered(cur map[string]Status) IsolationState {
	listed, alive := 0, 0
	for name := range d.baseline {
		switch st, ok := cur[name]; {
		case !ok, st == StatusLeaving, st == StatusLeft:
			delete(d.baseline, name)
		default:
			listed++
			if st == StatusAlive {
				alive++
			}
		}
	}
	if !isolatedBy(listed-alive, listed) {
		d.isolated, d.since, d.baseline = false, time.Time{}, nil
		return IsolationState{}
	}
	return IsolationState{Isolated: true, Since: d.since, Failed: listed - alive, Baseline: listed}
}

// isolatedBy is the rule: of the members counted (this agent included, which
// never fails in its own view), the failed ones are more than half of the
// peers, and at least two. So a 2|2 split isolates both halves, a 3|2 split
// only the two, and a lone peer's failure is never isolation.
func isolatedBy(failed, members int) bool {
	peers := members - 1
	return failed >= 2 && 2*failed > peers
}
