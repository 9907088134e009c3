package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// needTool returns the path of a Debian-packaged tool, skipping without it
// (failing under CI=true, where it must be installed).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found: apt-get install -y %s", name, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: this test must not be skipped)", msg)
	}
	t.Skip(msg)
	return ""
}

func scrape(t *testing.T, httpAddr string) string {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, body := testkit.Fetch(t, req)
	return body
}

// TestMetricsPromtoolAndPrometheus: two agents' /metrics pass `promtool
// check metrics` (after gossip, a user event, a query and a hook run, so
// the bridged serf and memberlist families are there), and a real
// Prometheus server scraping both answers queries for shoal_members and a
// pool gauge.
func TestMetricsPromtoolAndPrometheus(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	promBin := needTool(t, "prometheus", "prometheus")
	out, _, _ := shoal(t, "keygen")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	a := startAgent(t, "m1", key, "--event-handler", "user=/bin/true", "--event-handler", "query:q=/bin/echo hi")
	b := startAgent(t, "m2", key, "--join", a.bind)
	testkit.WaitFor(t, 20*time.Second, "two members", func() bool {
		_, _, code := shoal(t, "info", "--http-addr", b.http)
		return code == 0 && len(members(t, b.http)) == 2
	})
	if _, errOut, code := shoal(t, "event", "--http-addr", b.http, "deploy", "v1"); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := shoal(t, "query", "--http-addr", b.http, "--timeout", "2s", "q"); code != 0 {
		t.Fatal(errOut)
	}
	testkit.WaitFor(t, 20*time.Second, "hook and bridged metrics exported", func() bool {
		m := scrape(t, a.http)
		return strings.Contains(m, `shoal_hook_runs_total{handler="user=/bin/true",result="ok"} 1`) &&
			strings.Contains(m, "shoal_memberlist_udp_sent_total") && strings.Contains(m, "shoal_serf_events_total")
	})
	m := scrape(t, a.http)
	for _, bad := range []string{"shoal_serf_events_deploy", "shoal_serf_queries_q"} {
		if strings.Contains(m, bad) {
			t.Errorf("per-name serf counter %s exported (unbounded names)", bad)
		}
	}
	for _, want := range []string{"shoal_build_info{", "shoal_members{status=\"alive\"} 2", "shoal_member_events_total{type=\"join\"}",
		"shoal_pool_isolated 0", "shoal_hook_queue_depth{", "shoal_gossip_health_score", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, ag := range []*proc{a, b} {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(scrape(t, ag.http))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s: %v\n%s", ag.http, err, out)
		}
	}

	// A real Prometheus scraping both agents.
	dir := t.TempDir()
	promAddr := ports.Free(t)
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: shoal\n    static_configs:\n      - targets: [%q, %q]\n", a.http, b.http)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prom := exec.CommandContext(ctx, promBin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr)
	var promLog testkit.SyncBuffer
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", promLog.String())
		}
	}()
	query := func(q string) int {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil || r.Status != "success" {
			return -1
		}
		return len(r.Data.Result)
	}
	testkit.WaitFor(t, 60*time.Second, "prometheus has shoal_members from both agents", func() bool {
		return query(`shoal_members{status="alive"} == 2`) == 2
	})
	if n := query(`shoal_pool_isolated == 0`); n != 2 {
		t.Errorf("prometheus: shoal_pool_isolated series = %d, want 2", n)
	}
	if n := query(`up{job="shoal"} == 1`); n != 2 {
		t.Errorf("prometheus: %d targets up, want 2", n)
	}
}
