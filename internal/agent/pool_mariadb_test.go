package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

const probePW = "probe-pw"

// poolOf returns "writers|readers|out" (out with reasons) as this agent sees it.
func poolOf(a *Agent) string {
	v, err := a.PoolView("")
	if err != nil {
		return err.Error()
	}
	names := func(ns []struct{ n, r string }) string {
		var out []string
		for _, x := range ns {
			if x.r != "" {
				out = append(out, x.n+"("+x.r+")")
			} else {
				out = append(out, x.n)
			}
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	var w, r, o []struct{ n, r string }
	for _, n := range v.Writers {
		w = append(w, struct{ n, r string }{n.Name, n.Reason})
	}
	for _, n := range v.Readers {
		r = append(r, struct{ n, r string }{n.Name, n.Reason})
	}
	for _, n := range v.Out {
		o = append(o, struct{ n, r string }{n.Name, n.Reason})
	}
	return names(w) + "|" + names(r) + "|" + names(o)
}

// TestPoolWithRealServers: a primary and two GTID replicas, a db agent
// probing each, and an app agent: every agent computes the same pool, and a
// replica's crash takes it out of the pool everywhere.
func TestPoolWithRealServers(t *testing.T) {
	primary, r1, r2, agents := startRealCluster(t)
	db2, app := agents[1], agents[3]
	same := func(want string) func() bool { return samePool(agents, want) }
	const healthy = "db1|db2,db3|"
	v, _ := app.a.PoolView("")
	if v.Writers[0].Addr != primary.Addr() {
		t.Errorf("writer address %s, want the server's %s", v.Writers[0].Addr, primary.Addr())
	}

	// Every agent sees whom each replica replicates from (the src fact).
	testkit.WaitFor(t, 10*time.Second, "the app agent sees the replicas' source server_id", func() bool {
		want := map[string]uint32{"db1": 0, "db2": uint32(primary.ServerID()), "db3": uint32(primary.ServerID())}
		for _, m := range app.a.Members() {
			g := gossiped.FromSerf(m)
			if id, ok := want[g.Name]; ok && (g.Health == nil || g.Health.SourceServerID != id) {
				return false
			}
		}
		return true
	})

	// kill -9 a replica: out everywhere, reason critical.
	start := time.Now()
	r2.Kill()
	testkit.WaitFor(t, 10*time.Second, "db3 out everywhere", same("db1|db2|db3(critical)"))
	t.Logf("kill -9 of a replica's mysqld → out of the pool on all 4 agents: %s", time.Since(start).Round(time.Millisecond))

	// Restart: back in after rise passes.
	r2.Restart()
	testkit.WaitFor(t, 30*time.Second, "db3 back everywhere", same(healthy))

	// Switchover: the old primary goes read-only and the writer moves.
	primary.MustExec("SET GLOBAL read_only=ON")
	r1.MustExec("STOP SLAVE")
	r1.MustExec("SET GLOBAL read_only=OFF")
	testkit.WaitFor(t, 10*time.Second, "writer moves to db2", func() bool {
		for _, n := range agents {
			if !strings.HasPrefix(poolOf(n.a), "db2|") {
				return false
			}
		}
		return true
	})
	// Both writable: a conflict, never two writers.
	primary.MustExec("SET GLOBAL read_only=OFF")
	testkit.WaitFor(t, 10*time.Second, "conflict seen, db2 kept as the only writer", func() bool {
		for _, n := range agents {
			v, _ := n.a.PoolView("")
			if len(v.Writers) != 1 || v.Writers[0].Name != "db2" || len(v.Clusters[0].Conflict) != 2 {
				return false
			}
		}
		return true
	})

	// The health endpoint's view of the local probe.
	role, h := db2.a.LocalHealth()
	if role != "db" || h == nil || h.State != "passing" || h.Connects < 1 || !strings.HasPrefix(h.Published, "v1;h=p") {
		t.Errorf("db2 local health: %s %+v", role, h)
	}
	if role, h := app.a.LocalHealth(); role != "app" || h != nil {
		t.Errorf("app local health: %s %+v", role, h)
	}
}

// startRealCluster starts a primary and two GTID replicas, db agents db1
// (the primary), db2 and db3 probing them and an app agent app1, and waits
// until every agent sees db1 as the writer and db2 and db3 as readers.
func startRealCluster(t *testing.T) (primary, r1, r2 *mariadbtest.Server, agents []*testNode) {
	t.Helper()
	primary, r1, r2 = replicatedServers(t)
	db1 := startNode(t, dbConfig(t, "db1", primary))
	db2 := startNode(t, dbConfig(t, "db2", r1, db1.cfg.Bind))
	db3 := startNode(t, dbConfig(t, "db3", r2, db1.cfg.Bind))
	app := startNode(t, testConfig(t, "app1", "fast", "", db1.cfg.Bind))
	agents = []*testNode{db1, db2, db3, app}
	testkit.WaitFor(t, 30*time.Second, "every agent: 1 writer, 2 readers", samePool(agents, "db1|db2,db3|"))
	return primary, r1, r2, agents
}

// samePool reports whether every agent's pool is want (as poolOf writes it).
func samePool(agents []*testNode, want string) func() bool {
	return func() bool {
		for _, n := range agents {
			if poolOf(n.a) != want {
				return false
			}
		}
		return true
	}
}

// replicatedServers starts a primary and two GTID replicas, each with the
// probe user.
func replicatedServers(t *testing.T) (primary, r1, r2 *mariadbtest.Server) {
	t.Helper()
	t.Setenv("SHOAL_MYSQL_PASSWORD", probePW)
	primary, rs := mariadbtest.StartReplicated(t, 2, probeUser)
	return primary, rs[0], rs[1]
}

// probeUser is the account the db agents' probes use.
var probeUser = mariadbtest.User{Name: "shoal", Password: probePW, Grants: "SLAVE MONITOR"}

// dbConfig is a fast-profile db agent probing s as the probe user.
func dbConfig(t *testing.T, name string, s *mariadbtest.Server, join ...string) *config.Config {
	t.Helper()
	c := testConfig(t, name, "fast", "", join...)
	c.MySQL.Addr = s.Addr()
	c.MySQL.User = "shoal"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPoolWrongSourceWithRealServers: a replica re-pointed at another
// replica (chained, as after someone else's failover) is out of the readers
// on every agent with reason wrong-source, and back in when re-pointed at
// the writer.
func TestPoolWrongSourceWithRealServers(t *testing.T) {
	primary, r1, r2, agents := startRealCluster(t)
	app := agents[3]
	same := func(want string) func() bool { return samePool(agents, want) }
	const healthy = "db1|db2,db3|"

	// Re-point db3's server at db2's: it replicates from a replica.
	r2.MustExec("STOP SLAVE")
	r2.ReplicateFrom(r1)
	start := time.Now()
	testkit.WaitFor(t, 5*time.Second, "db3 out with wrong-source everywhere", same("db1|db2|db3(wrong-source)"))
	t.Logf("replica re-pointed at another replica (threads running) → wrong-source on all 4 agents: %s",
		time.Since(start).Round(time.Millisecond))
	v, _ := app.a.PoolView("")
	want := fmt.Sprintf("replicates from server_id %d, writer has %d", r1.ServerID(), primary.ServerID())
	if len(v.Out) != 1 || v.Out[0].Detail != want {
		t.Errorf("out %+v, want db3 with detail %q", v.Out, want)
	}

	// Back at the writer: back in everywhere.
	r2.MustExec("STOP SLAVE")
	r2.ReplicateFrom(primary)
	start = time.Now()
	testkit.WaitFor(t, 10*time.Second, "db3 back everywhere", same(healthy))
	t.Logf("re-pointed at the writer → back in on all 4 agents: %s", time.Since(start).Round(time.Millisecond))
}
