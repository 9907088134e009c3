package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// The wiring hands each sink the router's generation: once the sink has
// applied the router's latest pool, it reports that pool's generation.
func TestSinksGetTheGeneration(t *testing.T) {
	cfg := config.Default()
	cfg.Node = "app1"
	cfg.Sinks.File.Path = filepath.Join(t.TempDir(), "pool.json")
	a := &Agent{cfg: cfg, logs: logging.New(&testkit.SyncBuffer{}, "text", slog.LevelDebug), rep: reporters{metrics: metrics.NewAgent()}}
	a.log = a.logs.Logger
	var err error
	if a.pool.sinks, err = a.newSinks(); err != nil {
		t.Fatal(err)
	}
	if len(a.pool.sinks) != 1 || a.pool.sinks[0].Status().Name != "file" || a.pool.sinks[0].Status().Target != cfg.Sinks.File.Path {
		t.Fatalf("sinks %+v", a.sinkStatus())
	}
	db1 := pool.Member{Name: "db1", Addr: "10.0.0.1:3306", Status: pool.StatusAlive, Tags: map[string]string{
		tags.KeyRole: tags.RoleDB, tags.KeyHealth: tags.Encode(tags.Health{State: tags.Passing})}, Health: &tags.Health{State: tags.Passing}}
	a.pool.router = routing.New(routing.Config{Resync: time.Hour}, func() []pool.Member { return []pool.Member{db1} }, a.log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		a.closeSinks()
	})
	a.startSinks(ctx)
	go a.pool.router.Run(ctx)
	testkit.WaitFor(t, 10*time.Second, "the sink applies the first pool", func() bool {
		st := a.sinkStatus()
		return st[0].AppliedGeneration == 1 && a.pool.router.Current().Generation == 1 && st[0].State == "ok"
	})
	// The pool view says the router's generation next to the sink's.
	if pv, err := a.PoolView(""); err != nil || pv.Generation != 1 || pv.Sinks[0].AppliedGeneration != 1 {
		t.Errorf("pool view: generation %d, sinks %+v, %v", pv.Generation, pv.Sinks, err)
	}
}
