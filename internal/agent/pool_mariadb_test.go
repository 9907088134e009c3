package agent

import (
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
	primary, r1, r2 := replicatedServers(t)
	dbCfg := func(name string, s *mariadbtest.Server, join ...string) *config.Config {
		return dbConfig(t, name, s, join...)
	}
	db1 := startNode(t, dbCfg("db1", primary))
	db2 := startNode(t, dbCfg("db2", r1, db1.cfg.Bind))
	db3 := startNode(t, dbCfg("db3", r2, db1.cfg.Bind))
	app := startNode(t, testConfig(t, "app1", "fast", "", db1.cfg.Bind))
	agents := []*testNode{db1, db2, db3, app}

	same := func(want string) func() bool {
		return func() bool {
			for _, n := range agents {
				if poolOf(n.a) != want {
					return false
				}
			}
			return true
		}
	}
	const healthy = "db1|db2,db3|"
	testkit.WaitFor(t, 30*time.Second, "every agent: 1 writer, 2 readers", same(healthy))
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
