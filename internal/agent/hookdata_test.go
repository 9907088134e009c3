package agent

import (
	"encoding/json"
	"testing"

	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/testutil/pooltest"
)

// The pool-change hook's data.pool is exactly the pool schema.
func TestPoolChangeDataIsTheSchema(t *testing.T) {
	var d struct {
		Pool map[string]any `json:"pool"`
	}
	if err := json.Unmarshal(poolChangeJSON(routing.Update{Pool: pooltest.Fixture()}), &d); err != nil {
		t.Fatal(err)
	}
	pooltest.RequireSuperset(t, d.Pool["clusters"])
}

// GET /v1/pool's clusters are the pool schema, plus until on damped nodes.
func TestPoolViewClustersAreTheSchema(t *testing.T) {
	b, err := json.Marshal(clusterPools(pooltest.Fixture(), ""))
	if err != nil {
		t.Fatal(err)
	}
	var cs any
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	pooltest.RequireSuperset(t, cs, "until")
}
