package agent

import (
	"strings"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/agent/hookevent"
	"github.com/shoaldb/shoal/internal/agent/poolevent"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// Collectors returns every metric family of this agent, for a registry.
func (a *Agent) Collectors() []prometheus.Collector {
	cs := a.rep.metrics.Collectors()
	cs = append(cs,
		metrics.NewMembersCollector(a.Members, func() int { return a.Serf().Memberlist().GetHealthScore() }),
		metrics.NewPoolCollector(func() view.Pool {
			v, _ := a.PoolView("")
			return v
		}),
		metrics.NewStateCollector(a.probeState, a.hookState),
		metrics.NewConsensusCollector(a.consensusInfo, a.clock.Now),
		metrics.NewAppliedTermCollector(a.appliedTermsNow),
	)
	ts := a.cons.terms.Stats()
	cs = append(cs, metrics.NewTermCollectors(metrics.TermCounts{
		Learned: ts.Learned.Load, NotNewer: ts.Stale.Load, BadSignature: ts.BadSignature.Load, Malformed: ts.Malformed.Load,
		Dropped: ts.Dropped.Load, Asked: ts.Asked.Load, Answered: ts.Answered.Load, ForeignGroup: ts.ForeignGroup.Load,
	})...)
	cs = append(cs, a.cons.fence.Collectors()...)
	sw := a.cons.sw.Stats()
	cs = append(cs, metrics.NewSwitchoverCollectors(metrics.SwitchoverCounts{Taken: sw.Taken.Load, Refused: sw.Refused.Load, Resumed: sw.Resumed.Load,
		FailoversPromoted: sw.FailoversPromoted.Load, FailoversNotDone: sw.FailoversNotDone.Load, LostTransactions: sw.LostTransactions.Load})...)
	cs = append(cs, metrics.NewPublishCollectors(a.publishFailures, func() bool { return a.PublishStatus().OK })...)
	if r := a.mesh.reach; r != nil {
		cs = append(cs, metrics.NewReachCollectors(metrics.ReachCounts{Rounds: r.Rounds.Load, Pings: r.Pings.Load, Refused: r.Dropped.Load})...)
	}
	if p := a.mesh.pos; p != nil { // nil in unit tests that build an agent by hand
		st := func(f func(gossip.PosStats) uint64) func() uint64 { return func() uint64 { return f(p.Stats()) } }
		cs = append(cs, metrics.NewPositionCollectors(metrics.PositionCounts{
			Published: st(func(s gossip.PosStats) uint64 { return s.Published }), PacketsSent: st(func(s gossip.PosStats) uint64 { return s.PacketsSent }),
			BytesSent: st(func(s gossip.PosStats) uint64 { return s.BytesSent }), SendErrors: st(func(s gossip.PosStats) uint64 { return s.SendErrors }),
			Received: st(func(s gossip.PosStats) uint64 { return s.Received }), New: st(func(s gossip.PosStats) uint64 { return s.New }),
			Bad: st(func(s gossip.PosStats) uint64 { return s.PacketsBad }), Dropped: st(func(s gossip.PosStats) uint64 { return s.QueueDropped }),
		})...)
	}
	if g := a.mesh.gate; g != nil {
		cs = append(cs, metrics.NewGateCollectors(metrics.GateCounts{
			Confirmed: g.Confirmed.Load, Refuted: g.Refuted.Load, Expired: g.Expired.Load, Careful: g.Careful.Load,
			ConfirmPings: g.ConfirmPings.Load, RevivePings: g.RevivePings.Load, Pending: g.Pending, Syncs: g.Syncs.Load,
		})...)
	}
	return cs
}

func (a *Agent) probeState() (metrics.ProbeState, bool) {
	st, ok := a.ProbeStatus()
	if !ok {
		return metrics.ProbeState{}, false
	}
	h := st.Health(a.mysqlPort()) // what the agent publishes
	return metrics.ProbeState{
		Reachable: st.Last.Facts.Reachable, ReadOnly: h.ReadOnly, State: st.State.String(),
		LagKnown: h.LagKnown, LagSeconds: float64(h.LagSeconds), Facts: factValues(h),
		Checks: st.Checks, Connects: st.Connects,
	}, true
}

// factValues are h's facts that are numbers or yes/no, by their API name
// (tags.Show): every fact of the schema reaches /metrics with no change here.
func factValues(h tags.Health) map[string]float64 {
	out := map[string]float64{}
	for name, v := range tags.Show(h) {
		switch v := v.(type) {
		case bool:
			out[name] = 0
			if v {
				out[name] = 1
			}
		case uint16:
			out[name] = float64(v)
		case uint32:
			out[name] = float64(v)
		}
	}
	return out
}

func (a *Agent) hookState() []metrics.HookState {
	st := a.rep.hooks.Stats()
	out := make([]metrics.HookState, len(st))
	for i, h := range st {
		out[i] = metrics.HookState{Handler: h.Spec, QueueDepth: h.QueueDepth, DroppedByReason: h.DroppedByReason, DroppedByClass: h.DroppedByClass, Coalesced: h.Coalesced}
	}
	return out
}

// countEvent counts membership events and flaps (failed, then alive again).
// It runs in serf's event loop.
func (a *Agent) countEvent(me serf.MemberEvent) {
	typ := strings.TrimPrefix(me.Type.String(), "member-")
	a.rep.metrics.MemberEvents.WithLabelValues(typ).Add(float64(len(me.Members)))
	if n := a.rep.flaps.observe(me); n > 0 {
		a.rep.metrics.MemberFlaps.Add(float64(n))
	}
}

// countPool counts transitions, and conflicts and isolations that started.
func (a *Agent) countPool(u routing.Update, d poolevent.Delta) {
	for _, c := range u.Changes {
		a.rep.metrics.PoolTransitions.WithLabelValues(metrics.Label(c.Cluster), hookevent.RoleName(c.To), metrics.Label(string(c.Reason))).Inc()
	}
	for _, c := range d.Conflicts {
		if len(c.Now) > 0 && len(c.Was) == 0 {
			a.rep.metrics.PoolConflicts.WithLabelValues(metrics.Label(c.Cluster)).Inc()
		}
	}
	if d.Isolation && u.Isolated {
		a.rep.metrics.PoolIsolations.Inc()
	}
}

// countCheck observes one probe check.
func (a *Agent) countCheck(e probe.Event) {
	r := e.Status.Last
	a.rep.metrics.CheckDuration.Observe(r.Duration.Seconds())
	if r.Outcome == probe.OutcomeFail || r.Outcome == probe.OutcomeHardFail {
		a.rep.metrics.CheckFailures.WithLabelValues(metrics.Label(string(r.Reason))).Inc()
	}
	if r.Reason == probe.ReasonTimeout && r.HostStalled() {
		a.rep.metrics.StalledTimeouts.Inc()
	}
}
