//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSwitchover (issue 26, part 4): `shoal switchover --to NODE` moves
// the writer out before in, with real MariaDB, agents and HAProxy. Bad
// requests change nothing; a switchover run on a replica's agent moves the
// writer to another replica, the old primary and the third server then
// replicate from it, every router applies the new term, and a client
// writing through each HAProxy sees each write accepted only by the holder
// of the term current then; a second switchover, run on the then old
// writer, moves it back. Flap damping is on for the db agents: two
// switchovers in a row damp no one.
func TestSwitchover(t *testing.T) {
	Require(t)
	p := newPartRig(t, "--damping=true")
	c := p.c
	db1, db2, db3 := c.DBs[0], c.DBs[1], c.DBs[2]

	for _, tc := range []struct {
		on   *Agent
		args []string
		code int
		want string
	}{
		{db3.Agent, []string{"switchover"}, 2, "--to NODE is required"},
		{db3.Agent, []string{"switchover", "--to", db2.Name, "--catch-up", "0s"}, 2, "--catch-up 0s: must be from 1s to 2m"},
		{db3.Agent, []string{"switchover", "--to", "nosuch"}, 2, `to "nosuch": not a db member of any cluster`},
		{db3.Agent, []string{"switchover", "--to", db1.Name}, 1, "db1 already holds term 1"},
		{db3.Agent, []string{"switchover", "--to", db2.Name, "--cluster", "other"}, 2, `cluster "other": no such cluster`},
		{c.Apps[0].Agent, []string{"switchover", "--to", db2.Name}, 1, "this agent is not a voter"},
	} {
		out, code := ShoalCLI(t, tc.on, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("shoal %s on %s: exit %d, want %d with %q:\n%s", strings.Join(tc.args, " "), tc.on.Name, code, tc.code, tc.want, out)
		}
	}
	if _, last, ok := c.WaitConsensus(p.voters, time.Second, holdsTerm(1, db1.Name)); !ok {
		t.Fatalf("a refused switchover moved the term: %s", describeConsensus(last))
	}

	move := func(t *testing.T, on *Agent, to *DBHost, term uint64) {
		// An operator switches over a healthy cluster: wait until every
		// agent shows the current writer and every other server a reader
		// (the servers re-pointed by the last switchover included).
		cur := c.Primary().Name
		if w := c.Obs.WaitAgents(c.AgentNames(), time.Now(), 15*time.Second, func(s Snap) bool {
			return s.OK() && slices.Equal(s.Writers, []string{cur}) && len(s.Out) == 0
		}); !w.OK {
			t.Fatalf("the pool is not healthy before the switchover:\n%s", c.Describe())
		}
		r := p.window(t, func(t *testing.T) {
			start := time.Now()
			out, code := ShoalCLI(t, on, "switchover", "--to", to.Name)
			t.Logf("shoal switchover --to %s on %s (%.2fs):\n%s", to.Name, on.Name, time.Since(start).Seconds(), out)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, want := range []string{"applied on 2/2 routers", fmt.Sprintf("(term %d)", term), "no server took writes for"} {
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q", want)
				}
			}
			if _, last, ok := c.WaitConsensus(p.voters, 5*time.Second, holdsTerm(term, to.Name)); !ok {
				t.Fatalf("term %d to %s not on every voter: %s", term, to.Name, describeConsensus(last))
			}
			c.SetPrimary(to)
			if ro := readOnlyOf(t, to); ro {
				t.Errorf("%s is read-only after the switchover", to.Name)
			}
			for _, d := range c.DBs {
				if d == to {
					continue
				}
				if !readOnlyOf(t, d) {
					t.Errorf("%s is writable after the switchover", d.Name)
				}
				d.Server.WaitReplicating(30 * time.Second)
				st, err := d.Server.SlaveStatus()
				if err != nil || st["Master_Host"] != to.Host.IP {
					t.Errorf("%s replicates from %q, want %s (%v)", d.Name, st["Master_Host"], to.Host.IP, err)
				}
			}
			p.waitAcked(t, "after the switchover", to, start, partResume)
		})
		reportViolations(t, t.Name(), r)
	}
	t.Run("to_db2_run_on_db3", func(t *testing.T) { move(t, db3.Agent, db2, 2) })
	t.Run("back_to_db1_run_on_db2", func(t *testing.T) { move(t, db2.Agent, db1, 3) })

	// Every server is healthy: nothing damped, every pool has db1 as the
	// writer and the two others as readers.
	names := c.AgentNames()
	conv := c.Obs.WaitAgents(names, time.Now(), 15*time.Second, func(s Snap) bool {
		return s.OK() && slices.Equal(s.Writers, []string{db1.Name}) && len(s.Out) == 0
	})
	if !conv.OK {
		t.Errorf("not every agent back to the healthy pool within 15s of the second switchover:\n%s", c.Describe())
	}
	for _, a := range []*Agent{db1.Agent, db2.Agent, db3.Agent} {
		if s, ok := c.Obs.Latest()[a.Name]; ok {
			for n, why := range s.Out {
				if why == "damped" {
					t.Errorf("%s holds %s out as damped after two switchovers", a.Name, n)
				}
			}
		}
	}
}

func readOnlyOf(t *testing.T, d *DBHost) bool {
	t.Helper()
	var ro bool
	if err := d.Server.DB().QueryRow("SELECT @@global.read_only").Scan(&ro); err != nil {
		t.Fatalf("e2e: read_only of %s: %v", d.Name, err)
	}
	return ro
}
