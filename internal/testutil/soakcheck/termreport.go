package soakcheck

import (
	"fmt"
	"strings"
	"time"
)

// TermsDoc says, in the report and in docs/soak.md, what the soak checks
// of the writer terms and what the term faults are.
const TermsDoc = `The agents run with writer terms (issue 26, [consensus.md](consensus.md)): the three db agents are raft voters (` + "`--consensus-key`, `--consensus-bootstrap-expect 3`" + `), the app agents verify terms with the same key, and every agent routes writes only to the holder of the cluster's term. ` + "`SOAK_CONSENSUS=0 make soak`" + ` runs without (each agent picks the writer from its own view, as before issue 26; the term checks are then skipped). The soak polls every voter's term (` + "`/v1/agent/self`, `consensus.terms`" + `) and every agent's pool with the term it follows (` + "`/v1/pool`, `clusters[].term`" + `) every 100 ms, and checks:

- a term number names one writer, on every voter and agent, and the term never goes down on a voter (nor on an agent process; "no term known yet", after a restart, is not a term);
- an agent's writer is always the holder of the term its pool follows, and the voters showed that term with that writer;
- every agent's and HAProxy's writer is the holder of the term current on the voters, allowing 2 s behind a new term (gossip and the sink; the old holder is read-only by then) and 0.5 s ahead of the poll;
- every client write was accepted by the holder of a term current during the write (0.5 s either side);
- only a switchover moves the term: exactly one new term, numbered one more, to the new primary; every other ` + "`switchover`" + ` fault is ` + "`shoal switchover --to NODE`" + ` run on a random db agent (out before in: demote, catch up, grant, promote, re-point, every router applied; the command must exit 0), the others a ` + "`read_only`" + ` flip by hand (an outside promotion);
- ` + "`second-writable`" + ` (a replica made writable by mistake with ` + "`SET GLOBAL read_only=0`" + ` for 5-15 s, then read-only again): the term stays; until the heal every agent and HAProxy routes writes to the holder alone (no agent's writer changes), and every agent shows the replica out with reason ` + "`conflict`" + ` (explained, not a false removal);
- ` + "`writer-agent-kill`" + ` (the holder's agent killed with SIGKILL while its mysqld runs on, restarted 5-15 s later): the term stays; no agent or HAProxy routes writes anywhere but the holder; every other agent drops the writer once the member is failed and has none until the restart; after it every agent routes to the holder under the same term.

The invariants above the terms are unchanged but for one explanation: with terms, an app agent restarted by ` + "`agent-kill`" + ` routes no writes until it has learnt the term (about 0.5 s after it joins), and its sink applies that: its HAProxy loses the writer (and its open write sessions are shut down) until then. So that fault also explains the writer, and only the writer, out of that host's HAProxy. Other differences need no change: a switchover has no writer until the new term is granted (inside the switchover window), and while the writer's agent is dead no agent has a writer (the holder is the fault's node).`

// termFailures are the term invariants that missed (none without
// consensus).
func (r Result) termFailures() []string {
	if !r.Consensus {
		return nil
	}
	out := r.Terms.Failures()
	if n := len(r.Unexplained); n > 0 {
		out = append(out, fmt.Sprintf("%d terms granted outside switchovers", n))
	}
	bad := 0
	for _, f := range r.TermFaults {
		if !f.OK() {
			bad++
		}
	}
	if bad > 0 {
		out = append(out, fmt.Sprintf("%d of %d switchover, second-writable and writer-agent-kill faults broke their term invariant", bad, len(r.TermFaults)))
	}
	return out
}

// terms writes the report's writer-term section.
func (r Result) terms(b *strings.Builder) {
	b.WriteString("## Writer terms\n\n")
	if !r.Consensus {
		b.WriteString("This run had no consensus (`SOAK_CONSENSUS=0`): every agent chose the writer from its own view (the rule before issue 26); the term invariants were not checked.\n\n")
		return
	}
	st := r.Terms
	fmt.Fprintf(b, "%s\n\nChecked on %d samples of the voters' terms and %d of the agents' pools with the term each followed, and on the HAProxy samples.\n\n", TermsDoc, st.Voters, st.Routes)
	b.WriteString("| invariant | target | measured | verdict |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| a term number names one writer, on every voter and agent | 0 samples | %d | %s |\n", len(st.Forks), verdict(len(st.Forks) == 0))
	fmt.Fprintf(b, "| the term never goes down on a voter (nor on an agent process) | 0 samples | %d | %s |\n", len(st.Back), verdict(len(st.Back) == 0))
	fmt.Fprintf(b, "| an agent's writer is the holder of the term its pool follows, a term the voters showed | 0 samples | %d | %s |\n", len(st.Unowned), verdict(len(st.Unowned) == 0))
	lag := "no agent lagged a new term"
	if st.MaxLag > 0 {
		lag = fmt.Sprintf("longest behind a new term: %s (%s)", secs(st.MaxLag), st.LagObserver)
	}
	fmt.Fprintf(b, "| every agent's and HAProxy's writer is the holder of the term current on the voters (up to %s behind a new term, %s ahead of the voter poll) | 0 samples | %d; %s | %s |\n",
		st.Limits.Grace, st.Limits.Skew, len(st.Stale), lag, verdict(len(st.Stale) == 0))
	fmt.Fprintf(b, "| client writes accepted only by the holder of the term current during the write (%s either side) | 0 | %d of %d accepted | %s |\n", st.Limits.Skew, len(st.Outside), st.Writes, verdict(len(st.Outside) == 0))
	fmt.Fprintf(b, "| the term changes only with a switchover | 0 other terms | %d | %s |\n", len(r.Unexplained), verdict(len(r.Unexplained) == 0))
	bad := 0
	for _, f := range r.TermFaults {
		if !f.OK() {
			bad++
		}
	}
	fmt.Fprintf(b, "| switchover moves the term by one to the new primary; second-writable and writer-agent-kill keep it (see below) | 0 faults broken | %d of %d | %s |\n\n", bad, len(r.TermFaults), verdict(bad == 0))
	var gs []string
	for _, g := range st.Grants {
		gs = append(gs, fmt.Sprintf("%s (first seen %s)", g, r.at(g.Seen)))
	}
	if len(gs) == 0 {
		gs = []string{"none"}
	}
	fmt.Fprintf(b, "Terms the voters showed: %s.\n\n", strings.Join(gs, ", "))
	for _, g := range r.Unexplained {
		fmt.Fprintf(b, "- %s, first seen %s, in no switchover\n", g, r.at(g.Seen))
	}
	for _, x := range []struct {
		name string
		is   []TermIssue
	}{{"write accepted outside its term", outsideIssues(st.Outside)}, {"term number with two writers", st.Forks}, {"term went down", st.Back}, {"writer not its term's holder", st.Unowned}, {"writer not the current holder", st.Stale}} {
		for _, i := range x.is[:min(len(x.is), 10)] {
			fmt.Fprintf(b, "- %s at %s on %s: %s\n", x.name, r.at(i.At), i.Observer, i.What)
		}
	}
	if len(r.TermFaults) == 0 {
		return
	}
	b.WriteString("\nPer fault (took: switchover, from its start to the new term on a voter; second-writable, to the last agent showing the writable replica out with reason conflict; writer-agent-kill, to the last agent showing no writer):\n\n| start | fault | target | before | took | verdict |\n|---|---|---|---|---|---|\n")
	for _, f := range r.TermFaults {
		v := "pass"
		if !f.OK() {
			v = "**FAIL**: " + strings.Join(f.Issues, "; ")
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", r.at(f.Fault.Start), f.Fault.Kind, f.Fault.Target, f.Before, secs(f.Took), v)
	}
	b.WriteString("\n")
}

// outsideIssues are the writes accepted outside their term as issues.
func outsideIssues(ws []Write) []TermIssue {
	var out []TermIssue
	for _, w := range ws {
		out = append(out, TermIssue{w.Start, w.Client, fmt.Sprintf("accepted by %s in %s", w.Node, w.End.Sub(w.Start).Round(time.Millisecond))})
	}
	return out
}
