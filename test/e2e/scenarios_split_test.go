//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"
)

// 7. Partition {db1, db2} | {db3, app1}: no agent ever shows two writers;
// the app host, seeing most of the cluster vanish, reports isolated (and
// its HAProxy keeps the pre-partition states, but takes out db3 when its
// own agent reports it critical); healed, one consistent pool everywhere.
func testPartition(t *testing.T) {
	s := Scenario(t, "partition")
	c := NewCluster(s, Options{})
	app := c.Apps[0]
	a := []*Host{c.DBs[0].Host, c.DBs[1].Host}
	b := []*Host{c.DBs[2].Host, app.Host}
	const hold = 15 * time.Second

	t0 := time.Now()
	if err := Partition(a, b); err != nil {
		s.Fatal(err)
	}
	split := c.Obs.WaitAgents(c.AgentNames(), t0, hold, func(sn Snap) bool {
		if !sn.OK() {
			return false
		}
		mine, theirs := []string{c.DBs[0].Name, c.DBs[1].Name}, []string{c.DBs[2].Name, app.Name}
		if !slices.Contains(mine, sn.Agent) {
			mine, theirs = theirs, mine
		}
		for _, n := range theirs {
			if sn.Members[n] != "failed" {
				return false
			}
		}
		return true
	})
	info(s, "each_side_sees_the_other_failed", split)
	iso := c.Obs.WaitAgents([]string{app.Name}, t0, hold, func(sn Snap) bool { return sn.OK() && sn.Isolated })
	if !within(s, "app_reports_isolated", iso, 10*time.Second) {
		s.Errorf("%s never reported isolated during the partition; it saw: %s", app.Name, c.Obs.Latest()[app.Name].Pool()+
			" members "+c.Obs.Latest()[app.Name].MembersString())
	}
	if rest := hold - time.Since(t0); rest > 0 {
		time.Sleep(rest)
	}
	// Frozen: at the end of the partition the app's HAProxy still routes
	// as before it.
	if hs := c.Obs.HXSnaps(app.Name, time.Now().Add(-time.Second), time.Now()); len(hs) == 0 || !c.HealthyHAProxy(hs[len(hs)-1]) {
		last := "no sample"
		if len(hs) > 0 {
			last = hxString(hs[len(hs)-1])
		}
		s.Errorf("%s's HAProxy did not keep its pre-partition states (removals not frozen): %s", app.Name, last)
	}
	changes := 0
	var prev string
	for _, h := range c.Obs.HXSnaps(app.Name, t0, time.Now()) {
		if cur := hxString(h); cur != prev {
			changes++
			prev = cur
		}
	}
	s.Count("haproxy_state_changes_during_partition", changes-1)

	// Frozen, yet a removal a node reports itself goes out at once: db3's
	// mysqld, on the app's side, hangs; its agent reports it critical and
	// the app's HAProxy takes it out of the read backend while the app is
	// still isolated (docs/pool.md, Sinks). Frozen sinks used to withhold
	// it until the heal: the soak saw such a sink keep replicas its pool
	// judged 28 s stale.
	d3 := c.DBs[2]
	tHang := time.Now()
	d3.Server.Stop()
	gone := c.Obs.WaitHAProxy(app.Name, tHang, limitFor(15*time.Second), func(h HXSnap) bool {
		return h.Err == "" && h.States[ROBackend+"/"+d3.Name] == "maint"
	})
	isolated := c.Obs.Latest()[app.Name].Isolated
	d3.Server.Cont()
	if !within(s, "frozen_sink_takes_out_a_critical_reader", gone, 15*time.Second) {
		failWithState(s, c, app.Name+"'s HAProxy kept "+d3.Name+" in "+ROBackend+" while frozen though its mysqld hung")
	}
	if !isolated {
		s.Errorf("%s was no longer isolated when %s went out: the check above proves nothing about a frozen sink", app.Name, d3.Name)
	}

	t1 := time.Now()
	for _, h := range append(a, b...) {
		if err := h.ClearRules(); err != nil {
			s.Fatal(err)
		}
	}
	back := c.WaitHealthy(t1, limitFor(30*time.Second))
	if !within(s, "consistent_pool_after_heal", back, 30*time.Second) {
		failWithState(s, c, "no consistent pool after the heal")
	}
	s.Count("two_writer_samples", c.CheckNoTwoWriters(s))
}

// 8. Switchover (read_only flips): the writer moves on every agent,
// HAProxy's write backend follows, never two writers at any sample.
func testSwitchover(t *testing.T) {
	s := Scenario(t, "switchover")
	c := NewCluster(s, Options{})
	app := c.Apps[0]
	old, next := c.Primary(), c.Replicas()[0]
	const bound = 5 * time.Second

	t0 := time.Now()
	writable := c.Switchover(s, next)
	s.Measure("switchover_commands", time.Since(t0), 0, true)
	r := c.Obs.WaitAgents(c.AgentNames(), writable, limitFor(bound), func(sn Snap) bool {
		return sn.OK() && slices.Equal(sn.Writers, []string{next.Name})
	})
	if !within(s, "writer_moved_on_every_agent", r, bound) {
		failWithState(s, c, "writer did not move to "+next.Name)
	}
	hx := c.Obs.WaitHAProxy(app.Name, writable, limitFor(bound), func(h HXSnap) bool {
		return slices.Equal(h.Ready(RWBackend), []string{next.Name})
	})
	within(s, "haproxy_write_backend_followed", hx, bound)
	back := c.WaitHealthy(writable, limitFor(30*time.Second))
	if !within(s, "healthy_pool_with_new_primary", back, 30*time.Second) {
		failWithState(s, c, "pool not healthy with "+next.Name+" as primary and "+old.Name+" replicating")
	}
	s.Count("two_writer_samples", c.CheckNoTwoWriters(s))
}
