package agent

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/history"
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
	"github.com/shoaldb/shoal/internal/testutil/haproxytest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestPoolFaultsAndSinks drives real servers through the faults the pool
// must handle — a hung server (SIGSTOP), replication lag beyond max_lag, the
// the writer serving reads instead of stale readers, maintenance — and checks that every agent agrees and that a
// real HAProxy, driven by the app agent's sink, follows.
func TestPoolFaultsAndSinks(t *testing.T) {
	primary, r1, r2 := replicatedServers(t)
	primary.MustExec("CREATE DATABASE shoaltest")
	primary.MustExec("CREATE TABLE shoaltest.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	hx := haproxytest.Start(t, func(p *haproxytest.Proc) string {
		return haproxytest.WriterReaderConfig(p.Sock, primary.Addr(), r1.Addr(), r2.Addr())
	})

	const maxLag = 2 * time.Second
	withPolicy := func(c *config.Config) *config.Config {
		c.Pool.MaxLag = maxLag
		// This test moves the same nodes in and out within seconds, which
		// is flapping by the damping rule; damping has its own tests.
		c.Pool.Damping = false
		return c
	}
	db1 := startNode(t, withPolicy(dbConfig(t, "db1", primary)))
	db2 := startNode(t, withPolicy(dbConfig(t, "db2", r1, db1.cfg.Bind)))
	healthLog := filepath.Join(t.TempDir(), "health-events.jsonl")
	db3Cfg := withPolicy(dbConfig(t, "db3", r2, db1.cfg.Bind))
	db3Cfg.EventHandlers = []string{"health-change=" + writeScript(t, filepath.Dir(healthLog), "health-hook.sh", `cat >> "`+healthLog+`"`+"\n")}
	db3 := startNode(t, db3Cfg)
	appCfg := withPolicy(testConfig(t, "app1", "fast", "", db1.cfg.Bind))
	appCfg.Sinks.HAProxy = haproxy.Config{Address: hx.Addr, Interval: time.Second,
		Backends: haproxy.WriterReader("default", "db_rw", "db_ro")}
	out := t.TempDir()
	appCfg.Sinks.File = filesink.Config{Path: filepath.Join(out, "pool.json"), ListsDir: out}
	appCfg.History.File = filepath.Join(out, "history.jsonl")
	hookLog := filepath.Join(out, "pool-events.jsonl")
	appCfg.EventHandlers = []string{"pool-change=" + writeScript(t, out, "pool-hook.sh", `cat >> "`+hookLog+`"`+"\n")}
	if err := appCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app := startNode(t, appCfg)
	agents := []*testNode{db1, db2, db3, app}
	// Each stage starts from the healthy pool the one before restored: a
	// failed stage ends the test, naming itself.
	stage := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.Fatalf("stage %q failed; the later stages depend on it", name)
		}
	}

	everywhere := func(want string) func() bool { return samePool(agents, want) }
	haproxyIs := func(want string) func() bool {
		return func() bool { return hx.States() == want }
	}
	const healthy = "db1|db2,db3|"
	const hxHealthy = "db_rw/db1=ready db_rw/db2=maint db_rw/db3=maint db_ro/db1=maint db_ro/db2=ready db_ro/db3=ready"
	readers := func() string {
		b, _ := os.ReadFile(filepath.Join(out, "default-readers.txt"))
		return string(b)
	}
	sorted := func(addrs ...string) string {
		slices.Sort(addrs)
		return strings.Join(addrs, "\n") + "\n"
	}
	testkit.WaitFor(t, 30*time.Second, "every agent: 1 writer, 2 readers", everywhere(healthy))
	stage("healthy: haproxy, metrics, file sink", func(t *testing.T) {
		testkit.WaitFor(t, 10*time.Second, "haproxy follows the pool", haproxyIs(hxHealthy))
		// The same facts through Prometheus: the probe's on a replica, the pool
		// and sinks on the app host.
		metricsOf := func(n *testNode) string {
			reg := prometheus.NewRegistry()
			reg.MustRegister(n.a.Collectors()...)
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			return rec.Body.String()
		}
		for _, want := range []string{"shoal_mysql_up 1", `shoal_mysql_health{state="passing"} 1`, "shoal_mysql_read_only 1",
			"shoal_mysql_connects_total 1", "shoal_mysql_replication_lag_seconds 0", "shoal_mysql_check_duration_seconds_count"} {
			if m := metricsOf(db2); !strings.Contains(m, want) {
				t.Errorf("db2 metrics lack %q", want)
			}
		}
		testkit.WaitFor(t, 5*time.Second, "app metrics show the pool and sinks", func() bool {
			m := metricsOf(app)
			return strings.Contains(m, `shoal_pool_nodes{cluster="default",role="reader"} 2`) &&
				strings.Contains(m, `shoal_pool_in{cluster="default",node="db1",role="writer"} 1`) &&
				strings.Contains(m, `shoal_sink_up{sink="haproxy"} 1`) && strings.Contains(m, `shoal_sink_up{sink="file"} 1`)
		})
		testkit.WaitFor(t, 5*time.Second, "file sink lists the readers", func() bool { return readers() == sorted(r1.Addr(), r2.Addr()) })
		if b, _ := os.ReadFile(filepath.Join(out, "default-writers.txt")); string(b) != primary.Addr()+"\n" {
			t.Errorf("writers list %q, want %s", b, primary.Addr())
		}
		v, _ := app.a.PoolView("")
		if len(v.Sinks) != 2 || v.Sinks[0].Name != "file" || v.Sinks[0].State != "ok" ||
			v.Sinks[1].Name != "haproxy" || v.Sinks[1].State != "ok" || v.Sinks[1].Target != hx.Addr {
			t.Errorf("app sink status: %+v", v.Sinks)
		}
	})

	stage("hung replica (SIGSTOP)", func(t *testing.T) {
		// A hung server: out by probe timeout everywhere, and in HAProxy.
		start := time.Now()
		r2.Stop()
		testkit.WaitFor(t, 10*time.Second, "hung db3 out everywhere", everywhere("db1|db2|db3(critical)"))
		t.Logf("SIGSTOP of a replica's mysqld → out of the pool on all 4 agents: %s", time.Since(start).Round(time.Millisecond))
		testkit.WaitFor(t, 10*time.Second, "haproxy: db3 maint", haproxyIs(strings.Replace(hxHealthy, "db_ro/db3=ready", "db_ro/db3=maint", 1)))
		testkit.WaitFor(t, 5*time.Second, "file sink drops db3", func() bool { return readers() == sorted(r1.Addr()) })
		// The transitions are in the history: the pool change on the app agent,
		// the probe's verdict on db3's own agent.
		h := app.a.History(history.Filter{Node: "db3", Kind: "pool"})
		if n := len(h.Entries); n == 0 || h.Entries[n-1].From != "reader" || h.Entries[n-1].To != "out" || h.Entries[n-1].Reason != "critical" {
			t.Errorf("app history of db3: %+v", h.Entries)
		}
		h = db3.a.History(history.Filter{Kind: "health", Limit: 1})
		if len(h.Entries) != 1 || h.Entries[0].From != "passing" || h.Entries[0].To != "critical" || h.Entries[0].Reason != "timeout" {
			t.Errorf("db3 health history: %+v", h.Entries)
		}
		// The app's pool-change hook got the removal as a versioned JSON document.
		testkit.WaitFor(t, 10*time.Second, "pool-change hook saw db3 leave", func() bool {
			data, _ := os.ReadFile(hookLog)
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var doc struct {
					Version int    `json:"version"`
					Event   string `json:"event"`
					Node    string `json:"node"`
					Data    struct {
						Changes []struct{ Node, From, To, Reason string } `json:"changes"`
						Pool    struct {
							Clusters []struct {
								Readers []struct{ Name, Addr string } `json:"readers"`
							} `json:"clusters"`
						} `json:"pool"`
					} `json:"data"`
				}
				if json.Unmarshal([]byte(line), &doc) != nil || doc.Version != 1 || doc.Event != "pool-change" || doc.Node != "app1" {
					continue
				}
				for _, c := range doc.Data.Changes {
					if c.Node == "db3" && c.From == "reader" && c.To == "out" && c.Reason == "critical" &&
						len(doc.Data.Pool.Clusters) == 1 && len(doc.Data.Pool.Clusters[0].Readers) == 1 &&
						doc.Data.Pool.Clusters[0].Readers[0].Addr == r1.Addr() {
						return true
					}
				}
			}
			return false
		})
		testkit.WaitFor(t, 10*time.Second, "db3's health-change hook saw critical", func() bool {
			data, _ := os.ReadFile(healthLog)
			return strings.Contains(string(data), `"event":"health-change"`) &&
				strings.Contains(string(data), `"data":{"from":"passing","to":"critical","reason":"timeout"`)
		})
		r2.Cont()
		testkit.WaitFor(t, 20*time.Second, "db3 back after SIGCONT", everywhere(healthy))
		testkit.WaitFor(t, 10*time.Second, "haproxy: db3 ready again", haproxyIs(hxHealthy))
	})

	stage("lag, then the writer instead of the reader floor", func(t *testing.T) {
		// Lag: hold a lock on db2's copy of the table so its SQL thread waits
		// while the primary keeps writing.
		lockConn, err := r1.DB().Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer lockConn.Close()
		if _, err := lockConn.ExecContext(context.Background(), "LOCK TABLES shoaltest.t WRITE"); err != nil {
			t.Fatal(err)
		}
		stopWriter := make(chan struct{})
		writerDone := make(chan struct{})
		go func() { // a write every 100ms keeps Seconds_Behind_Master growing
			defer close(writerDone)
			for {
				select {
				case <-stopWriter:
					return
				case <-time.After(100 * time.Millisecond):
					_ = primary.Exec("INSERT INTO shoaltest.t (v) VALUES (1)")
				}
			}
		}()
		// The servers publish GTID positions, so the lag is measured
		// against the writer: stale, not the replica's own lag.
		testkit.WaitFor(t, 20*time.Second, "lagging db2 out everywhere", everywhere("db1|db3|db2(stale)"))

		// Floor: stop db3's SQL thread too. No reader qualifies and every
		// floor candidate is stale: the writer serves reads instead
		// (pool.read_fallback: writer, the default), both replicas are out,
		// and HAProxy's read backend has only the writer's server ready.
		r2.MustExec("STOP SLAVE SQL_THREAD")
		testkit.WaitFor(t, 10*time.Second, "the writer serves reads",
			everywhere("db1|db1(fallback)|db2(stale),db3(replication-stopped)"))
		testkit.WaitFor(t, 10*time.Second, "haproxy: the writer ready for reads, the stale replicas maint",
			haproxyIs("db_rw/db1=ready db_rw/db2=maint db_rw/db3=maint db_ro/db1=ready db_ro/db2=maint db_ro/db3=maint"))

		close(stopWriter)
		<-writerDone
		if _, err := lockConn.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
		r2.MustExec("START SLAVE SQL_THREAD")
		testkit.WaitFor(t, 30*time.Second, "replicas caught up and back", everywhere(healthy))
		testkit.WaitFor(t, 10*time.Second, "haproxy healthy again", haproxyIs(hxHealthy))
	})

	stage("maintenance", func(t *testing.T) {
		// Maintenance: out everywhere whatever its health, back when disabled.
		if _, err := app.a.SetMaint(true, "x"); err != ErrNotDB {
			t.Errorf("maint on an app agent: %v, want ErrNotDB", err)
		}
		if _, err := db2.a.SetMaint(true, "bad\nreason"); err == nil {
			t.Error("maint with a control character in the reason was accepted")
		}
		st, err := db2.a.SetMaint(true, "kernel upgrade")
		if err != nil || !st.Enabled || st.Reason != "kernel upgrade" {
			t.Fatalf("maint enable: %+v %v", st, err)
		}
		testkit.WaitFor(t, 10*time.Second, "db2 in maintenance everywhere", everywhere("db1|db3|db2(maintenance)"))
		testkit.WaitFor(t, 10*time.Second, "haproxy: db2 maint", haproxyIs(strings.Replace(hxHealthy, "db_ro/db2=ready", "db_ro/db2=maint", 1)))
		v, _ := app.a.PoolView("")
		if len(v.Out) != 1 || v.Out[0].Detail != "kernel upgrade" {
			t.Errorf("maintenance detail: %+v", v.Out)
		}
		if st, err := db2.a.SetMaint(false, ""); err != nil || st.Enabled {
			t.Fatalf("maint disable: %+v %v", st, err)
		}
		testkit.WaitFor(t, 10*time.Second, "db2 back after maintenance", everywhere(healthy))
		testkit.WaitFor(t, 10*time.Second, "haproxy healthy after maintenance", haproxyIs(hxHealthy))
	})

	stage("haproxy restart", func(t *testing.T) {
		// HAProxy restarted (runtime state lost): the periodic reconcile restores it.
		hx.Restart()
		testkit.WaitFor(t, 10*time.Second, "haproxy restored after restart", haproxyIs(hxHealthy))
	})

	stage("isolation", func(t *testing.T) {
		// The app host loses every db agent at once (stopped without a leave):
		// none answers its pings, so it cannot tell that from being cut off,
		// and it keeps every node in its role (held) and routing as before.
		for _, n := range []*testNode{db1, db2, db3} {
			n.a.Shutdown()
		}
		testkit.WaitFor(t, 30*time.Second, "app isolated", func() bool {
			v, _ := app.a.PoolView("")
			return v.Isolated && len(v.Out) == 0 && len(v.Writers) == 1 && len(v.Readers) == 2 &&
				strings.HasPrefix(v.Writers[0].Detail, "held: agent-failed while this agent cannot reach the fleet")
		})
		testkit.WaitFor(t, 10*time.Second, "sinks report frozen", func() bool {
			v, _ := app.a.PoolView("")
			return len(v.Sinks) == 2 && v.Sinks[0].Frozen && v.Sinks[1].Frozen
		})
		if got := hx.States(); got != hxHealthy {
			t.Errorf("isolated app host changed HAProxy: %s", got)
		}
		if readers() != sorted(r1.Addr(), r2.Addr()) {
			t.Errorf("isolated app host changed the readers list: %q", readers())
		}
		if h := app.a.History(history.Filter{Kind: "isolation"}); len(h.Entries) != 1 || h.Entries[0].To != "isolated" {
			t.Errorf("isolation history: %+v", h.Entries)
		}
	})

	stage("history file", func(t *testing.T) {
		// The history file holds every entry the ring does, one JSON object a line.
		hist := app.a.History(history.Filter{})
		data, err := os.ReadFile(appCfg.History.File)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != len(hist.Entries) || len(lines) < 10 {
			t.Errorf("history file has %d lines, ring %d entries", len(lines), len(hist.Entries))
		}
		for _, l := range lines {
			var e history.Entry
			if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq == 0 || e.Kind == "" {
				t.Errorf("history line %q: %v", l, err)
			}
		}
	})

}
