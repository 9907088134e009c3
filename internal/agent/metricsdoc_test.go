package agent

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/metrics"
)

// TestMetricsDocumented: docs/observability.md lists exactly the metrics
// an agent exports, both ways: every metric a running agent describes is
// in the table (alerts and dashboards may use only documented names,
// test/deploy checks them against the same table) and every name in the
// table exists. serf's and memberlist's bridged telemetry is documented by
// its prefix.
func TestMetricsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `[^|]*\\|").FindAllString(string(b), -1) {
		for _, n := range regexp.MustCompile("`(shoal_[a-z_]+)[`{]").FindAllStringSubmatch(m, -1) {
			documented[n[1]] = true
		}
	}
	if len(documented) < 10 {
		t.Fatalf("found %d metric names in the docs/observability.md table: the parser is broken", len(documented))
	}

	n := startNode(t, testConfig(t, "m1", "fast", ""))
	reg := metrics.New()
	descs := make(chan *prometheus.Desc, 1024)
	var cs []prometheus.Collector
	cs = append(cs, n.a.Collectors()...)
	// The HTTP API's connection limiter (shoal agent registers it too).
	cs = append(cs, api.LimitListener(nil, 1).Collectors()...)
	// metrics.New's own collectors, through a registry-wrapping collector.
	cs = append(cs, gathererNames{reg})
	exported := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range cs {
		c.Describe(descs)
	drain:
		for {
			select {
			case d := <-descs:
				if m := fq.FindStringSubmatch(d.String()); m != nil {
					exported[m[1]] = true
				} else {
					t.Fatalf("cannot read the name of %s", d)
				}
			default:
				break drain
			}
		}
	}
	var bridged = regexp.MustCompile(`^shoal_(memberlist|serf)_`)
	for name := range exported {
		if !regexp.MustCompile(`^shoal_`).MatchString(name) || bridged.MatchString(name) {
			continue
		}
		if !documented[name] {
			t.Errorf("metric %s is exported but not in docs/observability.md's table", name)
		}
	}
	for name := range documented {
		if !exported[name] {
			t.Errorf("docs/observability.md documents %s, which the agent does not export", name)
		}
	}
	if t.Failed() {
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range exported {
				if !yield(n) {
					return
				}
			}
		})
		t.Logf("exported: %v", names)
	}
}

// gathererNames describes the metrics a registry already holds (the build
// information and the gossip bridge of metrics.New).
type gathererNames struct{ g *prometheus.Registry }

func (gn gathererNames) Describe(ch chan<- *prometheus.Desc) {
	mfs, _ := gn.g.Gather()
	for _, mf := range mfs {
		ch <- prometheus.NewDesc(mf.GetName(), mf.GetHelp(), nil, nil)
	}
}

func (gathererNames) Collect(chan<- prometheus.Metric) {}
