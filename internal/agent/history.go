package agent

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/shoaldb/shoal/internal/agent/hookevent"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/view"
)

// poolDelta is what one router update changed, derived once for the
// history, the metrics and the hooks.
type poolDelta struct {
	conflicts []conflictChange // clusters whose writer conflict set changed
	terms     []termChange     // clusters whose writer rule follows another term
	isolation bool             // isolation started or ended
}

// termChange is a cluster whose writer rule follows another writer term
// (nil: none required).
type termChange struct {
	cluster  string
	was, now *pool.Term
}

type conflictChange struct {
	cluster  string
	was, now []string
}

// any reports a change worth a pool-change event: a node entered or left a
// role, a conflict or isolation started or ended, or a cluster follows
// another writer term. A change of detail alone (say, the lag figure) is
// not one.
func (d poolDelta) any(u routing.Update) bool {
	return len(u.Changes) > 0 || d.isolation || len(d.conflicts) > 0 || len(d.terms) > 0
}

// onPool is the router listener that feeds the history, the metrics and
// the hooks, each on its own (see poolParts).
func (a *Agent) onPool() routing.Listener {
	return a.poolParts([]poolPart{
		{"history", a.recordPool},
		{"metrics", a.countPool},
		{"hooks", a.hookPool},
	})
}

// poolPart is one consumer of pool updates inside the agent's listener.
type poolPart struct {
	name string
	run  func(routing.Update, poolDelta)
}

// poolParts returns a listener that derives the update's delta once and
// runs every part with it, in order. A part that panics is recovered, logged
// and counted (shoal_pool_listener_panics_total), and the parts after it
// still get the update.
func (a *Agent) poolParts(parts []poolPart) routing.Listener {
	var prev routing.Update
	return func(u routing.Update) {
		d := poolDelta{isolation: u.Isolated != prev.Isolated}
		for _, c := range u.Pool.Clusters {
			if was := conflictOf(prev.Pool, c.Name); !slices.Equal(was, c.Conflict) {
				d.conflicts = append(d.conflicts, conflictChange{c.Name, was, c.Conflict})
			}
			if was := termOf(prev.Pool, c.Name); termText(was) != termText(c.Term) {
				d.terms = append(d.terms, termChange{c.Name, was, c.Term})
			}
		}
		prev = u
		for _, p := range parts {
			a.guardPart(p.name, func() { p.run(u, d) })
		}
	}
}

// guardPart runs f, turning a panic into a logged and counted failure of
// the named part of the pool listener.
func (a *Agent) guardPart(part string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			a.rep.metrics.ListenerPanics.WithLabelValues(part).Inc()
			a.log.Error("pool listener part panicked; the other parts still get the update",
				"part", part, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}

// recordPool writes every pool change, the start and end of writer
// conflicts, each change of the writer term a cluster follows, and the
// start and end of isolation, to the history.
func (a *Agent) recordPool(u routing.Update, d poolDelta) {
	for _, c := range u.Changes {
		a.rep.hist.Add(history.Entry{
			Time: u.At, Kind: history.KindPool, Cluster: c.Cluster, Node: c.Node,
			From: roleName(c.From), To: roleName(c.To), Reason: string(c.Reason), Detail: changeDetail(c, u.Lags),
		})
	}
	for _, c := range d.conflicts {
		a.rep.hist.Add(history.Entry{
			Time: u.At, Kind: history.KindConflict, Cluster: c.cluster,
			From: conflictText(c.was), To: conflictText(c.now),
			Detail: "writable nodes: a conflict keeps at most one writer in the pool",
		})
	}
	for _, c := range d.terms {
		e := history.Entry{Time: u.At, Kind: history.KindTerm, Cluster: c.cluster, From: termText(c.was), To: termText(c.now)}
		if c.now != nil {
			e.Detail = c.now.Why
		}
		a.rep.hist.Add(e)
	}
	if d.isolation {
		e := history.Entry{Time: u.At, Kind: history.KindIsolation, From: "connected", To: "isolated", Detail: isolationText(u.Isolation)}
		switch r := u.Isolation.Reach; {
		case u.Isolation.Expired:
			e.From, e.To = "isolated", "isolation-expired"
		case !u.Isolated:
			e.From, e.To = "isolated", "connected"
			e.Detail = fmt.Sprintf("reaches the fleet again (%d of %d members, %d of %d db agents answered): held nodes are verified one by one", r.Reached, r.Fleet, r.ReachedDB, r.FleetDB)
		}
		a.rep.hist.Add(e)
	}
}

// changeDetail is a change's detail as the history records it: for a
// replica out for its lag (reason stale or lag), the pool's detail with
// the lag's figures at the change, say "behind the writer db1 by more
// than max_lag 10s (gtid): 120 tx, 11.3s". The pool's own detail holds no
// figures, so that the pool, which sinks and hooks get, does not change on
// every tick; the history entry is written once, so it can.
func changeDetail(c pool.Change, lags pool.Lags) string {
	if c.Reason != pool.ReasonStale && c.Reason != pool.ReasonLag {
		return c.Detail
	}
	l, ok := lags.Nodes[c.Cluster][c.Node]
	if !ok {
		return c.Detail
	}
	v := lagView(l)
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

func roleName(r pool.Role) string { return hookevent.RoleName(r) }

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

// recordHealth records a change of the local probe's state.
func (a *Agent) recordHealth(e probe.Event) {
	a.rep.hist.Add(history.Entry{
		Time: e.Status.Since, Kind: history.KindHealth, Cluster: a.cfg.Cluster, Node: a.cfg.Node,
		From: e.PrevState.String(), To: e.Status.State.String(), Reason: string(e.Status.Reason), Detail: e.Status.Message,
	})
}

// recordMaint records an operator's maintenance change on this node.
func (a *Agent) recordMaint(prev string, st view.Maint) {
	from, to := "off", "off"
	if prev != "" {
		from = "on"
	}
	if st.Enabled {
		to = "on"
	}
	if from == to && prev == st.Reason {
		return
	}
	a.rep.hist.Add(history.Entry{Time: a.clock.Now(), Kind: history.KindMaint, Cluster: a.cfg.Cluster, Node: a.cfg.Node,
		From: from, To: to, Reason: st.Reason})
}

// History returns the recorded transitions matching f, oldest first.
func (a *Agent) History(f history.Filter) view.History {
	es := a.rep.hist.Query(f)
	if es == nil {
		es = []history.Entry{}
	}
	st := a.rep.hist.Stats()
	return view.History{Entries: es, Capacity: st.Capacity, Total: st.Total, Evicted: st.Evicted, File: a.cfg.History.File}
}
