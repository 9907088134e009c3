package metrics

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// AppliedTermCollector reports, at scrape time, the writer term this
// router's sinks have applied per cluster (package switchover):
// what a switchover waits on.
type AppliedTermCollector struct {
	read func() map[string]uint64
	term *prometheus.Desc
}

// NewAppliedTermCollector reads terms when scraped: the applied term
// number by cluster, nil on an agent without sinks (no series).
func NewAppliedTermCollector(terms func() map[string]uint64) *AppliedTermCollector {
	return &AppliedTermCollector{read: terms, term: prometheus.NewDesc(Namespace+"_router_applied_term",
		"The writer term of the pool every sink of this agent has fully applied, by cluster (0: none, or the cluster requires none). No series on an agent without sinks.",
		[]string{"cluster"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *AppliedTermCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.term }

// Collect implements prometheus.Collector.
func (c *AppliedTermCollector) Collect(ch chan<- prometheus.Metric) {
	terms := c.read()
	// Cluster names come from gossip: two that show as the same label are
	// reported once (the first in name order).
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(terms)) {
		if l := Label(name); !seen[l] {
			seen[l] = true
			ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(terms[name]), l)
		}
	}
}
