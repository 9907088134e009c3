package api_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// TestReplicaLagShown: a real app agent judging a writer and a replica
// that gossip their GTID positions (as their db agents do). In step, the
// replica's lag is 0 transactions by GTID, in /v1/pool and /v1/members,
// and in /metrics. When writes stop reaching the replica (the writer's
// position moves on, the replica's does not), its lag counts the missing
// transactions and the seconds since this agent saw the writer pass it;
// past max_lag it is out, stale, and the history entry carries the
// figures. When it leaves the cluster, its series go from /metrics.
func TestReplicaLagShown(t *testing.T) {
	ctx := context.Background()
	a, c, bind := startAgentWith(t, "app1", "", nil, func(c *config.Config) {
		c.Role = tags.RoleApp
		c.Pool.MaxLag = 2 * time.Second
	})
	pos := func(seq uint64) tags.Position {
		p, err := tags.NewPosition([]tags.Domain{{ID: 0, Seq: seq}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	writer := func(seq uint64) map[string]string {
		return map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main", tags.KeyHealth: tags.Encode(tags.Health{
			State: tags.Passing, ServerID: 1, Position: pos(seq), Port: 3306})}
	}
	replica := tags.Encode(tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true,
		LagKnown: true, ServerID: 2, SourceServerID: 1, Position: pos(100), Port: 3306})
	db1 := testkit.StartSerf(t, "db1", writer(100), bind)
	db2 := testkit.StartSerf(t, "db2", map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main", tags.KeyHealth: replica}, bind)

	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Collectors()...)
	lagOf := func(p *client.PoolResponse, node string) *client.Lag {
		for _, ns := range [][]client.PoolNode{p.Writers, p.Readers, p.Out} {
			for _, n := range ns {
				if n.Name == node {
					return n.Lag
				}
			}
		}
		return nil
	}
	var p *client.PoolResponse
	testkit.WaitFor(t, 20*time.Second, "db2 a reader, 0 transactions behind by GTID", func() bool {
		var err error
		p, err = c.Pool(ctx, "")
		l := lagOf(p, "db2")
		return err == nil && len(p.Readers) == 1 && p.Readers[0].Name == "db2" && l != nil && l.Source == "gtid" &&
			l.Transactions != nil && *l.Transactions == 0 && l.Seconds != nil && *l.Seconds == 0
	})
	if l := lagOf(p, "db1"); l != nil || p.Writers[0].Name != "db1" {
		t.Errorf("the writer: %+v, lag %+v; want db1 without a lag", p.Writers, l)
	}
	ms, err := c.Members(ctx, client.MemberFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if got := m.Lag != nil; got != (m.Name == "db2") {
			t.Errorf("member %s: lag %+v", m.Name, m.Lag)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shoal_replica_behind_transactions Transactions the cluster's writer has that the replica lacks, by their GTID positions as this agent last saw them (replicas whose lag is measured by GTID only).
# TYPE shoal_replica_behind_transactions gauge
shoal_replica_behind_transactions{cluster="main",node="db2"} 0
# HELP shoal_replica_lag_seconds Replication lag of each replica as this agent judges it: source gtid, how long ago this agent saw the writer pass the replica's GTID position; source sbm, the replica's Seconds_Behind_Master (absent when unknown).
# TYPE shoal_replica_lag_seconds gauge
shoal_replica_lag_seconds{cluster="main",node="db2",source="gtid"} 0
`), "shoal_replica_behind_transactions", "shoal_replica_lag_seconds"); err != nil {
		t.Error(err)
	}

	// Writes stop reaching db2: the writer moves on to 130, db2 stays at
	// 100 and still says it is fine (IO running, Seconds_Behind_Master 0).
	if err := db1.SetTags(writer(130)); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	testkit.WaitFor(t, 10*time.Second, "db2 30 transactions behind, its seconds counting", func() bool {
		var err error
		p, err = c.Pool(ctx, "")
		l := lagOf(p, "db2")
		return err == nil && l != nil && l.Transactions != nil && *l.Transactions == 30 && l.Seconds != nil && *l.Seconds > 0
	})
	testkit.WaitFor(t, 10*time.Second, "db2 out, stale", func() bool {
		var err error
		p, err = c.Pool(ctx, "")
		return err == nil && len(p.Out) == 1 && p.Out[0].Name == "db2" && p.Out[0].Reason == "stale"
	})
	l := p.Out[0].Lag
	if l == nil || l.Source != "gtid" || *l.Transactions != 30 || *l.Seconds < 2 || *l.Seconds > time.Since(moved).Seconds()+0.1 {
		t.Errorf("db2 out stale %s after the writer moved on: lag %+v, want 30 tx and 2s to that", time.Since(moved), l)
	}
	if strings.ContainsAny(p.Out[0].Detail, "0123456789") && strings.Contains(p.Out[0].Detail, "tx") {
		t.Errorf("the pool's detail carries the figures (it would change on every tick): %q", p.Out[0].Detail)
	}
	h, err := c.History(ctx, client.HistoryFilter{Node: "db2", Kind: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	e := h.Entries[len(h.Entries)-1]
	if want := regexp.MustCompile(`^behind the writer db1 by more than max_lag 2s \(gtid\): 30 tx, 2\.\ds$`); e.Reason != "stale" || !want.MatchString(e.Detail) {
		t.Errorf("history: %+v; want reason stale, detail matching %s", e, want)
	}
	ms, err = c.Members(ctx, client.MemberFilter{Name: "db2"})
	if err != nil || len(ms) != 1 || ms[0].Lag == nil || ms[0].Lag.Source != "gtid" || ms[0].Lag.Transactions == nil || *ms[0].Lag.Transactions != 30 {
		t.Errorf("GET /v1/members: %+v, %v; want db2 30 transactions behind", ms, err)
	}

	// db2 leaves: out for a hard reason, with no lag and no series left
	// behind.
	if err := db2.Leave(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "db2 out, left", func() bool {
		p, err := c.Pool(ctx, "")
		return err == nil && len(p.Out) == 1 && p.Out[0].Reason != "stale" && p.Out[0].Lag == nil
	})
	if n, err := testutil.GatherAndCount(reg, "shoal_replica_behind_transactions", "shoal_replica_lag_seconds"); err != nil || n != 0 {
		t.Errorf("%d lag series after db2 left (%v), want none", n, err)
	}
}
