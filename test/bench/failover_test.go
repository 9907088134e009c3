//go:build bench

package bench

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/test/e2e"
)

// TestFailoverOutage (suite 10) measures a client's write outage when the
// writer's mariadbd is killed (SIGKILL) and the raft leader fails it over
// by itself (consensus.failover), 3 db hosts (real MariaDB, GTID
// replication) and 1 app host (HAProxy) in network namespaces. A client
// writes through HAProxy's write port every 10 ms, a new connection each;
// the outage is the longest gap between two acknowledged writes from 1 s
// before the kill to 5 s after the new writer's first acknowledged write.
// Between trials the dead server is restarted (read_only=ON in its file);
// its agent makes it a replica of the new writer, or leaves it diverged
// (a writer killed mid-write may hold a transaction its replicas never
// received), and then the bench rewinds it to the promotion position: the
// rows the new writer lacks deleted, its binlog reset, replication from
// the new writer. BENCH_FAILOVER_TRIALS (default 20; QUICK 3) sets the kills,
// BENCH_FAILOVER_FREEZES (default 20; QUICK 3) the host freezes: the
// writer's agent and mariadbd SIGSTOPped, thawed once the term moved;
// BENCH_FAILOVER_SEMISYNC (default 20; QUICK 3) the kills with MariaDB's
// semi-synchronous replication on. Each trial counts the writes the dead
// writer acknowledged that the new writer lacks (lost).
func TestFailoverOutage(t *testing.T) {
	e2e.Require(t)
	trials := envInt("BENCH_FAILOVER_TRIALS", Pick(20, 3))
	freezes := envInt("BENCH_FAILOVER_FREEZES", Pick(20, 3))
	semiKills := envInt("BENCH_FAILOVER_SEMISYNC", Pick(20, 3))
	start := time.Now()
	ckey := e2e.Keygen(t)
	c := e2e.NewCluster(t, e2e.Options{DBHosts: 3, AppHosts: 1, DBFlags: append(e2e.ConsensusFlags(ckey, 3), "--consensus-failover", "--consensus-failover-limit", "1000"),
		AppFlags: e2e.ConsensusAppFlags(ckey)})
	var voters []*e2e.Agent
	for _, d := range c.DBs {
		voters = append(voters, d.Agent)
	}
	if _, last, ok := c.WaitConsensus(voters, 30*time.Second, func(ci *e2e.ConsensusInfo) bool { return ci.Term("main").Term == 1 }); !ok {
		t.Fatalf("no term 1 within 30s: %v", last)
	}
	c.Primary().Server.MustExec(e2e.InvTableDDL)
	for _, d := range c.DBs {
		d.Server.PersistReadOnly(true) // every file ON: the writer is writable at runtime only
	}
	time.Sleep(2 * time.Second)
	app := c.Apps[0]
	w, err := e2e.StartInvWriter(app.Name, app.Host, e2e.RWPort, 10*time.Millisecond, 200_000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	time.Sleep(2 * time.Second)
	type fault struct {
		name   string
		trials int
		setup  func()                // before the first trial (nil: none)
		do     func(old *e2e.DBHost) // kills the writer
		undo   func(old *e2e.DBHost) // before the rejoin
	}
	faults := []*fault{
		{name: "mysqld kill", trials: trials, do: func(old *e2e.DBHost) { old.Server.Kill() }, undo: func(*e2e.DBHost) {}},
		{name: "host freeze", trials: freezes,
			do: func(old *e2e.DBHost) {
				if err := old.Agent.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				old.Server.Stop()
			},
			undo: func(old *e2e.DBHost) {
				_ = old.Agent.Signal(syscall.SIGCONT)
				old.Server.Cont()
			}},
		{name: "mysqld kill, semi-sync", trials: semiKills, setup: func() { semiSync(t, c) },
			do: func(old *e2e.DBHost) { old.Server.Kill() }, undo: func(*e2e.DBHost) {}},
	}
	outage, term := map[string][]float64{}, map[string][]float64{}
	lost, ackedBefore := map[string]int{}, map[string]int{}
	var diverged []string // each old writer's return, as its agent judged it
	for _, f := range faults {
		if f.setup != nil && f.trials > 0 {
			f.setup()
		}
		for k := range f.trials {
			old := c.Primary()
			term0 := currentTerm(c, voters)
			killed := time.Now()
			f.do(old)
			var others []*e2e.Agent // a frozen voter answers nothing
			for _, v := range voters {
				if v != old.Agent {
					others = append(others, v)
				}
			}
			next, took := waitNewWriter(c, others, old, term0, 60*time.Second)
			if next == nil {
				t.Fatalf("%s %d of %s: no new term within 60s:\n%s", f.name, k+1, old.Name, c.Describe())
			}
			f.undo(old)
			c.SetPrimary(next)
			for _, d := range c.DBs {
				d.Server.PersistReadOnly(true)
			}
			acked := waitAck(w, next, killed, 30*time.Second)
			time.Sleep(5 * time.Second)
			gap := longestGap(w.Writes(killed.Add(-time.Second), acked.Add(5*time.Second)))
			outage[f.name], term[f.name] = append(outage[f.name], gap), append(term[f.name], took.Seconds())
			n, of := lostAcked(t, w, old, next, killed)
			lost[f.name] += n
			ackedBefore[f.name] += of
			t.Logf("%s %d of %s: term to %s in %.3fs, client write outage %.3fs, acknowledged writes lost %d of %d in the 10 s before",
				f.name, k+1, old.Name, next.Name, took.Seconds(), gap, n, of)
			diverged = append(diverged, rejoin(t, c, old, next, term0+1))
			if wr := c.Obs.WaitAgents(c.AgentNames(), time.Now(), 30*time.Second, func(s e2e.Snap) bool {
				return s.OK() && len(s.Writers) == 1 && s.Writers[0] == next.Name && len(s.Readers) == 2
			}); !wr.OK {
				t.Fatalf("after %s %d the pool is not healthy again within 30s:\n%s", f.name, k+1, c.Describe())
			}
		}
	}
	var b strings.Builder
	b.WriteString("## 10. Write outage of a failover (issue 38)\n\n")
	b.WriteString("What: 3 db hosts (real MariaDB, GTID replication) and 1 app host (HAProxy) in network namespaces, the db agents raft voters " +
		"with `consensus.failover` on. The writer's mariadbd is killed with SIGKILL; the raft leader confirms the death (its agent reports " +
		"mysqld down, every replica lost it, for 0.5 s), surveys the replicas, grants the next term to the most advanced, promotes it and " +
		"re-points the other. Host freeze: the writer's agent and mariadbd are SIGSTOPped (a hung host); the replicas' IO threads " +
		"report running but receive nothing, not even heartbeats (`MASTER_HEARTBEAT_PERIOD=1`), which they publish after 3 periods, and " +
		"the leader waits the writer's lease (5 s; and raft's leader lease, 0.5 s, when the frozen agent led raft) from when it first saw the agent gone; the frozen " +
		"host is thawed once the new writer holds the term. Semi-sync: the same kill with MariaDB's built-in semi-synchronous replication " +
		"on every server (`rpl_semi_sync_master_enabled`, `rpl_semi_sync_slave_enabled`, wait point `AFTER_SYNC`, `rpl_semi_sync_master_wait_no_slave=OFF`): a write is acknowledged " +
		"only once a replica received it. Lost writes: the writes the dead writer acknowledged in the 10 s before the fault whose row " +
		"the new writer lacks. A client writes through HAProxy's write port every 10 ms, a new connection each; the outage is the longest gap " +
		"between two acknowledged writes from 1 s before the kill to 5 s after the new writer's first. Between trials the dead server is " +
		"restarted read-only; its own agent makes it a replica of the new writer, or leaves it diverged and the bench rewinds it to the promotion position (deletes the rows the new writer lacks).\n\n")
	fmt.Fprintf(&b, "Command: `sudo go test -tags 'bench e2e' -count=1 -v -run '^TestFailoverOutage$' ./test/bench/`. Trials: %d kills, %d freezes, %d semi-sync kills. This run took %s.\n\n",
		trials, freezes, semiKills, time.Since(start).Round(time.Second))
	b.WriteString("| fault | what | trials | p50 (s) | p90 | p99 | max |\n|---|---|---|---|---|---|---|\n")
	for _, f := range faults {
		fmt.Fprintf(&b, "| %s | client write outage | %d | %s |\n", f.name, len(outage[f.name]), Summarize(outage[f.name]).Cells())
		fmt.Fprintf(&b, "| %s | fault → next term on every other voter | %d | %s |\n", f.name, len(term[f.name]), Summarize(term[f.name]).Cells())
	}
	b.WriteString("\n| fault | trials | writes the dead writer acknowledged in the 10 s before | of them, missing on the new writer (lost) |\n|---|---|---|---|\n")
	for _, f := range faults {
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", f.name, len(outage[f.name]), ackedBefore[f.name], lost[f.name])
	}
	nd := 0
	for _, r := range diverged {
		if strings.Contains(r, "diverged") {
			nd++
		}
	}
	fmt.Fprintf(&b, "\nThe dead writer's return, judged by its own agent (after a restart): %d of %d rejoined as a replica of the new writer; "+
		"%d diverged (transactions it wrote and never sent, counted and named; the bench then rewinds it).\n", len(diverged)-nd, len(diverged), nd)
	b.WriteString("\nThe peers' documented figures, for scale (not measured here): Orchestrator 10-13 s at GitHub; MaxScale's " +
		"monitor up to 25 s before the failover starts (5 × 2 s ticks and a 3 s connect timeout); replication-manager's stress tests allow " +
		"about 11 s per failover; VTOrc took 57 s where replicas kept reporting the primary up. Targets (issue 38): mysqld kill p99 ≤ 2 s; " +
		"host freeze p99 ≤ lease + 2 s (7 s with the default 5 s lease). No hand promotion is measured beside them: an operator's " +
		"reaction time is not the tool's to measure, and `shoal failover` run at once is this same path.\n")
	WriteSection(t, "95-failover", b.String())
}

// currentTerm is the highest term of main any voter reports.
func currentTerm(c *e2e.Cluster, voters []*e2e.Agent) uint64 {
	var n uint64
	_, last, _ := c.WaitConsensus(voters, time.Second, func(*e2e.ConsensusInfo) bool { return true })
	for _, ci := range last {
		if ci != nil && ci.Term("main").Term > n {
			n = ci.Term("main").Term
		}
	}
	return n
}

// waitNewWriter waits until every voter given knows a term after term0 held by
// another server than old, and returns it and how long that took.
func waitNewWriter(c *e2e.Cluster, voters []*e2e.Agent, old *e2e.DBHost, term0 uint64, limit time.Duration) (*e2e.DBHost, time.Duration) {
	t0 := time.Now()
	var name string
	_, _, ok := c.WaitConsensus(voters, limit, func(ci *e2e.ConsensusInfo) bool {
		tm := ci.Term("main")
		if tm.Term > term0 && tm.Writer != old.Name && (name == "" || name == tm.Writer) {
			name = tm.Writer
			return true
		}
		return false
	})
	if !ok {
		return nil, 0
	}
	for _, d := range c.DBs {
		if d.Name == name {
			return d, time.Since(t0)
		}
	}
	return nil, 0
}

// waitAck is when the client's first write acknowledged by d after since
// arrived (since + limit when none did).
func waitAck(w *e2e.InvWriter, d *e2e.DBHost, since time.Time, limit time.Duration) time.Time {
	id := int64(d.Server.ServerID())
	for time.Since(since) < limit {
		for _, op := range w.Writes(since, time.Time{}) {
			if op.OK() && op.ServerID == id {
				return op.Acked
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return since.Add(limit)
}

// rejoin restarts the dead server (read-only by its file) and waits for
// its agent to judge it (the failover of term): a replica of next when it
// held nothing next lacks; else diverged, and then the bench rewinds it
// to the promotion position its agent names. It returns the agent's
// judgement.
func rejoin(t *testing.T, c *e2e.Cluster, old, next *e2e.DBHost, term uint64) string {
	t.Helper()
	old.Server.Restart()
	mark := fmt.Sprintf("failover of term %d", term)
	_, last, ok := c.WaitConsensus([]*e2e.Agent{old.Agent}, 30*time.Second, func(ci *e2e.ConsensusInfo) bool {
		return ci != nil && strings.Contains(ci.Returned["main"], mark)
	})
	if !ok {
		t.Fatalf("%s's agent did not judge its server after the %s within 30s: %+v", old.Name, mark, last[old.Name])
	}
	said := last[old.Name].Returned["main"]
	if !strings.Contains(said, "diverged") {
		old.Server.WaitReplicating(30 * time.Second)
		return said
	}
	// Rewind it to the promotion position (what a flashback does): its
	// rows the new writer lacks deleted, its binlog reset, replication
	// from the promotion position on. (Emptying its table instead, with
	// the new writer's position claimed, left it without rows it claimed
	// to hold: the next failover promoted it and lost 737 of them.)
	m := regexp.MustCompile(`promotion position ([0-9,-]+) were`).FindStringSubmatch(said)
	if m == nil {
		t.Fatalf("%s's agent names no promotion position: %q", old.Name, said)
	}
	pos := m[1]
	t.Logf("%s: %s (rewinding it to %s)", old.Name, said, pos)
	onNext := map[string]bool{}
	for _, k := range invRows(t, next) {
		onNext[k] = true
	}
	conn, err := old.Server.DB().Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "SET SESSION sql_log_bin=0"); err != nil {
		t.Fatal(err)
	}
	for _, k := range invRows(t, old) {
		if onNext[k] {
			continue
		}
		app, sent, _ := strings.Cut(k, "@")
		if _, err := conn.ExecContext(t.Context(), "DELETE FROM "+e2e.InvTable+" WHERE app = ? AND sent = ?", app, sent); err != nil {
			t.Fatalf("rewind %s: %v", old.Name, err)
		}
	}
	for _, q := range []string{
		"STOP SLAVE", "RESET SLAVE ALL", "RESET MASTER",
		fmt.Sprintf("SET GLOBAL gtid_slave_pos='%s'", pos),
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
			"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1",
			next.Host.IP, e2e.MySQLPort, mariadbtest.ReplUser, mariadbtest.ReplPassword),
		"START SLAVE",
	} {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("rejoin %s: %s: %v", old.Name, q, err)
		}
	}
	old.Server.WaitReplicating(30 * time.Second)
	return said
}

// semiSync turns on MariaDB's built-in semi-synchronous replication on
// every server (master and slave sides, AFTER_SYNC, no wait without a
// semi-sync replica), at runtime and in its
// file, and restarts the replicas' IO threads so that they ack; it waits
// until the writer has both replicas as semi-sync clients.
func semiSync(t *testing.T, c *e2e.Cluster) {
	t.Helper()
	for _, d := range c.DBs {
		// wait_no_slave OFF: a replica, master-enabled for the day it is
		// promoted but with no semi-sync replica of its own, must not hold
		// its applier's commits for rpl_semi_sync_master_timeout (10 s):
		// with it ON the replicas applied nothing for 10 s after each
		// restart, and every failover waited for that backlog.
		for _, kv := range []string{"rpl_semi_sync_master_wait_point=AFTER_SYNC", "rpl_semi_sync_master_wait_no_slave=OFF",
			"rpl_semi_sync_master_enabled=ON", "rpl_semi_sync_slave_enabled=ON"} {
			d.Server.PersistSetting(kv)
			d.Server.MustExec("SET GLOBAL " + kv)
		}
	}
	for _, d := range c.DBs {
		if d != c.Primary() {
			d.Server.MustExec("STOP SLAVE IO_THREAD")
			d.Server.MustExec("START SLAVE IO_THREAD")
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var name string
		var n int
		err := c.Primary().Server.DB().QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'").Scan(&name, &n)
		if err == nil && n == len(c.DBs)-1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("semi-sync: the writer has %d semi-sync clients after 30s (%v), want %d", n, err, len(c.DBs)-1)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lostAcked counts the writes old acknowledged in the 10 s before killed
// whose row next lacks (lost), and those writes.
func lostAcked(t *testing.T, w *e2e.InvWriter, old, next *e2e.DBHost, killed time.Time) (lost, acked int) {
	t.Helper()
	from := killed.Add(-10 * time.Second)
	rows, err := next.Server.DB().Query("SELECT app, DATE_FORMAT(sent, '%Y-%m-%d %H:%i:%s.%f') FROM "+e2e.InvTable+" WHERE sent >= ?", from.Add(-time.Second).UTC())
	if err != nil {
		t.Fatalf("rows of %s: %v", next.Name, err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var app, sent string
		if err := rows.Scan(&app, &sent); err != nil {
			t.Fatal(err)
		}
		have[app+"@"+sent] = true
	}
	id := int64(old.Server.ServerID())
	for _, op := range w.Writes(from, killed.Add(time.Second)) {
		if !op.OK() || op.ServerID != id {
			continue
		}
		acked++
		if !have[op.App+"@"+op.Sent.UTC().Format("2006-01-02 15:04:05.000000")] {
			lost++
		}
	}
	return lost, acked
}

// invRows are the rows of the invariant table on d, "app@sent".
func invRows(t *testing.T, d *e2e.DBHost) []string {
	t.Helper()
	rows, err := d.Server.DB().Query("SELECT app, DATE_FORMAT(sent, '%Y-%m-%d %H:%i:%s.%f') FROM " + e2e.InvTable)
	if err != nil {
		t.Fatalf("rows of %s: %v", d.Name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var app, sent string
		if err := rows.Scan(&app, &sent); err != nil {
			t.Fatal(err)
		}
		out = append(out, app+"@"+sent)
	}
	return out
}
