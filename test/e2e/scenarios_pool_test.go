//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// 1. The cluster forms: every agent's pool is 1 writer + 2 readers, HAProxy
// matches, and a client reaches the primary on the write port and a
// replica on the read port.
func testClusterForms(t *testing.T) {
	s := Scenario(t, "cluster_forms")
	c := NewCluster(s, Options{})
	s.Measure("formed", c.Formed, 60*time.Second, true)
	for name, snap := range c.Obs.Latest() {
		if len(snap.Writers) != 1 || len(snap.Readers) != 2 || snap.Pool() != c.HealthyPool() {
			s.Errorf("%s: pool %s, want %s", name, snap.Pool(), c.HealthyPool())
		}
	}
	// Pool addresses are what routers use: the host address and the
	// server's port (--mysql-port), while the probe uses 127.0.0.1.
	want := map[string]string{}
	for _, d := range c.DBs {
		want[d.Name] = d.Addr()
	}
	for _, a := range c.Agents() {
		var pool client.PoolResponse
		if err := c.Get(a, "/v1/pool", &pool); err != nil {
			s.Fatalf("%s /v1/pool: %v", a.Name, err)
		}
		for _, n := range append(pool.Writers, pool.Readers...) {
			if n.Addr != want[n.Name] {
				s.Errorf("%s lists %s at %s, want %s", a.Name, n.Name, n.Addr, want[n.Name])
			}
		}
		var self client.Info
		if err := c.Get(a, "/v1/agent/self", &self); err != nil || !self.Encrypted || self.Profile != "fast" {
			s.Errorf("%s: encrypted=%v profile=%q (err %v), want encrypted gossip and profile fast", a.Name, self.Encrypted, self.Profile, err)
		}
	}
	app := c.Apps[0]
	states, err := app.HAProxy.States()
	if err != nil {
		s.Fatalf("haproxy states: %v", err)
	}
	for _, d := range c.DBs {
		wantRW, wantRO := "maint", "ready"
		if d == c.Primary() {
			wantRW, wantRO = "ready", "maint"
		}
		if got := states[RWBackend+"/"+d.Name]; got != wantRW {
			s.Errorf("haproxy %s/%s = %s, want %s", RWBackend, d.Name, got, wantRW)
		}
		if got := states[ROBackend+"/"+d.Name]; got != wantRO {
			s.Errorf("haproxy %s/%s = %s, want %s", ROBackend, d.Name, got, wantRO)
		}
	}
	id, err := QueryOnce(app.Host, RWPort, "SELECT @@server_id")
	if err != nil || id != int64(c.Primary().Server.ServerID()) {
		s.Errorf("write port reached server_id %d (err %v), want the primary's %d", id, err, c.Primary().Server.ServerID())
	}
	var replicaIDs []int64
	for _, d := range c.Replicas() {
		replicaIDs = append(replicaIDs, int64(d.Server.ServerID()))
	}
	id, err = QueryOnce(app.Host, ROPort, "SELECT @@server_id")
	if err != nil || !slices.Contains(replicaIDs, id) {
		s.Errorf("read port reached server_id %d (err %v), want one of the replicas' %v", id, err, replicaIDs)
	}
}

// 2. kill -9 of a replica's mysqld: out of the pool on every agent within
// 3 s, maint in HAProxy, reads through HAProxy keep succeeding after the
// switch; restarted, it comes back.
func testReplicaKill(t *testing.T) {
	s := Scenario(t, "replica_kill")
	c := NewCluster(s, Options{})
	victim, app := c.Replicas()[0], c.Apps[0]
	cl, err := StartClient(app.Host, ROPort, "SELECT @@server_id", 50*time.Millisecond)
	if err != nil {
		s.Fatal(err)
	}
	defer cl.Stop()
	time.Sleep(time.Second)

	t0 := time.Now()
	victim.Server.Kill()
	const bound = 3 * time.Second
	r := c.Obs.WaitAgents(c.AgentNames(), t0, limitFor(bound), isOut(victim.Name))
	if !within(s, "out_on_every_agent", r, bound) {
		failWithState(s, c, victim.Name+" not out everywhere")
	}
	s.Note("reasons: %s", reasons(c, victim.Name, c.AgentNames()))
	hx := c.Obs.WaitHAProxy(app.Name, t0, limitFor(bound), func(h HXSnap) bool {
		return h.States[ROBackend+"/"+victim.Name] == "maint"
	})
	within(s, "haproxy_maint", hx, bound)

	// Reads after the switch: every one must succeed, none on the victim.
	switched := t0.Add(hx.Took)
	time.Sleep(3 * time.Second)
	ops := cl.Ops(switched, time.Now())
	before := cl.Ops(t0, switched)
	s.Count("client_ops_after_switch", len(ops))
	s.Count("client_errors_between_kill_and_switch", countErrors(before))
	s.Count("client_errors_after_switch", countErrors(ops))
	if len(ops) < 20 {
		s.Errorf("only %d client operations after the switch", len(ops))
	}
	for _, op := range ops {
		if op.Err != "" {
			s.Errorf("read at +%s after the switch failed: %s", op.Start.Sub(switched).Round(time.Millisecond), op.Err)
			break
		}
		if op.ServerID == int64(victim.Server.ServerID()) {
			s.Errorf("read at +%s after the switch answered by the killed server", op.Start.Sub(switched).Round(time.Millisecond))
			break
		}
	}

	t1 := time.Now()
	victim.Server.Restart()
	back := c.WaitHealthy(t1, limitFor(20*time.Second))
	if !within(s, "back_in_after_restart", back, 20*time.Second) {
		failWithState(s, c, victim.Name+" not back after restart")
	}
}

func countErrors(ops []Op) int {
	n := 0
	for _, op := range ops {
		if op.Err != "" {
			n++
		}
	}
	return n
}

// 3. SIGSTOP of a replica's mysqld (hung server): out within 5 s on every
// agent; SIGCONT: back.
func testReplicaStop(t *testing.T) {
	s := Scenario(t, "replica_stop")
	c := NewCluster(s, Options{})
	victim, app := c.Replicas()[1], c.Apps[0]
	t0 := time.Now()
	victim.Server.Stop()
	const bound = 5 * time.Second
	r := c.Obs.WaitAgents(c.AgentNames(), t0, limitFor(bound), isOut(victim.Name))
	if !within(s, "out_on_every_agent", r, bound) {
		failWithState(s, c, victim.Name+" not out everywhere")
	}
	s.Note("reasons: %s", reasons(c, victim.Name, c.AgentNames()))
	within(s, "haproxy_maint", c.Obs.WaitHAProxy(app.Name, t0, limitFor(bound), func(h HXSnap) bool {
		return h.States[ROBackend+"/"+victim.Name] == "maint"
	}), bound)

	t1 := time.Now()
	victim.Server.Cont()
	back := c.WaitHealthy(t1, limitFor(20*time.Second))
	if !within(s, "back_in_after_sigcont", back, 20*time.Second) {
		failWithState(s, c, victim.Name+" not back after SIGCONT")
	}
}

// 10. Replication stopped on one replica: it leaves the readers with reason
// replication-stopped; stopped on both: the writer serves reads instead of a
// stale reader the floor would keep (pool.read_fallback: writer, the default).
func testReplicationStopped(t *testing.T) {
	s := Scenario(t, "replication_stopped")
	c := NewCluster(s, Options{})
	r1, r2 := c.Replicas()[0], c.Replicas()[1]
	const bound = 5 * time.Second

	t0 := time.Now()
	r1.Server.MustExec("STOP SLAVE")
	r := c.Obs.WaitAgents(c.AgentNames(), t0, limitFor(bound), func(sn Snap) bool {
		return isOutFor(r1.Name, "replication-stopped")(sn) && slices.Equal(sn.Readers, []string{r2.Name})
	})
	if !within(s, "one_stopped_out_on_every_agent", r, bound) {
		failWithState(s, c, r1.Name+" not out for replication-stopped")
	}

	t1 := time.Now()
	r2.Server.MustExec("STOP SLAVE")
	p := c.Primary().Name
	r = c.Obs.WaitAgents(c.AgentNames(), t1, limitFor(bound), func(sn Snap) bool {
		return sn.OK() && slices.Equal(sn.Writers, []string{p}) && slices.Equal(sn.Readers, []string{p}) && len(sn.Floor) == 0 &&
			sn.Out[r1.Name] == "replication-stopped" && sn.Out[r2.Name] == "replication-stopped"
	})
	if !within(s, "both_stopped_writer_serves_reads", r, bound) {
		failWithState(s, c, "the writer does not serve reads in place of the stopped replicas")
	}

	t2 := time.Now()
	r1.Server.MustExec("START SLAVE")
	r2.Server.MustExec("START SLAVE")
	back := c.WaitHealthy(t2, limitFor(20*time.Second))
	if !within(s, "back_after_start_slave", back, 20*time.Second) {
		failWithState(s, c, fmt.Sprintf("%s and %s not back", r1.Name, r2.Name))
	}
}
