// Package soakcheck holds the soak test's invariant checks (make soak,
// test/e2e/soak_test.go) as pure functions over what the test observed:
// every agent's and HAProxy's pool samples, the fault schedule with each
// fault's window, the clients' writes and reads, and the resource samples. The e2e
// test collects; this package judges and writes the report, so that the
// judging is unit-tested on synthetic samples in `make test`.
//
// With writer terms (issue 26; the soak's default, SOAK_CONSENSUS=0 runs
// without) the test also polls every voter's term and every agent's pool
// with the term it follows, and terms.go and termfaults.go judge them:
// every writer of an agent or an HAProxy is the holder of the term current
// on the voters, the agent's writer is the holder of the term its pool
// follows, writes are accepted only by a holder, the term never goes down,
// only a switchover moves it, and the faults switchover, second-writable
// and writer-agent-kill do to the term what they must (TermsDoc).
//
// What terms change in the checks below: the expected writer (Expect,
// from the switchovers' primary timeline) and the term holder must
// coincide, which UnexplainedGrants and the switchover check enforce. One
// explanation is added (Fault.OutOn): an app agent restarted by
// agent-kill routes no writes until it has learnt the term (about 0.5 s),
// and its sink applies that, so its HAProxy may lose the writer, and only
// the writer, until then; without terms the restarted agent found the
// writer in its first full member list. Other differences need nothing:
// a switchover has no writer until the new term is granted (inside the
// switchover window), and while the writer's agent is dead no agent has a
// writer (the holder is out everywhere: the fault's node).
package soakcheck

import (
	"slices"
	"sort"
	"time"
)

// Sample is one observation of a pool: an agent's /v1/pool, or an
// HAProxy's ready servers (Observer "hx:<app host>"; writers are the ready
// servers of the write backend, readers those of the read backend).
type Sample struct {
	At       time.Time
	Observer string
	OK       bool // the agent or HAProxy answered
	Writers  []string
	Readers  []string
}

// In reports whether node is in the sample's pool (writer or reader).
func (s Sample) In(node string) bool {
	return slices.Contains(s.Writers, node) || slices.Contains(s.Readers, node)
}

// Fault is one injected fault and what it explains: during [Start, Heal +
// the allowance], Nodes may be out of the pool on every observer, every
// node may be out on the Observers, the nodes of OutOn[observer] on that
// observer, and on an observer of one side of a partition the nodes of the
// other side may be out.
type Fault struct {
	Kind   string
	Target string // e.g. db2, app1, "db1 app2 | db2 db3 app1"
	Start  time.Time
	Heal   time.Time // the fault is over (process restarted, link up, rules removed, ...)

	Nodes     []string
	Observers []string
	Sides     [2][]string
	// OutOn are nodes that may be out on one observer only (observer →
	// nodes): with writer terms, a restarted app agent routes no writes
	// until it has learnt the term, so its HAProxy may lose the writer.
	OutOn map[string][]string

	// Unfence is added to the convergence bound (Result.Bound) of a fault
	// that may have fenced the writer (it was cut off from the voters'
	// majority for about its lease or longer): a fenced writer takes writes
	// again only once contact has been back for consensus.fence_after, by
	// design (docs/consensus.md), so no pool can be healthy before that.
	Unfence time.Duration

	// Holder is the writer-term holder when the fault started, and Other
	// the server a switchover moves the writer to, or the one a
	// second-writable fault makes writable (see CheckTermFaults).
	Holder, Other string
}

// Explains reports whether the fault explains node out of observer's pool
// at time at, given the recovery allowance after the heal.
func (f Fault) Explains(observer, node string, at time.Time, allowance time.Duration) bool {
	if at.Before(f.Start) || at.After(f.Heal.Add(allowance)) {
		return false
	}
	if slices.Contains(f.Nodes, node) || slices.Contains(f.Observers, observer) || slices.Contains(f.OutOn[observer], node) {
		return true
	}
	obs := hostOf(observer)
	for i := range 2 {
		if slices.Contains(f.Sides[i], obs) && slices.Contains(f.Sides[1-i], node) {
			return true
		}
	}
	return false
}

// hostOf is the host an observer runs on ("hx:app1" → "app1").
func hostOf(observer string) string {
	if len(observer) > 3 && observer[:3] == "hx:" {
		return observer[3:]
	}
	return observer
}

// Primary says which db node is the primary from At on.
type Primary struct {
	At   time.Time
	Name string
}

// Expect is the healthy pool at a time: the primary then (the last change
// at or before it) as the writer, every other db node a reader.
type Expect struct {
	DBs       []string  // every db node
	Primaries []Primary // in time order; the first one from the start
}

// PrimaryAt is the primary at time at ("" before the first).
func (e Expect) PrimaryAt(at time.Time) string {
	name := ""
	for _, p := range e.Primaries {
		if p.At.After(at) {
			break
		}
		name = p.Name
	}
	return name
}

// Healthy reports whether s shows the healthy pool of its time.
func (e Expect) Healthy(s Sample) bool {
	if !s.OK {
		return false
	}
	p := e.PrimaryAt(s.At)
	if len(s.Writers) != 1 || s.Writers[0] != p {
		return false
	}
	readers := slices.Clone(s.Readers)
	sort.Strings(readers)
	var want []string
	for _, d := range e.DBs {
		if d != p {
			want = append(want, d)
		}
	}
	sort.Strings(want)
	return slices.Equal(readers, want)
}

// TwoWriters returns the samples with more than one writer.
func TwoWriters(samples []Sample) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.OK && len(s.Writers) > 1 {
			out = append(out, s)
		}
	}
	return out
}

// Removal is a run of samples of one observer in which a db node was out
// of the pool with no fault to explain it.
type Removal struct {
	Observer, Node string
	From, To       time.Time // first and last unexplained sample
	Samples        int
}

// Duration is the span of the removal's samples.
func (r Removal) Duration() time.Duration { return r.To.Sub(r.From) }

// FalseRemovals finds every removal no fault explains: per observer and
// db node, consecutive answered samples showing the node out with no fault
// explaining it (a sample that shows it in, or out but explained, ends the
// run; samples without an answer neither extend nor end it).
func FalseRemovals(samples []Sample, dbs []string, faults []Fault, allowance time.Duration) []Removal {
	byObs := map[string][]Sample{}
	var order []string
	for _, s := range samples {
		if _, ok := byObs[s.Observer]; !ok {
			order = append(order, s.Observer)
		}
		byObs[s.Observer] = append(byObs[s.Observer], s)
	}
	var out []Removal
	for _, obs := range order {
		ss := byObs[obs]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) })
		for _, node := range dbs {
			var cur *Removal
			for _, s := range ss {
				if !s.OK {
					continue
				}
				bad := !s.In(node) && !explained(faults, obs, node, s.At, allowance)
				switch {
				case bad && cur == nil:
					cur = &Removal{Observer: obs, Node: node, From: s.At, To: s.At, Samples: 1}
				case bad:
					cur.To = s.At
					cur.Samples++
				case cur != nil:
					out = append(out, *cur)
					cur = nil
				}
			}
			if cur != nil {
				out = append(out, *cur)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From.Before(out[j].From) })
	return out
}

func explained(faults []Fault, obs, node string, at time.Time, allowance time.Duration) bool {
	for _, f := range faults {
		if f.Explains(obs, node, at, allowance) {
			return true
		}
	}
	return false
}

// Convergence is how long after a fault healed every observer showed the
// healthy pool for good (until the next fault started).
type Convergence struct {
	Fault Fault
	// Took is from the heal to the first sample after which every observer
	// only showed the healthy pool; when Converged is false, the window
	// ended first and Took is the window's length.
	Took      time.Duration
	Converged bool
	// Last is the observer that converged last (or did not).
	Last string
}

// Converge measures, for each fault, the convergence in [its heal, the
// next fault's start) (the last fault: until end). faults must be in time
// order and each healed before the next started. An observer with no
// answered sample in the window has not converged.
func Converge(samples []Sample, observers []string, faults []Fault, e Expect, end time.Time) []Convergence {
	byObs := map[string][]Sample{}
	for _, s := range samples {
		byObs[s.Observer] = append(byObs[s.Observer], s)
	}
	for _, ss := range byObs {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) })
	}
	var out []Convergence
	for i, f := range faults {
		until := end
		if i+1 < len(faults) {
			until = faults[i+1].Start
		}
		c := Convergence{Fault: f, Converged: true}
		for _, obs := range observers {
			at, ok := convergedAt(byObs[obs], f.Heal, until, e)
			d := at.Sub(f.Heal)
			if !ok {
				d = max(0, until.Sub(f.Heal)) // a heal after the end: an empty window
			}
			if (!ok && c.Converged) || (ok == c.Converged && d > c.Took) {
				c.Took, c.Last = d, obs
			}
			c.Converged = c.Converged && ok
		}
		out = append(out, c)
	}
	return out
}

// convergedAt is the time of the first sample in [from, until) of ss (one
// observer's, in time order) after which (itself included) every sample in
// the window is healthy.
func convergedAt(ss []Sample, from, until time.Time, e Expect) (time.Time, bool) {
	var at time.Time
	ok := false
	for i := sort.Search(len(ss), func(i int) bool { return !ss[i].At.Before(from) }); i < len(ss) && ss[i].At.Before(until); i++ {
		if e.Healthy(ss[i]) {
			if !ok {
				at, ok = ss[i].At, true
			}
		} else {
			ok = false
		}
	}
	return at, ok
}

// WriterGap is the longest time observer showed no writer in [from, to]:
// from an answered sample without one to the next answered sample with
// one (or to the last sample in the window).
func WriterGap(samples []Sample, observer string, from, to time.Time) time.Duration {
	var longest time.Duration
	var since, last time.Time
	for _, s := range samples {
		if s.Observer != observer || !s.OK || s.At.Before(from) || s.At.After(to) {
			continue
		}
		last = s.At
		switch {
		case len(s.Writers) == 0 && since.IsZero():
			since = s.At
		case len(s.Writers) > 0 && !since.IsZero():
			longest = max(longest, s.At.Sub(since))
			since = time.Time{}
		}
	}
	if !since.IsZero() {
		longest = max(longest, last.Sub(since))
	}
	return longest
}
