package soakcheck

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// The writer-term invariants (issue 26): every agent routes writes only to
// the holder of its cluster's writer term, which raft among the db agents
// (the voters) grants. The soak polls every voter's term (its
// /v1/agent/self consensus.terms) and every agent's routing with the term
// its pool followed (/v1/pool clusters[].term), and judges them here.

// TermSample is one voter's term of the cluster, from its /v1/agent/self.
type TermSample struct {
	At     time.Time
	Voter  string
	OK     bool   // the voter answered with its consensus state
	Term   uint64 // 0: it knows none (e.g. restarted, its log not yet applied)
	Writer string
}

// Route is one agent's routing of the cluster's writes: its writers and
// the term its pool followed, from its /v1/pool.
type Route struct {
	At       time.Time
	Observer string
	OK       bool
	Writers  []string
	Term     uint64 // the term the pool followed; 0: none known
	Holder   string // that term's writer
	Out      map[string]string
}

// Writer is the route's writer, "" for none, names joined by "," for
// several.
func (r Route) Writer() string {
	out := ""
	for i, w := range r.Writers {
		if i > 0 {
			out += ","
		}
		out += w
	}
	return out
}

// Grant is one term as the voters showed it: its number, its writer and
// when a voter first showed it.
type Grant struct {
	Term   uint64
	Writer string
	Seen   time.Time
}

// Grants is the term timeline: every term number any voter showed, with
// the writer it named first and its first sighting, in number order.
func Grants(samples []TermSample) []Grant {
	by := map[uint64]Grant{}
	for _, s := range samples {
		if !s.OK || s.Term == 0 {
			continue
		}
		if g, ok := by[s.Term]; !ok || s.At.Before(g.Seen) {
			by[s.Term] = Grant{Term: s.Term, Writer: s.Writer, Seen: s.At}
		}
	}
	out := make([]Grant, 0, len(by))
	for _, g := range by {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Term < out[j].Term })
	return out
}

// grantAt is the grant current on the voters at t: the highest term first
// seen at or before t (false before the first).
func grantAt(gs []Grant, t time.Time) (Grant, bool) {
	var cur Grant
	ok := false
	for _, g := range gs {
		if !g.Seen.After(t) && (!ok || g.Term > cur.Term) {
			cur, ok = g, true
		}
	}
	return cur, ok
}

// currentWithin reports whether writer was the holder of a grant current
// on the voters at some moment of [t-grace, t+skew], and how long ago the
// grant that made it so was superseded (0 when it is current at t).
func currentWithin(gs []Grant, writer string, t time.Time, grace, skew time.Duration) (bool, time.Duration) {
	from, to := t.Add(-grace), t.Add(skew)
	found, best := false, time.Duration(0)
	for i, g := range gs {
		if g.Writer != writer || g.Seen.After(to) {
			continue
		}
		// g is current from g.Seen until a higher grant is first seen.
		end := time.Time{}
		for _, h := range gs[i+1:] {
			if end.IsZero() || h.Seen.Before(end) {
				end = h.Seen
			}
		}
		if !end.IsZero() && end.Before(from) {
			continue
		}
		lag := time.Duration(0)
		if !end.IsZero() && end.Before(t) {
			lag = t.Sub(end)
		}
		if !found || lag < best {
			found, best = true, lag
		}
	}
	return found, best
}

// TermIssue is one sample that breaks a term invariant.
type TermIssue struct {
	At       time.Time
	Observer string // an agent, "hx:<app host>" or a voter
	What     string
}

// TermLimits bound the term checks: Grace is how long after a newer term
// appears on the voters an agent (or HAProxy) may still route to the
// previous holder (gossip and the sink apply: the old holder is no longer
// writable by then); Skew is how much earlier than the voter poll shows a
// term an agent may already follow it (the voters are polled, not
// watched).
type TermLimits struct {
	Grace, Skew time.Duration
}

// TermStats are the term invariants over a run.
type TermStats struct {
	Limits  TermLimits
	Voters  int // voter samples
	Routes  int // agent route samples
	Grants  []Grant
	Forks   []TermIssue // a term number shown with two different writers
	Back    []TermIssue // a voter's (or agent's) term went down
	Unowned []TermIssue // an agent's writer is not the holder of the term it follows, or that term is unknown to the voters
	Stale   []TermIssue // an agent's or HAProxy's writer is not the holder of a term current on the voters (within Grace)
	// MaxLag is the longest an agent or HAProxy still routed to the holder
	// of a superseded term (within Grace); LagObserver had it.
	MaxLag      time.Duration
	LagObserver string
	// Writes are the client writes a server accepted; Outside those
	// accepted by a server that held no term current during the write
	// (CheckTermWrites).
	Writes  int
	Outside []Write
}

// Failures lists the term invariants that missed, one line each.
func (st TermStats) Failures() []string {
	var out []string
	for _, x := range []struct {
		n    int
		what string
	}{
		{len(st.Forks), "samples naming a term number with another writer"},
		{len(st.Back), "samples with a term lower than the same voter's or agent's earlier one"},
		{len(st.Unowned), "agent samples whose writer is not the holder of the term it follows"},
		{len(st.Stale), fmt.Sprintf("agent or HAProxy samples whose writer is not the holder of the term current on the voters (grace %s)", st.Limits.Grace)},
		{len(st.Outside), "client writes accepted by a server that did not hold the term"},
	} {
		if x.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if len(st.Grants) == 0 && st.Voters > 0 {
		out = append(out, "no voter ever showed a term")
	}
	return out
}

// CheckTerms judges the voters' terms, the agents' routes and the
// HAProxies' write backends (samples with Observer "hx:..."; only their
// Writers are read):
//   - a term number names one writer, on every voter and agent;
//   - the term never goes down on a voter, nor on an agent between two
//     samples that both know one with no unanswered or term-0 sample
//     between them (one process: a restarted agent starts without a term,
//     and may first learn an older one from serf's replayed events);
//   - an agent with a writer follows a term, the writer is its holder, and
//     the voters showed that term with that writer;
//   - every writer of an agent or an HAProxy is the holder of a term
//     current on the voters within [t-Grace, t+Skew].
func CheckTerms(voters []TermSample, routes []Route, hx []Sample, lim TermLimits) TermStats {
	st := TermStats{Limits: lim, Voters: len(voters), Routes: len(routes), Grants: Grants(voters)}
	writerOf := map[uint64]string{}
	for _, g := range st.Grants {
		writerOf[g.Term] = g.Writer
	}
	last := map[string]uint64{}
	fork := func(at time.Time, obs string, n uint64, w string) {
		if n == 0 {
			return
		}
		if want, ok := writerOf[n]; ok && want != w {
			st.Forks = append(st.Forks, TermIssue{at, obs, fmt.Sprintf("term %d names %s, the voters first showed it naming %s", n, w, want)})
		}
	}
	back := func(at time.Time, obs string, n uint64) {
		if n == 0 {
			return
		}
		if prev := last[obs]; n < prev {
			st.Back = append(st.Back, TermIssue{at, obs, fmt.Sprintf("term %d after term %d", n, prev)})
		}
		last[obs] = max(last[obs], n)
	}
	vs := slices.Clone(voters)
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].At.Before(vs[j].At) })
	for _, s := range vs {
		if s.OK {
			fork(s.At, s.Voter, s.Term, s.Writer)
			back(s.At, s.Voter, s.Term)
		}
	}
	rs := slices.Clone(routes)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].At.Before(rs[j].At) })
	for _, r := range rs {
		if !r.OK || r.Term == 0 {
			// Down or restarted (a new process starts with no term):
			// the next term it shows starts a new series.
			delete(last, "agent "+r.Observer)
		}
		if !r.OK {
			continue
		}
		fork(r.At, r.Observer, r.Term, r.Holder)
		back(r.At, "agent "+r.Observer, r.Term)
		for _, w := range r.Writers {
			switch {
			case r.Term == 0:
				st.Unowned = append(st.Unowned, TermIssue{r.At, r.Observer, fmt.Sprintf("writer %s with no term", w)})
			case w != r.Holder:
				st.Unowned = append(st.Unowned, TermIssue{r.At, r.Observer, fmt.Sprintf("writer %s, its term %d names %s", w, r.Term, r.Holder)})
			case writerOf[r.Term] == "":
				st.Unowned = append(st.Unowned, TermIssue{r.At, r.Observer, fmt.Sprintf("writer %s by term %d, which no voter showed", w, r.Term)})
			}
			st.current(r.At, r.Observer, w, lim)
		}
	}
	for _, h := range hx {
		if h.OK {
			for _, w := range h.Writers {
				st.current(h.At, h.Observer, w, lim)
			}
		}
	}
	return st
}

// current checks that w, a writer of obs at t, holds a term current on
// the voters within the limits, and keeps the longest lag.
func (st *TermStats) current(t time.Time, obs, w string, lim TermLimits) {
	ok, lag := currentWithin(st.Grants, w, t, lim.Grace, lim.Skew)
	if !ok {
		g, _ := grantAt(st.Grants, t)
		st.Stale = append(st.Stale, TermIssue{t, obs, fmt.Sprintf("writer %s; the voters' term is %d, held by %s", w, g.Term, g.Writer)})
		return
	}
	if lag > st.MaxLag {
		st.MaxLag, st.LagObserver = lag, obs
	}
}

// CheckTermWrites is the database side of the term invariant: every write
// a server accepted must have been accepted by the holder of a term
// current on the voters at some moment of the write (widened by Skew on
// both sides: the voters are polled). It sets st.Writes and st.Outside.
func (st *TermStats) CheckTermWrites(writes []Write) {
	for _, w := range writes {
		if w.Err != "" || w.Node == "" {
			continue
		}
		st.Writes++
		span := w.End.Sub(w.Start) + st.Limits.Skew
		if ok, _ := currentWithin(st.Grants, w.Node, w.End.Add(st.Limits.Skew), span+st.Limits.Skew, 0); !ok {
			st.Outside = append(st.Outside, w)
		}
	}
}
