package agent

import (
	"fmt"
	"runtime/debug"

	"github.com/shoaldb/shoal/internal/agent/poolevent"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/view"
)

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
	run  func(routing.Update, poolevent.Delta)
}

// poolParts returns a listener that derives the update's delta once and
// runs every part with it, in order. A part that panics is recovered, logged
// and counted (shoal_pool_listener_panics_total), and the parts after it
// still get the update.
func (a *Agent) poolParts(parts []poolPart) routing.Listener {
	var t poolevent.Tracker
	return func(u routing.Update) {
		d := t.Next(u)
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

// recordPool writes what an update changed to the history.
func (a *Agent) recordPool(u routing.Update, d poolevent.Delta) {
	for _, e := range poolevent.Entries(u, d) {
		a.rep.hist.Add(e)
	}
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
