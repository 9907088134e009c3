package soakcheck

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Fault kinds whose effect on the writer term is judged (CheckTermFaults).
const (
	KindSwitchover     = "switchover"        // the term moves to Other, by one
	KindSecondWritable = "second-writable"   // the term stays; Other is out conflict
	KindWriterAgent    = "writer-agent-kill" // the term stays; no writer while Holder is failed
)

// TermFault is what one fault did to the writer term.
type TermFault struct {
	Fault  Fault
	Before Grant // current on the voters when the fault started
	// Took: switchover, from the fault's start to the voters showing the
	// new term; writer-agent-kill, from the kill to the last agent showing
	// no writer; second-writable, from the start to the last agent showing
	// Other out with reason conflict.
	Took   time.Duration
	Issues []string
}

// OK reports whether the fault held its term invariants.
func (f TermFault) OK() bool { return len(f.Issues) == 0 }

// CheckTermFaults judges, for each fault of a kind above, the voters'
// terms, the agents' routes and the HAProxies' write backends (hx) in
// [Start, Heal+window]:
//   - switchover: exactly one new term appears, numbered one more than the
//     term at the start and naming Other;
//   - second-writable: the voters' term does not change; until the heal
//     every answered agent and HAProxy routes writes to Holder and nothing
//     else (no agent's writer changes); every agent shows Other out with
//     reason conflict at some point before the heal;
//   - writer-agent-kill: the voters' term does not change; no agent or
//     HAProxy routes writes to anything but Holder; every agent but
//     Holder's own shows no writer before the restart and, once it does,
//     none again until the restart (no writer while Holder is failed);
//     after the restart every agent's last sample in the window routes to
//     Holder under the same term.
//
// Other faults are skipped. Answered samples only; agents whose term is 0
// (restarted, none known yet) are judged on their writer alone.
func CheckTermFaults(faults []Fault, voters []TermSample, routes []Route, hx []Sample, window time.Duration) []TermFault {
	gs := Grants(voters)
	var out []TermFault
	for _, f := range faults {
		if f.Kind != KindSwitchover && f.Kind != KindSecondWritable && f.Kind != KindWriterAgent {
			continue
		}
		tf := TermFault{Fault: f}
		tf.Before, _ = grantAt(gs, f.Start)
		end := f.Heal.Add(window)
		rs := routesIn(routes, f.Start, end)
		switch f.Kind {
		case KindSwitchover:
			tf.switchover(gs, end)
		case KindSecondWritable:
			tf.keep(voters, end)
			tf.secondWritable(rs, hx)
		case KindWriterAgent:
			tf.keep(voters, end)
			tf.writerAgent(rs, hx, end)
		}
		out = append(out, tf)
	}
	return out
}

// routesIn are the answered routes in [from, to], in time order.
func routesIn(routes []Route, from, to time.Time) []Route {
	var out []Route
	for _, r := range routes {
		if r.OK && !r.At.Before(from) && !r.At.After(to) {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func (tf *TermFault) issue(format string, args ...any) {
	tf.Issues = append(tf.Issues, fmt.Sprintf(format, args...))
}

// switchover: one new term, the next number, to Other.
func (tf *TermFault) switchover(gs []Grant, end time.Time) {
	f := tf.Fault
	var moved []Grant
	for _, g := range gs {
		if g.Seen.After(f.Start) && !g.Seen.After(end) {
			moved = append(moved, g)
		}
	}
	if len(moved) != 1 {
		tf.issue("%d new terms on the voters (want 1, to %s)", len(moved), f.Other)
		return
	}
	g := moved[0]
	tf.Took = g.Seen.Sub(f.Start)
	if g.Writer != f.Other || g.Term != tf.Before.Term+1 {
		tf.issue("term %d to %s after term %d to %s (want term %d to %s)", g.Term, g.Writer, tf.Before.Term, tf.Before.Writer, tf.Before.Term+1, f.Other)
	}
}

// keep: the voters show the term of the start, and no other, until end.
func (tf *TermFault) keep(voters []TermSample, end time.Time) {
	f := tf.Fault
	if tf.Before.Term == 0 {
		tf.issue("no term on the voters at the start")
		return
	}
	if tf.Before.Writer != f.Holder {
		tf.issue("the voters' term %d names %s, the fault's holder is %s", tf.Before.Term, tf.Before.Writer, f.Holder)
	}
	n := 0
	var first TermSample
	for _, s := range voters {
		if s.OK && s.Term != 0 && !s.At.Before(f.Start) && !s.At.After(end) && (s.Term != tf.Before.Term || s.Writer != tf.Before.Writer) {
			if n == 0 || s.At.Before(first.At) {
				first = s
			}
			n++
		}
	}
	if n > 0 {
		tf.issue("the term changed: %d voter samples, the first on %s at +%s: term %d to %s",
			n, first.Voter, first.At.Sub(f.Start).Round(10*time.Millisecond), first.Term, first.Writer)
	}
}

// secondWritable: Holder alone is the writer everywhere until the heal;
// Other seen out conflict by every agent.
func (tf *TermFault) secondWritable(rs []Route, hx []Sample) {
	f := tf.Fault
	conflict := map[string]time.Time{}
	var agents []string
	bad := map[string]int{}
	firstBad := map[string]string{}
	for _, r := range rs {
		if r.At.After(f.Heal) {
			break
		}
		if !slices.Contains(agents, r.Observer) {
			agents = append(agents, r.Observer)
		}
		if !slices.Equal(r.Writers, []string{f.Holder}) {
			if bad[r.Observer] == 0 {
				firstBad[r.Observer] = fmt.Sprintf("writer %q at +%s", r.Writer(), r.At.Sub(f.Start).Round(10*time.Millisecond))
			}
			bad[r.Observer]++
		}
		if _, ok := conflict[r.Observer]; !ok && r.Out[f.Other] == "conflict" {
			conflict[r.Observer] = r.At
		}
	}
	for _, h := range hx {
		if h.OK && !h.At.Before(f.Start) && !h.At.After(f.Heal) && !slices.Equal(h.Writers, []string{f.Holder}) {
			if bad[h.Observer] == 0 {
				firstBad[h.Observer] = fmt.Sprintf("write backend %v at +%s", h.Writers, h.At.Sub(f.Start).Round(10*time.Millisecond))
			}
			bad[h.Observer]++
		}
	}
	tf.writerIssues(bad, firstBad, "not routing writes to "+f.Holder+" alone")
	for _, a := range agents {
		at, ok := conflict[a]
		if !ok {
			tf.issue("%s never showed %s out with reason conflict", a, f.Other)
			continue
		}
		tf.Took = max(tf.Took, at.Sub(f.Start))
	}
}

// writerAgent: Holder or no writer; no writer while Holder is failed;
// Holder again, same term, after the restart.
func (tf *TermFault) writerAgent(rs []Route, hx []Sample, end time.Time) {
	f := tf.Fault
	bad := map[string]int{}
	firstBad := map[string]string{}
	note := func(obs, what string, at time.Time) {
		if bad[obs] == 0 {
			firstBad[obs] = fmt.Sprintf("%s at +%s", what, at.Sub(f.Start).Round(10*time.Millisecond))
		}
		bad[obs]++
	}
	var agents []string
	dropped := map[string]time.Time{} // first sample without a writer
	back := map[string]bool{}         // a writer again before the heal
	lastRoute := map[string]Route{}
	for _, r := range rs {
		if !slices.Contains(agents, r.Observer) {
			agents = append(agents, r.Observer)
		}
		if w := r.Writer(); w != "" && w != f.Holder {
			note(r.Observer, "writer "+w, r.At)
		}
		if r.Term != 0 && r.Term != tf.Before.Term {
			note(r.Observer, fmt.Sprintf("term %d", r.Term), r.At)
		}
		if r.At.After(f.Heal) {
			lastRoute[r.Observer] = r
			continue
		}
		if _, ok := dropped[r.Observer]; !ok && len(r.Writers) == 0 {
			dropped[r.Observer] = r.At
		} else if ok && len(r.Writers) > 0 {
			back[r.Observer] = true
		}
	}
	for _, h := range hx {
		if h.OK && !h.At.Before(f.Start) && !h.At.After(end) && len(h.Writers) > 0 && !slices.Equal(h.Writers, []string{f.Holder}) {
			note(h.Observer, fmt.Sprintf("write backend %v", h.Writers), h.At)
		}
	}
	tf.writerIssues(bad, firstBad, "routing writes elsewhere than "+f.Holder)
	for _, a := range agents {
		if a == f.Holder {
			continue // its own agent is the one killed
		}
		at, ok := dropped[a]
		switch {
		case !ok:
			tf.issue("%s kept a writer until the restart (want none while %s is failed)", a, f.Holder)
		case back[a]:
			tf.issue("%s had a writer again before the restart", a)
		default:
			tf.Took = max(tf.Took, at.Sub(f.Start))
		}
	}
	for _, a := range agents {
		r, ok := lastRoute[a]
		switch {
		case !ok:
			tf.issue("%s: no answered sample after the restart", a)
		case r.Writer() != f.Holder || r.Term != tf.Before.Term:
			tf.issue("%s after the restart: writer %q under term %d (want %s under term %d)", a, r.Writer(), r.Term, f.Holder, tf.Before.Term)
		}
	}
}

func (tf *TermFault) writerIssues(bad map[string]int, first map[string]string, what string) {
	var obs []string
	for o := range bad {
		obs = append(obs, o)
	}
	sort.Strings(obs)
	for _, o := range obs {
		tf.issue("%s %s: %d samples, the first %s", o, what, bad[o], first[o])
	}
}

// UnexplainedGrants are the terms the voters showed after the first one
// that no switchover explains: seen outside every switchover's [Start,
// Heal+window]. Only a switchover (an outside promotion) moves the term in
// the soak; any other fault must leave it.
func UnexplainedGrants(gs []Grant, faults []Fault, window time.Duration) []Grant {
	var out []Grant
	for i, g := range gs {
		if i == 0 {
			continue
		}
		ok := false
		for _, f := range faults {
			if f.Kind == KindSwitchover && g.Seen.After(f.Start) && !g.Seen.After(f.Heal.Add(window)) {
				ok = true
			}
		}
		if !ok {
			out = append(out, g)
		}
	}
	return out
}

// String is the grant in words: "term 3 to db2".
func (g Grant) String() string {
	if g.Term == 0 {
		return "no term"
	}
	return fmt.Sprintf("term %d to %s", g.Term, g.Writer)
}
