package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shoaldb/shoal/internal/hooks"
)

// ProbeState is what the probe collector reads at scrape time.
type ProbeState struct {
	Reachable, ReadOnly bool
	State               string // passing, warning, critical
	LagKnown            bool
	LagSeconds          float64
	Checks, Connects    uint64
	// Facts are the facts the agent publishes (the fact schema, package
	// tags) that are numbers, by their API name: 1 or 0 for a yes/no fact;
	// an unknown one is left out.
	Facts map[string]float64
}

// HookState is one handler's queue as the hooks collector reads it.
type HookState struct {
	Handler         string
	QueueDepth      int
	DroppedByReason map[string]uint64
	DroppedByClass  map[string]map[string]uint64 // class → reason → events
	Coalesced       uint64
}

// StateCollector reports the probe's and the hooks' current state.
type StateCollector struct {
	probe func() (ProbeState, bool) // false on app agents
	hooks func() []HookState

	up, health, lag, readOnly, fact, checks, connects, queue, dropped, coalesced *prometheus.Desc
}

// NewStateCollector reads probe and hooks when scraped.
func NewStateCollector(probe func() (ProbeState, bool), hooks func() []HookState) *StateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &StateCollector{
		probe: probe, hooks: hooks,
		up:        d("mysql_up", "1 when the last probe check reached the local MySQL server (db agents)."),
		health:    d("mysql_health", "1 for the probe's current health state (passing, warning, critical), 0 for the others.", "state"),
		lag:       d("mysql_replication_lag_seconds", "Replication lag of the local server (absent when unknown or not a replica)."),
		readOnly:  d("mysql_read_only", "1 when the local server has read_only on."),
		fact:      d("mysql_fact", "Each fact the agent publishes about the local server in its health tag, by its API name: the number, or 1/0 for yes/no (absent when unknown).", "fact"),
		checks:    d("mysql_checks_total", "Probe checks run."),
		connects:  d("mysql_connects_total", "Connections the probe opened (1 in steady state: it keeps one)."),
		queue:     d("hook_queue_depth", "Events waiting in an event handler's queue.", "handler"),
		dropped:   d("hook_dropped_total", "Events an event handler's queue dropped, by event class (member, shoal, user, query) and reason (queue_full, superseded, handler_removed, runner_closed).", "handler", "class", "reason"),
		coalesced: d("hook_coalesced_total", "Member entries merged or left out by a handler's coalescing.", "handler"),
	}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.health, c.lag, c.readOnly, c.fact, c.checks, c.connects, c.queue, c.dropped, c.coalesced} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	if st, ok := c.probe(); ok {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, b2f(st.Reachable))
		for _, s := range []string{"passing", "warning", "critical"} {
			ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, b2f(st.State == s), s)
		}
		if st.LagKnown {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, st.LagSeconds)
		}
		ch <- prometheus.MustNewConstMetric(c.readOnly, prometheus.GaugeValue, b2f(st.ReadOnly))
		for name, v := range st.Facts {
			ch <- prometheus.MustNewConstMetric(c.fact, prometheus.GaugeValue, v, name)
		}
		ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(st.Checks))
		ch <- prometheus.MustNewConstMetric(c.connects, prometheus.CounterValue, float64(st.Connects))
	}
	for _, h := range c.hooks() {
		handler := Label(h.Handler)
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(h.QueueDepth), handler)
		ch <- prometheus.MustNewConstMetric(c.coalesced, prometheus.CounterValue, float64(h.Coalesced), handler)
		for _, class := range hooks.Classes() {
			for _, r := range hooks.DropReasons() {
				if r == hooks.DropSuperseded && (class == hooks.ClassUser || class == hooks.ClassQuery) {
					continue // only state events are superseded
				}
				ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(h.DroppedByClass[class][r]), handler, class, r)
			}
		}
	}
}
