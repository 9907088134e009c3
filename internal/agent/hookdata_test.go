package agent

import (
	"encoding/json"
	"testing"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/testutil/pooltest"
	"github.com/shoaldb/shoal/internal/view"
)

// GET /v1/pool's clusters are the pool schema, plus until on damped nodes:
// the agent's view, as the API converts and serves it.
func TestPoolViewClustersAreTheSchema(t *testing.T) {
	b, err := json.Marshal(api.ToPool(view.Pool{Clusters: clusterPools(pooltest.Fixture(), "")}))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Clusters any `json:"clusters"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	pooltest.RequireSuperset(t, resp.Clusters, "until")
}
