package agent

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// A panic in one part of the agent's pool listener (here the history,
// which has no log to write to) is recovered, logged and counted, and the
// metrics and the pool-change hook still get that update.
func TestPoolListenerPartsIndependent(t *testing.T) {
	buf := &testkit.SyncBuffer{}
	cfg := config.Default()
	cfg.EventHandlers = []string{"pool-change=" + writeScript(t, t.TempDir(), "h.sh", "cat >/dev/null\n")}
	a := &Agent{cfg: cfg, logs: logging.New(buf, "text", slog.LevelDebug), rep: reporters{metrics: metrics.NewAgent()}}
	a.log = a.logs.Logger
	var err error
	if a.rep.hooks, err = a.newHooks(func() serf.Member { return serf.Member{Name: "db1"} }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.rep.hooks.Close() })
	// a.rep.hist stays nil: recordPool panics on the first change.

	p := &pool.Pool{Clusters: []pool.Cluster{{Name: "main", Writers: []pool.Node{{Name: "db1", Addr: "10.0.0.1:3306"}}}}}
	u := routing.Update{At: time.Now(), Pool: p, Routed: p, Changes: pool.Diff(&pool.Pool{}, p)}
	a.onPool()(u)

	if n := testutil.ToFloat64(a.rep.metrics.ListenerPanics.WithLabelValues("history")); n != 1 {
		t.Errorf("history panics counted: %v, want 1", n)
	}
	if n := testutil.CollectAndCount(a.rep.metrics.PoolTransitions); n != 1 {
		t.Errorf("metrics part: %d transition series, want 1", n)
	}
	if st := a.rep.hooks.Stats(); len(st) != 1 || st[0].Queued != 1 {
		t.Errorf("hooks part: stats %+v, want one pool-change queued", st)
	}
	if !strings.Contains(buf.String(), "pool listener part panicked") || !strings.Contains(buf.String(), "part=history") {
		t.Errorf("panic not logged:\n%s", buf)
	}
}
