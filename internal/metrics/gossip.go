package metrics

import (
	"strings"
	"time"
	"unicode"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// BridgeGossip routes serf's and memberlist's own telemetry (hashicorp
// go-metrics: message and byte counts, probe and push-pull timings, queue
// lengths, Lifeguard degradations) into reg through go-metrics' Prometheus
// sink. go-metrics is process-wide, so call it once per process (the agent
// binary). Names get the shoal_ prefix and Prometheus conventions:
// snake_case, counters end in _total; timings are summaries in seconds.
func BridgeGossip(reg prometheus.Registerer) error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
		Registerer: reg,
		Name:       "shoal_gossip_bridge",
		Expiration: 10 * time.Minute,
	})
	if err != nil {
		return err
	}
	cfg := gometrics.DefaultConfig(Namespace)
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector covers them
	cfg.TimerGranularity = time.Second
	_, err = gometrics.NewGlobal(cfg, renamingSink{sink})
	return err
}

// renamingSink adapts go-metrics keys to Prometheus naming before handing
// them to the sink.
type renamingSink struct{ gometrics.MetricSink }

func (s renamingSink) SetGauge(k []string, v float32) { s.MetricSink.SetGauge(snake(k), v) }
func (s renamingSink) SetGaugeWithLabels(k []string, v float32, l []gometrics.Label) {
	s.MetricSink.SetGaugeWithLabels(snake(k), v, l)
}
func (s renamingSink) EmitKey(k []string, v float32) { s.MetricSink.EmitKey(snake(k), v) }
func (s renamingSink) IncrCounter(k []string, v float32) {
	if !perName(k) {
		s.MetricSink.IncrCounter(append(snake(k), "total"), v)
	}
}
func (s renamingSink) IncrCounterWithLabels(k []string, v float32, l []gometrics.Label) {
	if !perName(k) {
		s.MetricSink.IncrCounterWithLabels(append(snake(k), "total"), v, l)
	}
}
func (s renamingSink) AddSample(k []string, v float32) {
	k, v = seconds(k, v)
	s.MetricSink.AddSample(snake(k), v)
}
func (s renamingSink) AddSampleWithLabels(k []string, v float32, l []gometrics.Label) {
	k, v = seconds(k, v)
	s.MetricSink.AddSampleWithLabels(snake(k), v, l)
}

// perName reports serf's per-event and per-query counters
// (serf.events.NAME, serf.queries.NAME): their names come from user events
// and queries, an unbounded set, so they are dropped; serf.events and
// serf.queries count them all.
func perName(k []string) bool {
	if len(k) > 0 && k[0] == Namespace {
		k = k[1:]
	}
	return len(k) == 3 && k[0] == "serf" && (k[1] == "events" || k[1] == "queries")
}

// seconds converts a sample whose last key part ends in "-ms" (serf's
// coordinate adjustment) to seconds, the base unit.
func seconds(k []string, v float32) ([]string, float32) {
	if n := len(k); n > 0 && strings.HasSuffix(k[n-1], "-ms") {
		k = append(append([]string(nil), k[:n-1]...), strings.TrimSuffix(k[n-1], "-ms")+"_seconds")
		return k, v / 1000
	}
	return k, v
}

// snake turns each key part into snake_case: "probeNode" → "probe_node",
// "adjustment-ms" → "adjustment_ms", "Event" → "event".
func snake(key []string) []string {
	out := make([]string, len(key))
	for i, part := range key {
		var b strings.Builder
		prevLower := false
		for _, r := range part {
			switch {
			case unicode.IsUpper(r):
				if prevLower {
					b.WriteByte('_')
				}
				b.WriteRune(unicode.ToLower(r))
				prevLower = false
			case unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
				prevLower = true
			default:
				b.WriteByte('_')
				prevLower = false
			}
		}
		out[i] = b.String()
	}
	return out
}
