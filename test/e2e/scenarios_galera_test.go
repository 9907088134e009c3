//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Bounds of the Galera scenario (generous: 2 shared cores).
const (
	// galeraDesyncBound: probe interval + gossip, like a replica's removal.
	galeraDesyncBound = 3 * time.Second
	// galeraCutSelfBound: Galera's own detection (evs.suspect_timeout 2 s,
	// inactive 3 s) before the cut node turns non-Primary, then one check.
	galeraCutSelfBound = 8 * time.Second
	// galeraCutOthersBound: the others see the cut node's agent failed
	// (serf's detection; the same bound as the link_down scenario).
	galeraCutOthersBound = 10 * time.Second
	// galeraKillBound: the pool-removal time of a killed mysqld (the
	// agent is alive and publishes critical at once), as replica_kill.
	galeraKillBound = 3 * time.Second
)

// galera: a real 3-node MariaDB Galera cluster (galera-4), a db agent on
// every node and an app agent. Checked on every agent's /v1/pool:
//
//  1. all synced: writer db1 (the first synced node by name), db2 and db3
//     readers, the same on every agent;
//  2. SET GLOBAL wsrep_desync=ON on db2: out with galera-not-synced (and
//     that reason only) on every agent; OFF: back as a reader;
//  3. the writer's link cut (non-Primary, alone): it leaves its own pool
//     with galera-not-synced once Galera declares it non-Primary, the
//     others' pools once serf declares its agent failed; the writer moves
//     to db2 on every other agent; db1 is never a writer again on any
//     agent during the cut (every sample, 50 ms apart); healed, db1 is
//     the writer again everywhere;
//  4. kill -9 of the writer's mariadbd: the writer moves to another synced
//     node on every agent within the pool-removal time;
//  6. it restarts with an empty datadir (SST): the donor is out with
//     galera-not-synced while it donates; then db1 is the writer again.
func testGalera(t *testing.T) {
	s := Scenario(t, "galera")
	RequireGalera(s)
	c := NewGaleraCluster(s, GaleraOptions{})
	s.Measure("galera_synced", c.Synced, 60*time.Second, true)
	s.Measure("formed", c.Formed, 60*time.Second, true)
	db1, db2 := c.Nodes[0], c.Nodes[1]
	all := c.AgentNames()

	// 1. One writer, the same everywhere.
	want := c.ExpectPool("db1")
	for _, name := range all {
		snap := c.Obs.Latest()[name]
		if snap.Pool() != want {
			s.Errorf("1. %s: pool %s, want %s", name, snap.Pool(), want)
		}
	}

	// 2. Desync db2.
	t0 := time.Now()
	if err := db2.Exec("SET GLOBAL wsrep_desync=ON"); err != nil {
		s.Fatal(err)
	}
	r := c.Obs.WaitAgents(all, t0, limitFor(galeraDesyncBound), isOutFor("db2", "galera-not-synced"))
	if !within(s, "desync_out_on_every_agent", r, galeraDesyncBound) {
		s.Errorf("2. db2 desynced not out with galera-not-synced everywhere; latest:\n%s", c.Describe())
	}
	time.Sleep(2 * time.Second) // long enough for the probe's fall to pass
	t1 := time.Now()
	if err := db2.Exec("SET GLOBAL wsrep_desync=OFF"); err != nil {
		s.Fatal(err)
	}
	r = c.Obs.WaitAgents(all, t1, limitFor(galeraDesyncBound), func(sn Snap) bool { return sn.OK() && sn.Pool() == want })
	if !within(s, "resync_back_on_every_agent", r, galeraDesyncBound) {
		s.Errorf("2. db2 not back after wsrep_desync=OFF; latest:\n%s", c.Describe())
	}
	// While desynced, db2 was out for that reason alone on every agent
	// (the probe's hysteresis turns the node critical after fall checks;
	// the reason must stay galera-not-synced).
	for _, name := range all {
		for _, sn := range c.Obs.Snaps(name, t0, t1) {
			if reason, out := sn.Out["db2"]; out && reason != "galera-not-synced" {
				s.Errorf("2. %s at +%s: db2 out with %q while desynced, want galera-not-synced", name,
					sn.At.Sub(t0).Round(time.Millisecond), reason)
				break
			}
		}
	}

	// 3. Cut the writer off from the other two.
	others := c.AgentNames("db1")
	t2 := time.Now()
	if err := db1.Host.LinkDown(); err != nil {
		s.Fatal(err)
	}
	r = c.Obs.WaitAgents([]string{"db1"}, t2, limitFor(galeraCutSelfBound), isOutFor("db1", "galera-not-synced"))
	if !within(s, "cut_out_on_own_agent", r, galeraCutSelfBound) {
		s.Errorf("3. cut db1 not out with galera-not-synced on its own agent; latest:\n%s", c.Describe())
	}
	r = c.Obs.WaitAgents(others, t2, limitFor(galeraCutOthersBound), func(sn Snap) bool {
		return sn.OK() && sn.Role("db1") == "out" && slices.Equal(sn.Writers, []string{"db2"})
	})
	if !within(s, "cut_writer_moved_on_others", r, galeraCutOthersBound) {
		s.Errorf("3. writer not moved from cut db1 to db2 on the others; latest:\n%s", c.Describe())
	}
	s.Note("3. cut db1: reasons %s", galeraReasons(c, "db1"))
	// Keep the cut a while, so that the never-a-writer check below covers
	// a steady state too.
	time.Sleep(3 * time.Second)
	t3 := time.Now()
	if err := db1.Host.LinkUp(); err != nil {
		s.Fatal(err)
	}
	// 5. The isolated node never stays a writer: from its own agent's
	// bound (on db1) and the others' bound (elsewhere) until the heal,
	// no sample of any agent shows db1 as a writer.
	samples, lastWriter := 0, map[string]time.Duration{}
	for _, name := range all {
		bound := galeraCutOthersBound
		if name == "db1" {
			bound = galeraCutSelfBound
		}
		for _, sn := range c.Obs.Snaps(name, t2, t3) {
			samples++
			if slices.Contains(sn.Writers, "db1") {
				lastWriter[name] = sn.At.Sub(t2)
				if sn.At.Sub(t2) > bound {
					s.Errorf("5. %s at +%s: cut db1 still a writer (bound %s)", name, sn.At.Sub(t2).Round(time.Millisecond), bound)
				}
			}
		}
	}
	var lw []string
	for _, name := range all {
		lw = append(lw, fmt.Sprintf("%s:%s", name, lastWriter[name].Round(time.Millisecond)))
	}
	s.Note("5. last sample showing cut db1 as a writer, per agent (0s: none): %s, over %d samples", strings.Join(lw, " "), samples)
	if samples < 4*int(t3.Sub(t2)/time.Second) {
		s.Errorf("5. only %d samples during a %s cut: the check did not look", samples, t3.Sub(t2).Round(time.Second))
	}

	// Healed: db1 rejoins (IST) and, the first synced node by name, is the
	// writer again on every agent.
	r = c.Obs.WaitAgents(all, t3, limitFor(30*time.Second), func(sn Snap) bool {
		return sn.OK() && sn.Pool() == want && c.allAlive(sn)
	})
	if !within(s, "healed_back_on_every_agent", r, 30*time.Second) {
		s.Fatalf("3. after the heal the agents do not all show %s; latest:\n%s", want, c.Describe())
	}

	// 4. Kill the writer's mariadbd.
	victim, next := db1, db2.Name
	t4 := time.Now()
	victim.Kill()
	r = c.Obs.WaitAgents(all, t4, limitFor(galeraKillBound), func(sn Snap) bool {
		return sn.OK() && sn.Role(victim.Name) == "out" && slices.Equal(sn.Writers, []string{next})
	})
	if !within(s, "kill_writer_moved_on_every_agent", r, galeraKillBound) {
		s.Errorf("4. writer not moved from killed %s to %s on every agent; latest:\n%s", victim.Name, next, c.Describe())
	}
	var per []string
	for _, name := range all {
		per = append(per, fmt.Sprintf("%s:%s", name, r.Per[name].Round(time.Millisecond)))
	}
	s.Note("4. writer moved from killed %s to %s: %s; reasons %s", victim.Name, next, strings.Join(per, " "), galeraReasons(c, victim.Name))

	// 6. db1 comes back with an empty datadir: a full SST from db2 or db3.
	// The donor is Donor/Desynced while it sends; when the test's own
	// polling saw that last long enough for a probe and gossip to see it,
	// every agent must have shown the donor out with galera-not-synced.
	// Once db1 is synced it is the writer again everywhere (first by name).
	// Galera first evicts the killed node (evs.inactive_timeout): a node
	// that rejoins before the survivors are a primary component of two can
	// find them non-primary and abort ("failed to reach primary view").
	for _, g := range c.Nodes[1:] {
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, cl, n, err := g.WsrepStatus()
			if err == nil && st == "Synced" && cl == "Primary" && n == 2 {
				break
			}
			if time.Now().After(deadline) {
				s.Fatalf("6. %s: not a synced primary component of 2 after the kill within 30s: %s %s size %d err %v", g.Name, st, cl, n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := db1.Wipe(); err != nil {
		s.Fatal(err)
	}
	t5 := time.Now()
	if err := db1.Start(false); err != nil {
		s.Fatal(err)
	}
	donorFrom, donorTo := map[string]time.Time{}, map[string]time.Time{}
	for time.Since(t5) < 60*time.Second {
		for _, g := range c.Nodes[1:] {
			if st, _, _, err := g.WsrepStatus(); err == nil && strings.HasPrefix(st, "Donor") {
				if donorFrom[g.Name].IsZero() {
					donorFrom[g.Name] = time.Now()
				}
				donorTo[g.Name] = time.Now()
			}
		}
		if st, cl, _, err := db1.WsrepStatus(); err == nil && st == "Synced" && cl == "Primary" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := db1.WaitSynced(3, 5*time.Second); err != nil {
		s.Fatalf("6. %v", err)
	}
	for donor, from := range donorFrom {
		held := donorTo[donor].Sub(from)
		seen := 0
		for _, name := range all {
			for _, sn := range c.Obs.Snaps(name, from, donorTo[donor].Add(time.Second)) {
				if sn.Out[donor] == "galera-not-synced" {
					seen++
					break
				}
			}
		}
		s.Note("6. donor %s was Donor/Desynced for about %s; %d of %d agents showed it out with galera-not-synced",
			donor, held.Round(10*time.Millisecond), seen, len(all))
		if held >= 1500*time.Millisecond && seen != len(all) {
			s.Errorf("6. donor %s desynced for %s, but only %d of %d agents showed it out with galera-not-synced", donor, held, seen, len(all))
		}
	}
	r = c.Obs.WaitAgents(all, t5, limitFor(60*time.Second), func(sn Snap) bool {
		return sn.OK() && sn.Pool() == want && c.allAlive(sn)
	})
	if !within(s, "sst_rejoined_writer_again_on_every_agent", r, 60*time.Second) {
		s.Errorf("6. db1 rejoined by SST but not the writer everywhere; latest:\n%s", c.Describe())
	}

	// Never two writers on any agent, at any time.
	for _, v := range c.Obs.Violations(time.Time{}) {
		s.Errorf("two writers at %s: %s", v.At.Format("15:04:05.000"), v.What)
	}
}

// galeraReasons lists each agent's latest reason for node.
func galeraReasons(c *GaleraCluster, node string) string {
	latest := c.Obs.Latest()
	var out []string
	for _, a := range c.AgentNames() {
		out = append(out, fmt.Sprintf("%s:%s", a, latest[a].Out[node]))
	}
	return strings.Join(out, " ")
}
