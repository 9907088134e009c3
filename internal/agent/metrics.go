package agent

import (
	"strings"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
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
	)
	cs = append(cs,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shoal_health_publish_failures_total",
			Help: "Publishes of this agent's tags that failed or left something out: user tags withheld so that the health tag fits, a minimal critical health (reason cannot-publish), or a gossip error (retried).",
		}, func() float64 { return float64(a.publishFailures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shoal_tags_published",
			Help: "1 when the last publish of this agent's tags carried everything wanted (health and user tags), 0 otherwise.",
		}, func() float64 {
			if a.PublishStatus().OK {
				return 1
			}
			return 0
		}),
	)
	if g := a.mesh.gate; g != nil {
		for _, r := range []struct {
			result string
			n      func() uint64
		}{{"confirmed", g.Confirmed.Load}, {"refuted", g.Refuted.Load}, {"expired", g.Expired.Load}} {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "shoal_member_failure_checks_total",
				Help:        "Member failures reported by gossip and checked with direct pings, by result: confirmed (unanswered, acted on), refuted (answered, then alive again: not acted on), expired (answered, but gossip still said failed after the hold: acted on).",
				ConstLabels: prometheus.Labels{"result": r.result},
			}, func() float64 { return float64(r.n()) }))
		}
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shoal_member_failure_second_checks_total",
			Help: "Member failure checks that got a second, longer round: the member missed the first but had sent a packet just before its failure arrived, or failures did not arrive alone (another failure or comeback within 1 s, another confirmed failure within 30 s), or this agent's memberlist health score was 4 or more.",
		}, func() float64 { return float64(g.Careful.Load()) }))
		for _, k := range []struct {
			kind string
			n    func() uint64
		}{{"confirm", g.ConfirmPings.Load}, {"revive", g.RevivePings.Load}} {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "shoal_member_failure_pings_total",
				Help:        "Direct pings this agent sent to members gossip reported failed, by kind: confirm (checking a failure before acting on it), revive (watching a confirmed-failed member until it answers again).",
				ConstLabels: prometheus.Labels{"kind": k.kind},
			}, func() float64 { return float64(k.n()) }))
		}
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shoal_member_failures_withheld",
			Help: "Member failures reported by gossip that this agent is still checking (not yet acted on).",
		}, func() float64 { return float64(g.Pending()) }))
	}
	return cs
}

func (a *Agent) probeState() (metrics.ProbeState, bool) {
	st, ok := a.ProbeStatus()
	if !ok {
		return metrics.ProbeState{}, false
	}
	f := st.Known // a check that failed before reading facts changes none
	return metrics.ProbeState{
		Reachable: st.Last.Facts.Reachable, ReadOnly: f.ReadOnly, State: st.State.String(),
		LagKnown: f.Replication.LagKnown, LagSeconds: float64(f.Replication.LagSeconds),
		Checks: st.Checks, Connects: st.Connects,
	}, true
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
func (a *Agent) countPool(u routing.Update, d poolDelta) {
	for _, c := range u.Changes {
		a.rep.metrics.PoolTransitions.WithLabelValues(metrics.Label(c.Cluster), roleName(c.To), metrics.Label(string(c.Reason))).Inc()
	}
	for _, c := range d.conflicts {
		if len(c.now) > 0 && len(c.was) == 0 {
			a.rep.metrics.PoolConflicts.WithLabelValues(metrics.Label(c.cluster)).Inc()
		}
	}
	if d.isolation && u.Isolated {
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
