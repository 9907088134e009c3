// Package poolevent derives what one router update changed (the pool
// changes, the start and end of writer conflicts, a change of the writer
// term a cluster follows, isolation), once per update, for the agent's
// history, metrics and hooks, and turns it into history entries with the
// detail operators read (a stale replica's lag figures, the isolation's
// reach).
package poolevent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shoaldb/shoal/internal/agent/hookevent"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/view"
)

// Delta is what one router update changed, derived once for the
// history, the metrics and the hooks.
type Delta struct {
	Conflicts []ConflictChange // clusters whose writer conflict set changed
	Terms     []TermChange     // clusters whose writer rule follows another term
	Isolation bool             // isolation started or ended
}

// TermChange is a cluster whose writer rule follows another writer term
// (nil: none required).
type TermChange struct {
	Cluster  string
	Was, Now *pool.Term
}

// ConflictChange is a cluster whose set of writable nodes in conflict
// changed.
type ConflictChange struct {
	Cluster  string
	Was, Now []string
}

// Any reports a change worth a pool-change event: a node entered or left a
// role, a conflict or isolation started or ended, or a cluster follows
// another writer term. A change of detail alone (say, the lag figure) is
// not one.
func (d Delta) Any(u routing.Update) bool {
	return len(u.Changes) > 0 || d.Isolation || len(d.Conflicts) > 0 || len(d.Terms) > 0
}

// Tracker derives each update's Delta from the update before it.
type Tracker struct{ prev routing.Update }

// Next returns what u changed since the update before it.
func (t *Tracker) Next(u routing.Update) Delta {
	d := Delta{Isolation: u.Isolated != t.prev.Isolated}
	for _, c := range u.Pool.Clusters {
		if was := conflictOf(t.prev.Pool, c.Name); !slices.Equal(was, c.Conflict) {
			d.Conflicts = append(d.Conflicts, ConflictChange{c.Name, was, c.Conflict})
		}
		if was := termOf(t.prev.Pool, c.Name); termText(was) != termText(c.Term) {
			d.Terms = append(d.Terms, TermChange{c.Name, was, c.Term})
		}
	}
	t.prev = u
	return d
}

// Entries are the history entries of an update: every pool change, the
// start and end of writer conflicts, each change of the writer term a
// cluster follows, and the start and end of isolation.
func Entries(u routing.Update, d Delta) []history.Entry {
	var out []history.Entry
	for _, c := range u.Changes {
		out = append(out, history.Entry{
			Time: u.At, Kind: history.KindPool, Cluster: c.Cluster, Node: c.Node,
			From: hookevent.RoleName(c.From), To: hookevent.RoleName(c.To), Reason: string(c.Reason), Detail: ChangeDetail(c, u.Lags),
		})
	}
	for _, c := range d.Conflicts {
		out = append(out, history.Entry{
			Time: u.At, Kind: history.KindConflict, Cluster: c.Cluster,
			From: conflictText(c.Was), To: conflictText(c.Now),
			Detail: "writable nodes: a conflict keeps at most one writer in the pool",
		})
	}
	for _, c := range d.Terms {
		e := history.Entry{Time: u.At, Kind: history.KindTerm, Cluster: c.Cluster, From: termText(c.Was), To: termText(c.Now)}
		if c.Now != nil {
			e.Detail = c.Now.Why
		}
		out = append(out, e)
	}
	if d.Isolation {
		e := history.Entry{Time: u.At, Kind: history.KindIsolation, From: "connected", To: "isolated", Detail: IsolationText(u.Isolation)}
		switch r := u.Isolation.Reach; {
		case u.Isolation.Expired:
			e.From, e.To = "isolated", "isolation-expired"
		case !u.Isolated:
			e.From, e.To = "isolated", "connected"
			e.Detail = fmt.Sprintf("reaches the fleet again (%d of %d members, %d of %d db agents answered): held nodes are verified one by one", r.Reached, r.Fleet, r.ReachedDB, r.FleetDB)
		}
		out = append(out, e)
	}
	return out
}

// ChangeDetail is a change's detail as the history records it: for a
// replica out for its lag (reason stale or lag), the pool's detail with
// the lag's figures at the change, say "behind the writer db1 by more
// than max_lag 10s (gtid): 120 tx, 11.3s". The pool's own detail holds no
// figures, so that the pool, which sinks and hooks get, does not change on
// every tick; the history entry is written once, so it can.
func ChangeDetail(c pool.Change, lags pool.Lags) string {
	if c.Reason != pool.ReasonStale && c.Reason != pool.ReasonLag {
		return c.Detail
	}
	l, ok := lags.Nodes[c.Cluster][c.Node]
	if !ok {
		return c.Detail
	}
	v := LagView(l)
	src := "(" + v.Source + ")"
	var fig string
	if v.Seconds != nil || v.Transactions != nil {
		fig = v.Figures()
	}
	if !strings.Contains(c.Detail, src) {
		fig = strings.TrimSpace(fig + " " + src)
	}
	switch {
	case fig == "":
		return c.Detail
	case c.Detail == "":
		return fig
	case strings.HasPrefix(fig, "("):
		return c.Detail + " " + fig
	}
	return c.Detail + ": " + fig
}

func conflictOf(p *pool.Pool, cluster string) []string {
	if c := p.Cluster(cluster); c != nil {
		return c.Conflict
	}
	return nil
}

func termOf(p *pool.Pool, cluster string) *pool.Term {
	if c := p.Cluster(cluster); c != nil {
		return c.Term
	}
	return nil
}

// termText is a writer term as the history shows it: "3 (db1)", "none
// known" (required, none known) or "not required". Two terms with the same
// text are the same term: the number is a term's identity, the writer
// tells operators who holds it.
func termText(t *pool.Term) string {
	switch {
	case t == nil:
		return "not required"
	case t.Number == 0:
		return "none known"
	}
	return fmt.Sprintf("%d (%s)", t.Number, t.Writer)
}

func conflictText(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// LagView is a replica's lag as the API shows it: seconds absent when
// unknown, transactions only when measured by GTID.
func LagView(l pool.Lag) *view.Lag {
	v := &view.Lag{Source: string(l.Source), AtLeast: l.AtLeast}
	if l.Known {
		s := l.Seconds
		v.Seconds = &s
	}
	if l.Source == pool.LagGTID {
		n := l.Transactions
		v.Transactions = &n
	}
	return v
}

// IsolationText explains the isolation state to operators; "" when this
// agent reaches the fleet.
func IsolationText(s pool.IsolationState) string {
	r := s.Reach
	switch {
	case s.Expired:
		return fmt.Sprintf("this agent has not reached the fleet for longer than pool.isolation_max (%d of %d members, %d of %d db agents answered its pings): it no longer holds nodes and acts on its own view",
			r.Reached, r.Fleet, r.ReachedDB, r.FleetDB)
	case s.Isolated:
		return fmt.Sprintf("this agent cannot reach the fleet (%d of %d members, %d of %d db agents answered its pings): it holds %d nodes whose failure it cannot verify in the role they had, and its sinks withhold removals it cannot verify",
			r.Reached, r.Fleet, r.ReachedDB, r.FleetDB, s.Held)
	}
	return ""
}
