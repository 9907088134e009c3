package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Agent holds the families the agent observes as things happen (counters
// and histograms). Gauges are read at scrape time by the collectors.
type Agent struct {
	MemberEvents    *prometheus.CounterVec // type
	MemberFlaps     prometheus.Counter
	PoolTransitions *prometheus.CounterVec // cluster, to, reason
	PoolConflicts   *prometheus.CounterVec // cluster
	PoolIsolations  prometheus.Counter
	ListenerPanics  *prometheus.CounterVec // part
	CheckDuration   prometheus.Histogram
	CheckFailures   *prometheus.CounterVec // reason
	StalledTimeouts prometheus.Counter
	HookRuns        *prometheus.CounterVec // handler, result
	HookDuration    *prometheus.HistogramVec
}

// NewAgent returns the families, not registered.
func NewAgent() *Agent {
	return &Agent{
		MemberEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "member_events_total",
			Help: "Membership events this agent received, by type (join, leave, failed, update, reap), one per member."}, []string{"type"}),
		MemberFlaps: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "member_flaps_total",
			Help: "Members seen failed that came back alive (a false failure, or a quick restart)."}),
		PoolTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pool_transitions_total",
			Help: "Pool changes: a node moving to a role (to: writer, reader, writer+reader, out, none), with the reason."}, []string{"cluster", "to", "reason"}),
		PoolConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pool_conflicts_total",
			Help: "Writer conflicts that started (two or more writable nodes in a cluster)."}, []string{"cluster"}),
		PoolIsolations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "pool_isolations_total",
			Help: "Times this agent decided it was cut off and froze removals in its sinks."}),
		ListenerPanics: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pool_listener_panics_total",
			Help: "Panics recovered in a part of the agent's pool listener (history, metrics, hooks, sink:<name>); the other parts still got the update."}, []string{"part"}),
		CheckDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "mysql_check_duration_seconds",
			Help:    "Duration of the local MySQL probe's checks, failed ones included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		CheckFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "mysql_check_failures_total",
			Help: "Failed probe checks by reason (refused, timeout, auth, ...)."}, []string{"reason"}),
		StalledTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "mysql_check_timeouts_host_stalled_total",
			Help: "Check timeouts during which the host itself stalled (PSI) for a quarter of the wait or more, counted as one failure instead of a hung server."}),
		HookRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "hook_runs_total",
			Help: "Event handler runs by handler and result (ok, failed, timed_out)."}, []string{"handler", "result"}),
		HookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "hook_run_duration_seconds",
			Help:    "Duration of event handler runs.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"handler"}),
	}
}

// Collectors returns every family, for registration.
func (m *Agent) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.MemberEvents, m.MemberFlaps, m.PoolTransitions, m.PoolConflicts, m.PoolIsolations, m.ListenerPanics,
		m.CheckDuration, m.CheckFailures, m.StalledTimeouts, m.HookRuns, m.HookDuration}
}
