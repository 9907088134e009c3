//go:build bench

package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// TestSwitchoverOutage (suite 9) measures a client's write outage during a
// planned move of the writer, 3 db hosts (real MariaDB) and 1 app host in
// network namespaces, the db agents raft voters: `shoal switchover --to
// NODE` (out before in: demote, catch up, grant, promote, re-point, every
// router applied), against a plain read_only flip by hand as before it (the
// old primary set read-only, the replica caught up and made writable, the
// others re-pointed; the quorum then grants the next term as an outside
// promotion). Both in the same cluster, alternating, so they share the
// machine's conditions. A client writes through the app host's HAProxy
// every 10 ms, a new connection each; the outage is the longest gap between
// two acknowledged writes from 1 s before the move to 5 s after it.
// BENCH_SWITCHOVER_TRIALS (default 10; QUICK 2) sets the moves of each kind.
func TestSwitchoverOutage(t *testing.T) {
	e2e.Require(t)
	trials := envInt("BENCH_SWITCHOVER_TRIALS", Pick(10, 2))
	start := time.Now()
	ckey := e2e.Keygen(t)
	c := e2e.NewCluster(t, e2e.Options{DBHosts: 3, AppHosts: 1, DBFlags: e2e.ConsensusFlags(ckey, 3), AppFlags: e2e.ConsensusAppFlags(ckey)})
	var voters []*e2e.Agent
	for _, d := range c.DBs {
		voters = append(voters, d.Agent)
	}
	if _, last, ok := c.WaitConsensus(voters, 30*time.Second, func(ci *e2e.ConsensusInfo) bool { return ci.Term("main").Term == 1 }); !ok {
		t.Fatalf("no term 1 within 30s: %v", last)
	}
	c.Primary().Server.MustExec(e2e.InvTableDDL)
	time.Sleep(2 * time.Second)
	app := c.Apps[0]
	w, err := e2e.StartInvWriter(app.Name, app.Host, e2e.RWPort, 10*time.Millisecond, 200_000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	time.Sleep(2 * time.Second)
	var cmd, flip, cmdRO []float64
	var notes []string
	for k := range 2 * trials {
		next := c.DBs[(indexOf(c, c.Primary())+1)%len(c.DBs)]
		from := time.Now()
		if k%2 == 0 {
			out, code := e2e.ShoalCLI(t, c.DBs[(indexOf(c, next)+1)%len(c.DBs)].Agent, "switchover", "--to", next.Name, "--format", "json")
			if code != 0 {
				notes = append(notes, fmt.Sprintf("switchover %d to %s: exit %d: %.300s", k/2+1, next.Name, code, out))
				t.Logf("switchover to %s: exit %d:\n%s", next.Name, code, out)
				continue
			}
			c.SetPrimary(next)
			if i := strings.Index(out, `"read_only_seconds":`); i >= 0 {
				var ro float64
				fmt.Sscanf(out[i+len(`"read_only_seconds":`):], "%g", &ro)
				cmdRO = append(cmdRO, ro)
			}
		} else {
			c.Switchover(t, next)
		}
		time.Sleep(5 * time.Second)
		gap := longestGap(w.Writes(from.Add(-time.Second), time.Now()))
		if k%2 == 0 {
			cmd = append(cmd, gap)
		} else {
			flip = append(flip, gap)
		}
		t.Logf("move %d (%s) to %s: outage %.3fs", k+1, map[bool]string{true: "shoal switchover", false: "read_only flip"}[k%2 == 0], next.Name, gap)
	}
	var b strings.Builder
	b.WriteString("## 9. Write outage of a switchover (issue 26)\n\n")
	b.WriteString("What: 3 db hosts (real MariaDB, GTID replication) and 1 app host (HAProxy) in network namespaces, the db agents raft voters. " +
		"The writer moves round the three servers, alternately by `shoal switchover --to NODE` (run on the third server's agent; out before in: " +
		"demote, catch up, grant, promote, re-point, every router applied) and by a plain `read_only` flip by hand (the old primary read-only, the " +
		"replica caught up and made writable, the others re-pointed; the quorum grants the next term as an outside promotion). A client writes " +
		"through HAProxy's write port every 10 ms, a new connection each; the outage is the longest gap between two acknowledged writes from 1 s " +
		"before a move to 5 s after it.\n\n")
	fmt.Fprintf(&b, "Command: `sudo go test -tags 'bench e2e' -count=1 -v -run '^TestSwitchoverOutage$' ./test/bench/`. Moves: %d of each kind. This run took %s.\n\n",
		trials, time.Since(start).Round(time.Second))
	b.WriteString("| what | moves | p50 (s) | p90 | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		what string
		xs   []float64
	}{
		{"`shoal switchover`: client write outage", cmd},
		{"`shoal switchover`: no server writable (the command's own measure, demote sent → target writable)", cmdRO},
		{"plain `read_only` flip: client write outage", flip},
	} {
		s := Summarize(r.xs)
		fmt.Fprintf(&b, "| %s | %d | %s |\n", r.what, len(r.xs), s.Cells())
	}
	if sc, sf := Summarize(cmd), Summarize(flip); len(cmd) > 0 && len(flip) > 0 && sf.P50 > 0 {
		fmt.Fprintf(&b, "\nRatio of the p50 outages, switchover / flip: %.2f.\n", sc.P50/sf.P50)
	}
	b.WriteString("\nWhat bounds the switchover's outage: its grant waits until the raft leader's own view shows the old writer read-only " +
		"(granting earlier would let the leader's grant rules hand the term back to a server it still sees writable), and the target becomes " +
		"writable only after it learns the new term; the agents that change a server check it at once (probe `CheckNow`), so the gossip carries " +
		"the change without waiting for the probe's interval. The flip by hand makes the target writable at once and relies on the " +
		"outside-promotion rule; it has no catch-up guarantee of its own and no rollback, and anyone with SQL access can do it, which is " +
		"what terms and fencing guard against.\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	b.WriteString("\n")
	WriteSection(t, "90-switchover", b.String())
	if len(notes) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(notes, "\n"))
	}
}

func indexOf(c *e2e.Cluster, d *e2e.DBHost) int {
	for i, x := range c.DBs {
		if x == d {
			return i
		}
	}
	return 0
}

// longestGap is the longest time between two acknowledged writes, in
// seconds.
func longestGap(ws []e2e.InvWrite) float64 {
	var last time.Time
	var gap time.Duration
	for _, w := range ws {
		if !w.OK() {
			continue
		}
		if !last.IsZero() && w.Acked.Sub(last) > gap {
			gap = w.Acked.Sub(last)
		}
		if w.Acked.After(last) {
			last = w.Acked
		}
	}
	return gap.Seconds()
}
