package soakcheck

import (
	"fmt"
	"strings"
)

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
	fmt.Fprintf(b, "Every agent routes writes only to the holder of the cluster's writer term, which raft among the three db agents grants. Checked on %d samples of the voters' terms (`/v1/agent/self`) and %d of the agents' pools with the term each followed (`/v1/pool`), each polled every 100 ms, and on the HAProxy samples.\n\n", st.Voters, st.Routes)
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
	}{{"term number with two writers", st.Forks}, {"term went down", st.Back}, {"writer not its term's holder", st.Unowned}, {"writer not the current holder", st.Stale}} {
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
