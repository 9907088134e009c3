// Package metrics declares every Prometheus metric family shoal exports,
// and builds the agent's registry.
//
// The rule: a family's name, type, help and labels are written in this
// package and nowhere else. Other packages only hand it values: they count
// on the counters and histograms of a type declared here (Agent for the
// agent's events, HTTPConns for the HTTP API's connection limiter), or
// give a collector here the funcs it reads at scrape time
// (NewMembersCollector, NewPoolCollector, NewStateCollector,
// NewConsensusCollector, NewPublishCollectors, NewGateCollectors). docs/observability.md lists
// them all (TestMetricsDocumented in package agent), and
// TestFamiliesDeclaredHere fails when a package outside this one calls a
// Prometheus constructor.
//
// The one exception is hashicorp/go-metrics: serf and memberlist report
// their own telemetry through it, process-wide, and BridgeGossip turns
// those keys into families (shoal_serf_*, shoal_memberlist_*). Package
// gossip, which stands in for parts of memberlist, counts in memberlist's
// key space the same way (memberlist.udp.received from its transport,
// memberlist.stream.rejected from its stream limits,
// memberlist.log.suppressed from its log throttle); no other package of
// the program uses go-metrics.
package metrics

import (
	"net/http"
	"runtime"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shoaldb/shoal/internal/version"
)

// Namespace prefixes every shoal metric.
const Namespace = "shoal"

// New returns a registry with build info and the Go and process collectors.
func New() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	bi := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": version.Version, "revision": version.Revision, "goversion": runtime.Version()},
	})
	bi.Set(1)
	reg.MustRegister(bi)
	return reg
}

// Handler serves reg.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// MembersCollector reports members by status at scrape time.
type MembersCollector struct {
	members func() []serf.Member
	health  func() int
	byState *prometheus.Desc
	score   *prometheus.Desc
}

// NewMembersCollector reads the member list and the local Lifeguard health
// score when scraped.
func NewMembersCollector(members func() []serf.Member, health func() int) *MembersCollector {
	return &MembersCollector{
		members: members,
		health:  health,
		byState: prometheus.NewDesc(Namespace+"_members", "Gossip members by status, as this agent sees them.", []string{"status"}, nil),
		score:   prometheus.NewDesc(Namespace+"_gossip_health_score", "Local Lifeguard awareness score (0 is healthy; higher means this agent is slow to answer probes).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *MembersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byState
	ch <- c.score
}

// Collect implements prometheus.Collector.
func (c *MembersCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{"alive": 0, "leaving": 0, "left": 0, "failed": 0}
	for _, m := range c.members() {
		counts[m.Status.String()]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(n), s)
	}
	ch <- prometheus.MustNewConstMetric(c.score, prometheus.GaugeValue, float64(c.health()))
}
