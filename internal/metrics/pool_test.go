package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shoaldb/shoal/internal/view"
)

func TestPoolCollector(t *testing.T) {
	pv := view.Pool{
		Isolated:   true,
		Held:       2,
		Generation: 14,
		Clusters: []view.ClusterPool{{
			Name:     "main",
			Writers:  []view.PoolNode{{Name: "db1"}},
			Readers:  []view.PoolNode{{Name: "db2"}},
			Out:      []view.PoolNode{{Name: "db3", Reason: "lag"}, {Name: "db4", Reason: "conflict"}},
			Conflict: []string{"db1", "db4"},
			Term:     &view.Term{Cluster: "main", Number: 3, Writer: "db1"},
		}, {
			Name: "noterm", Term: &view.Term{Cluster: "noterm"}, Conflict: []string{},
		}, {
			Name: "plain", Conflict: []string{},
		}},
		Sinks: []view.SinkStatus{
			{Name: "haproxy", State: "failing", LastSuccess: time.Unix(1700000000, 500_000_000), Failures: 3, AppliedGeneration: 12},
			{Name: "file", State: "ok", AppliedGeneration: 14},
		},
	}
	c := NewPoolCollector(func() view.Pool { return pv })
	want := `
# HELP shoal_pool_generation The router's generation: the number of the latest pool it computed (0: none yet).
# TYPE shoal_pool_generation gauge
shoal_pool_generation 14
# HELP shoal_pool_held_nodes Nodes kept in their role because this agent cannot verify their failure.
# TYPE shoal_pool_held_nodes gauge
shoal_pool_held_nodes 2
# HELP shoal_pool_in 1 for each node in the pool, by cluster and role (writer or reader).
# TYPE shoal_pool_in gauge
shoal_pool_in{cluster="main",node="db1",role="writer"} 1
shoal_pool_in{cluster="main",node="db2",role="reader"} 1
# HELP shoal_pool_isolated 1 while this agent cannot reach the fleet and holds what it routed.
# TYPE shoal_pool_isolated gauge
shoal_pool_isolated 1
# HELP shoal_pool_nodes Database nodes per cluster and role (writer, reader, out) in this agent's pool.
# TYPE shoal_pool_nodes gauge
shoal_pool_nodes{cluster="main",role="out"} 2
shoal_pool_nodes{cluster="main",role="reader"} 1
shoal_pool_nodes{cluster="main",role="writer"} 1
shoal_pool_nodes{cluster="noterm",role="out"} 0
shoal_pool_nodes{cluster="noterm",role="reader"} 0
shoal_pool_nodes{cluster="noterm",role="writer"} 0
shoal_pool_nodes{cluster="plain",role="out"} 0
shoal_pool_nodes{cluster="plain",role="reader"} 0
shoal_pool_nodes{cluster="plain",role="writer"} 0
# HELP shoal_pool_out 1 for each database node out of the pool, with the reason.
# TYPE shoal_pool_out gauge
shoal_pool_out{cluster="main",node="db3",reason="lag"} 1
shoal_pool_out{cluster="main",node="db4",reason="conflict"} 1
# HELP shoal_pool_writer_conflict 1 while two or more nodes of the cluster are writable (at most one is routed to).
# TYPE shoal_pool_writer_conflict gauge
shoal_pool_writer_conflict{cluster="main"} 1
shoal_pool_writer_conflict{cluster="noterm"} 0
shoal_pool_writer_conflict{cluster="plain"} 0
# HELP shoal_pool_writer_term The writer term this agent routes the cluster's writes by: only its holder may be the writer (0: the cluster requires a term and none is known, so it has no writer). No series for a cluster that requires none (no voters, or Galera).
# TYPE shoal_pool_writer_term gauge
shoal_pool_writer_term{cluster="main"} 3
shoal_pool_writer_term{cluster="noterm"} 0
# HELP shoal_sink_applied_generation Generation of the last pool the sink fully applied: succeeded and not frozen (0: none yet); behind shoal_pool_generation while it fails or holds removals.
# TYPE shoal_sink_applied_generation gauge
shoal_sink_applied_generation{sink="file"} 14
shoal_sink_applied_generation{sink="haproxy"} 12
# HELP shoal_sink_failures_total Failed applies of the sink since the agent started.
# TYPE shoal_sink_failures_total counter
shoal_sink_failures_total{sink="file"} 0
shoal_sink_failures_total{sink="haproxy"} 3
# HELP shoal_sink_last_success_timestamp_seconds Unix time of the sink's last successful apply (0: none yet).
# TYPE shoal_sink_last_success_timestamp_seconds gauge
shoal_sink_last_success_timestamp_seconds{sink="file"} 0
shoal_sink_last_success_timestamp_seconds{sink="haproxy"} 1.7000000005e+09
# HELP shoal_sink_up 1 when the sink's last apply succeeded.
# TYPE shoal_sink_up gauge
shoal_sink_up{sink="file"} 1
shoal_sink_up{sink="haproxy"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n, err := testutil.CollectAndLint(c); err != nil || len(n) > 0 {
		t.Errorf("lint: %v %v", n, err)
	}
}

// TestPoolCollectorLags: each replica's lag, transactions for gtid only,
// seconds when known; a node that no longer has a lag (gone, or out for a
// hard reason) leaves no series behind.
func TestPoolCollectorLags(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	u := func(v uint64) *uint64 { return &v }
	pv := view.Pool{Clusters: []view.ClusterPool{{
		Name:    "main",
		Writers: []view.PoolNode{{Name: "db1"}},
		Readers: []view.PoolNode{
			{Name: "db1"}, // the writer as a reader (fallback): no lag
			{Name: "db2", Lag: &view.Lag{Source: "gtid", Seconds: f(1.5), Transactions: u(30)}},
			{Name: "db3", Lag: &view.Lag{Source: "sbm", Seconds: f(0)}},
		},
		Out: []view.PoolNode{
			{Name: "db4", Reason: "stale", Lag: &view.Lag{Source: "gtid", Seconds: f(700), AtLeast: true, Transactions: u(5)}},
			{Name: "db5", Reason: "lag", Lag: &view.Lag{Source: "sbm"}}, // NULL: no seconds
			{Name: "db6", Reason: "critical"},
		},
	}}}
	c := NewPoolCollector(func() view.Pool { return pv })
	names := []string{"shoal_replica_behind_transactions", "shoal_replica_lag_seconds"}
	head := `
# HELP shoal_replica_behind_transactions Transactions the cluster's writer has that the replica lacks, by their GTID positions as this agent last saw them (replicas whose lag is measured by GTID only).
# TYPE shoal_replica_behind_transactions gauge
`
	lagHead := `# HELP shoal_replica_lag_seconds Replication lag of each replica as this agent judges it: source gtid, how long ago this agent saw the writer pass the replica's GTID position; source sbm, the replica's Seconds_Behind_Master (absent when unknown).
# TYPE shoal_replica_lag_seconds gauge
`
	want := head + `shoal_replica_behind_transactions{cluster="main",node="db2"} 30
shoal_replica_behind_transactions{cluster="main",node="db4"} 5
` + lagHead + `shoal_replica_lag_seconds{cluster="main",node="db2",source="gtid"} 1.5
shoal_replica_lag_seconds{cluster="main",node="db3",source="sbm"} 0
shoal_replica_lag_seconds{cluster="main",node="db4",source="gtid"} 700
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// db2 goes, db4 is out for a hard reason now (no lag): their series go.
	cl := &pv.Clusters[0]
	cl.Readers = cl.Readers[:1]
	cl.Out = []view.PoolNode{{Name: "db4", Reason: "critical"}, {Name: "db3", Reason: "lag", Lag: &view.Lag{Source: "sbm", Seconds: f(12)}}}
	want = lagHead + `shoal_replica_lag_seconds{cluster="main",node="db3",source="sbm"} 12
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.CollectAndLint(c); err != nil || len(n) > 0 {
		t.Errorf("lint: %v %v", n, err)
	}
}
