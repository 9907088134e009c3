package poolevent

import (
	"testing"

	"github.com/shoaldb/shoal/internal/pool"
)

// TestHistoryDetailCarriesLag: a replica out for its lag (stale or lag) is
// recorded with the lag's figures at the change; other changes, and a
// change without a lag, keep the pool's detail as it is.
func TestHistoryDetailCarriesLag(t *testing.T) {
	lags := pool.Lags{Nodes: map[string]map[string]pool.Lag{"main": {
		"db2": {Source: pool.LagGTID, Known: true, Seconds: 11.34, Transactions: 120},
		"db3": {Source: pool.LagSBM, Known: true, Seconds: 15},
		"db4": {Source: pool.LagSBM},
		"db5": {Source: pool.LagGTID, Known: true, Seconds: 700, AtLeast: true, Transactions: 9},
	}}}
	stale := "behind the writer db1 by more than max_lag 10s (gtid)"
	for _, tc := range []struct {
		c    pool.Change
		want string
	}{
		{pool.Change{Cluster: "main", Node: "db2", Reason: pool.ReasonStale, Detail: stale}, stale + ": 120 tx, 11.3s"},
		{pool.Change{Cluster: "main", Node: "db5", Reason: pool.ReasonStale, Detail: stale}, stale + ": 9 tx, ≥700.0s"},
		{pool.Change{Cluster: "main", Node: "db3", Reason: pool.ReasonLag, Detail: "lag 15s > max 10s"}, "lag 15s > max 10s: 15s (sbm)"},
		{pool.Change{Cluster: "main", Node: "db4", Reason: pool.ReasonLag, Detail: "lag unknown"}, "lag unknown (sbm)"},
		{pool.Change{Cluster: "main", Node: "db2", Reason: pool.ReasonStale}, "120 tx, 11.3s (gtid)"},
		// Not out for its lag: the pool's detail.
		{pool.Change{Cluster: "main", Node: "db2", Reason: pool.ReasonCritical, Detail: "timeout"}, "timeout"},
		{pool.Change{Cluster: "main", Node: "db2", Reason: pool.ReasonNone}, ""},
		// No lag known for it (another cluster, or gone): as it is.
		{pool.Change{Cluster: "other", Node: "db2", Reason: pool.ReasonStale, Detail: stale}, stale},
	} {
		if got := ChangeDetail(tc.c, lags); got != tc.want {
			t.Errorf("%s/%s %s: detail %q, want %q", tc.c.Cluster, tc.c.Node, tc.c.Reason, got, tc.want)
		}
	}
}
