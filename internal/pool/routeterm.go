package pool

import (
	"fmt"
	"strings"
)

// TermView is what this agent knows of the writer terms when it computes its pool.
type TermView struct {
	Terms map[string]Term // the highest verified term this agent knows, by cluster
	// Unverifiable, when not "", says why this agent cannot verify terms
	// (no consensus key or term key configured). Clusters that require a
	// term then have no writer, and the detail of their writable nodes says this.
	Unverifiable string
	// Conflict, when not "", says why no writes are routed in a cluster
	// that follows terms: voters of more than one raft group are in the
	// gossip (two groups could each grant a writer).
	Conflict string
}

// blocked says why no term can be followed now, "" when terms can.
func (tv TermView) blocked() string {
	if tv.Unverifiable != "" {
		return tv.Unverifiable
	}
	return tv.Conflict
}

// requiresTerm reports whether a cluster's writer follows the writer term:
// one of its db members (not refused as bad) advertises a valid voter tag,
// so consensus grants its terms, and it is not a Galera cluster (no synced
// Galera node), whose writer rule is pickWriter's (DecideTerms grants a
// Galera cluster no term).
func requiresTerm(evals []eval) bool {
	voter := false
	for _, e := range evals {
		if e.galera {
			return false
		}
		voter = voter || e.voter
	}
	return voter
}

// UnsafeNoTerm is Cluster.Unsafe for a replication cluster whose db
// members do not vote (noWriterTerm).
const UnsafeNoTerm = "no writer term"

// noWriterTerm reports whether a cluster's writer follows the old rule
// for want of consensus: none of its db members advertises a voter tag,
// and none is a Galera node (synced or not: Galera's writer rule needs no
// term). Any single writable server is then its writer (pickWriter), so a
// replica made writable, or promoted while the primary is only slow, takes
// the writes.
func noWriterTerm(evals []eval) bool {
	for _, e := range evals {
		if e.voter || e.wsrep {
			return false
		}
	}
	return true
}

// pickTermWriter sets c's writer by the writer term tv knows for c: the
// holder (the writable server with the term's name and address) is the
// writer, by the floor when it is in warning, whatever else is writable;
// every other writable server is out, with reason conflict when the holder
// is the writer and no-term when it is not. The previous pool plays no
// part: the term alone decides, so every agent that knows the same term
// routes to the same writer. cands are the cluster's writable servers
// (passing and in warning), evals all its db members. It returns the
// writer, or nil.
func (c *Cluster) pickTermWriter(cands, evals []eval, tv TermView) *eval {
	t, ok := tv.Terms[c.Name]
	if !ok || t.Number == 0 {
		t = Term{Cluster: c.Name}
	}
	c.Term = &t
	sortEvals(cands)
	var holder *eval
	if tv.blocked() == "" && t.Number != 0 {
		for i := range cands {
			if cands[i].node.Name == t.Writer && cands[i].node.Addr == t.Addr {
				holder = &cands[i]
			}
		}
	}
	var list string
	if len(cands) > 1 {
		for _, e := range cands {
			c.Conflict = append(c.Conflict, e.node.Name)
		}
		list = strings.Join(c.Conflict, ", ")
	}
	for i := range cands {
		e := cands[i]
		switch {
		case &cands[i] == holder && e.kind == kindSoftWriter:
			c.Writers = []Node{writerNode(e, true, fmt.Sprintf("term %d", t.Number))}
		case &cands[i] == holder && list != "":
			c.Writers = []Node{writerNode(e, false, fmt.Sprintf("conflict: writer by term %d; writable: %s", t.Number, list))}
		case &cands[i] == holder:
			c.Writers = []Node{writerNode(e, false, "")}
		case holder != nil:
			c.Out = append(c.Out, Node{Name: e.node.Name, Addr: e.node.Addr, Reason: ReasonConflict,
				Detail: fmt.Sprintf("writable, but term %d belongs to %s", t.Number, t.Writer)})
		default:
			c.Out = append(c.Out, Node{Name: e.node.Name, Addr: e.node.Addr, Reason: ReasonNoTerm, Detail: noTermDetail(t, evals, tv)})
		}
	}
	c.AskTerm = tv.blocked() == "" && (t.Number == 0 || holder == nil && len(cands) > 0)
	return holder
}

// noTermDetail says why a writable server is not the writer when the
// cluster has no writer by the term t.
func noTermDetail(t Term, evals []eval, tv TermView) string {
	switch {
	case tv.blocked() != "":
		return tv.blocked()
	case t.Number == 0:
		return "no writer term known yet"
	}
	state := "not a member"
	for _, e := range evals {
		if e.node.Name != t.Writer {
			continue
		}
		switch {
		case e.node.Addr != t.Addr:
			state = "granted at " + t.Addr + ", now at " + e.node.Addr
		case e.kind == kindReader || e.kind == kindSoftReader:
			state = "read-only"
		default:
			state = string(e.node.Reason)
		}
	}
	return fmt.Sprintf("writable without the writer term; term %d belongs to %s (%s)", t.Number, t.Writer, state)
}
