package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/testutil/pooltest"
	"github.com/shoaldb/shoal/internal/view"
)

// GET /v1/pool's clusters are the pool schema, plus until on damped nodes,
// lag on replicas, the whole writer term (cluster, addr, granted, why) and unsafe:
// the agent's view, as the API converts and serves it.
func TestPoolViewClustersAreTheSchema(t *testing.T) {
	lags := pool.Lags{Nodes: map[string]map[string]pool.Lag{"main": {
		"db2": {Source: pool.LagGTID, Known: true, Seconds: 12.5, Transactions: 40},
	}}}
	p := pooltest.Fixture()
	p.Clusters[1].Unsafe = pool.UnsafeNoTerm // a cluster without voters
	b, err := json.Marshal(api.ToPool(view.Pool{Clusters: clusterPools(p, lags, "")}))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Clusters any `json:"clusters"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	pooltest.RequireSuperset(t, resp.Clusters, "until", "lag", "cluster", "addr", "granted", "why", "unsafe")
	if strings.Count(string(b), `"unsafe":"no writer term"`) != 1 || !strings.Contains(string(b), `"conflict":["db4","db5"],"unsafe":"no writer term"`) {
		t.Errorf("want other, and only other, marked unsafe: %s", b)
	}
	if !strings.Contains(string(b), `"term":{"cluster":"main","term":3,"writer":"db1","addr":"10.0.0.11:3306","granted":"2026-11-27T06:01:02Z","why":"first term: the only writable server"}`) {
		t.Errorf("main without its term: %s", b)
	}
	if strings.Count(string(b), `"term":{`) != 1 {
		t.Errorf("a term on a cluster that requires none: %s", b)
	}
	if !strings.Contains(string(b), `"name":"db2","addr":"10.0.0.12:3306","reason":"floor","detail":"lag 12s over max_lag 10s","lag":{"source":"gtid","seconds":12.5,"at_least":false,"transactions":40}}`) {
		t.Errorf("db2 without its lag: %s", b)
	}
}
