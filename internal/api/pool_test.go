package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// GET /v1/pool says the generation of the router's current pool, and each
// sink's applied generation against it: equal once the sink has applied
// the pool, behind while it cannot.
func TestPoolGeneration(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, c, bind := startAgentWith(t, "app1", "", nil, func(c *config.Config) {
		c.Role = tags.RoleApp
		c.Sinks.File.Path = filepath.Join(dir, "pool.json")
	})
	health := func(state tags.State) map[string]string {
		return map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main",
			tags.KeyHealth: tags.Encode(tags.Health{State: state, Port: 3306})}
	}
	db1 := testkit.StartSerf(t, "db1", health(tags.Passing), bind)

	var p *client.PoolResponse
	testkit.WaitFor(t, 20*time.Second, "the file sink applies the pool with db1", func() bool {
		var err error
		p, err = c.Pool(ctx, "")
		return err == nil && len(p.Writers) == 1 && len(p.Sinks) == 1 && p.Generation > 0 &&
			p.Sinks[0].AppliedGeneration == p.Generation
	})
	status, body := do(t, "GET", c.Addr()+"/v1/pool", "")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); status != http.StatusOK || err != nil || raw["generation"] == nil {
		t.Fatalf("GET /v1/pool = %d %s (%v), want a generation", status, body, err)
	}

	// The sink's directory goes away, and db1 fails its check: the router
	// moves on, the sink stays at the pool it applied.
	applied := p.Generation
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := db1.SetTags(health(tags.Critical)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "db1 out, the sink failing", func() bool {
		var err error
		p, err = c.Pool(ctx, "")
		return err == nil && len(p.Writers) == 0 && p.Sinks[0].State == "failing"
	})
	if p.Generation <= applied || p.Sinks[0].AppliedGeneration != applied {
		t.Errorf("generation %d, sink applied %d; want the sink behind at %d", p.Generation, p.Sinks[0].AppliedGeneration, applied)
	}
}
