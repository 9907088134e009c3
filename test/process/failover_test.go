package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// failoverFleet is three voting db agents with consensus.failover on, on
// real MariaDB servers: db1 the writer by term 1, db2 and db3 GTID
// replicas of it, a table fo.t with a row per acknowledged write.
type failoverFleet struct {
	names  []string
	srvs   map[string]*mariadbtest.Server
	agents map[string]*proc
	acked  []int // ids of the rows db1 acknowledged
}

func startFailoverFleet(t *testing.T, failover bool) *failoverFleet {
	t.Helper()
	mariadbtest.Require(t)
	const pw = "pw-failover"
	gkey, ckey := newKey(t), newKey(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", pw)
	f := &failoverFleet{names: []string{"db1", "db2", "db3"}, srvs: map[string]*mariadbtest.Server{}, agents: map[string]*proc{}}
	for i, name := range f.names {
		f.srvs[name] = mariadbtest.Start(t, mariadbtest.Options{ReadOnly: i > 0})
		f.srvs[name].CreateUser(mariadbtest.User{Name: "shoal", Password: pw, Grants: switchGrants})
	}
	f.srvs["db1"].MustExec("CREATE DATABASE fo")
	f.srvs["db1"].MustExec("CREATE TABLE fo.t (id INT PRIMARY KEY)")
	for _, name := range f.names[1:] {
		// The replication account exists on every server, as in a
		// fleet whose accounts replicate: a promoted replica is a source.
		f.srvs[name].CreateUser(mariadbtest.User{Name: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword, Grants: "REPLICATION SLAVE"})
		f.srvs[name].ReplicateFrom(f.srvs["db1"])
		if got := gtidWait(t, f.srvs[name], gtidOf(t, f.srvs["db1"]), 30*time.Second); got != 0 {
			t.Fatalf("%s did not replicate db1's schema: MASTER_GTID_WAIT = %d", name, got)
		}
	}
	replPW := filepath.Join(t.TempDir(), "repl.password")
	if err := os.WriteFile(replPW, []byte(mariadbtest.ReplPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range f.names {
		args := []string{"--mysql-addr", f.srvs[name].Addr(), "--mysql-user", "shoal", "--cluster", "main",
			"--mysql-replication-user", mariadbtest.ReplUser, "--mysql-replication-password-file", replPW,
			"--consensus-key", ckey, "--consensus-keyring-file", t.TempDir() + "/consensus.keyring",
			"--consensus-bind", ports.Free(t), "--consensus-bootstrap-expect", "3"}
		if failover {
			args = append(args, "--consensus-failover")
		}
		if name != "db1" {
			args = append(args, "--join", f.agents["db1"].bind)
		}
		f.agents[name] = startAgent(t, name, gkey, args...)
	}
	testkit.WaitFor(t, 60*time.Second, "term to db1, db1 the writer, db2 and db3 readers in every agent's pool", func() bool {
		for _, name := range f.names {
			tm := termOf(consensusOf(f.agents[name]), "main")
			w, r := poolOf(f.agents[name])
			if tm.Term == 0 || tm.Writer != "db1" || w != "db1" || !strings.Contains(","+r+",", ",db2,") || !strings.Contains(","+r+",", ",db3,") {
				return false
			}
		}
		return true
	})
	return f
}

// write inserts rows from..to on db1, each acknowledged (autocommit).
func (f *failoverFleet) write(t *testing.T, from, to int) {
	t.Helper()
	for id := from; id <= to; id++ {
		if err := f.srvs["db1"].Exec("INSERT INTO fo.t VALUES (?)", id); err != nil {
			t.Fatalf("write %d on db1: %v", id, err)
		}
		f.acked = append(f.acked, id)
	}
}

// db3Ahead writes rows 1-5, which both replicas apply, stops db2's IO
// thread, and writes rows 6-8, which db3 alone applies: db3 is three
// acknowledged transactions ahead of db2.
func (f *failoverFleet) db3Ahead(t *testing.T) {
	t.Helper()
	f.write(t, 1, 5)
	if got := gtidWait(t, f.srvs["db2"], gtidOf(t, f.srvs["db1"]), 30*time.Second); got != 0 {
		t.Fatalf("db2 did not catch up: %d", got)
	}
	f.srvs["db2"].MustExec("STOP SLAVE IO_THREAD")
	f.write(t, 6, 8)
	if got := gtidWait(t, f.srvs["db3"], gtidOf(t, f.srvs["db1"]), 30*time.Second); got != 0 {
		t.Fatalf("db3 did not catch up: %d", got)
	}
}

// newWriterHasEveryRow waits until name takes writes, holds the term and
// is every surviving agent's writer, and fails t if it lacks an
// acknowledged row.
func (f *failoverFleet) newWriterHasEveryRow(t *testing.T, name string, limit time.Duration) {
	t.Helper()
	testkit.WaitFor(t, limit, name+" the writer", func() bool {
		w, ok := f.writerNow(f.names[1:])
		return ok && w == name
	})
	if m := f.missingOn(t, f.srvs[name]); len(m) > 0 {
		t.Fatalf("acknowledged rows %v missing on the new writer %s", m, name)
	}
}

// caughtUp waits until both replicas applied everything db1 has.
func (f *failoverFleet) caughtUp(t *testing.T) {
	t.Helper()
	for _, name := range f.names[1:] {
		if got := gtidWait(t, f.srvs[name], gtidOf(t, f.srvs["db1"]), 30*time.Second); got != 0 {
			t.Fatalf("%s did not catch up: %d", name, got)
		}
	}
}

// decision waits for a leader's failover decision on main, and returns it.
func (f *failoverFleet) decision(t *testing.T) string {
	t.Helper()
	var said string
	testkit.WaitFor(t, 30*time.Second, "a leader's decision on main", func() bool {
		for _, name := range f.names {
			if c := consensusOf(f.agents[name]); c != nil && c.Failovers["main"] != "" {
				said = c.Failovers["main"]
				return true
			}
		}
		return false
	})
	return said
}

// writerNow is the server that takes writes, holds the current term in
// every agent of alive, and is every such agent's pool writer.
func (f *failoverFleet) writerNow(alive []string) (string, bool) {
	for _, s := range f.names {
		if readOnlyOf(f.srvs[s]) != "0" {
			continue
		}
		held := true
		var term uint64
		for _, a := range alive {
			tm := termOf(consensusOf(f.agents[a]), "main")
			w, _ := poolOf(f.agents[a])
			if tm.Writer != s || (term != 0 && tm.Term != term) || w != s {
				held = false
			}
			term = tm.Term
		}
		if held {
			return s, true
		}
	}
	return "", false
}

func (f *failoverFleet) describe(alive []string) string {
	var b strings.Builder
	for _, name := range f.names {
		fmt.Fprintf(&b, "\n  server %s: read_only=%s", name, readOnlyOf(f.srvs[name]))
	}
	for _, name := range alive {
		tm := termOf(consensusOf(f.agents[name]), "main")
		w, r := poolOf(f.agents[name])
		fmt.Fprintf(&b, "\n  agent %s: term %d held by %q (%s); pool writers [%s] readers [%s]", name, tm.Term, tm.Writer, tm.Why, w, r)
	}
	return b.String()
}

// rowsOn counts the acknowledged rows present on s.
func (f *failoverFleet) missingOn(t *testing.T, s *mariadbtest.Server) []int {
	t.Helper()
	var missing []int
	for _, id := range f.acked {
		var n int
		if err := s.DB().QueryRow("SELECT COUNT(*) FROM fo.t WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatalf("read row %d on %s: %v", id, s.Addr(), err)
		}
		if n != 1 {
			missing = append(missing, id)
		}
	}
	return missing
}

// TestFailoverMysqldKill: the writer's mariadbd is killed with SIGKILL
// while db3 is ahead of db2 (db2's IO thread was stopped before the last
// acknowledged writes). With consensus.failover on, within 30 s a server
// must take writes again: db3, the most advanced replica (promoting db2
// would lose acknowledged writes), holding term 2 in every surviving
// agent and routed to by their pools, with every acknowledged write;
// db2 then replicates from db3 and catches up; no two servers writable
// at any 100 ms sample; and db1's mariadbd, when it comes back, stays
// read-only: it no longer holds the term. The servers' files say read_only=ON, as docs/consensus.md asks.
//
// Before failover existed the cluster stayed without a writer until a
// person promoted one: the test fails with "no server takes writes".
func TestFailoverMysqldKill(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.db3Ahead(t)
	// As docs/consensus.md asks: read_only=ON in every server's file, the
	// writer made writable at runtime. A writer that restarts comes back
	// read-only (a file that says OFF leaves it writable until its agent
	// fences it: at once when it comes back from down, TestFenceAtOnceAfterDown).
	f.srvs["db1"].PersistReadOnly(true)
	sampler := startWritableSampler(f.srvs, f.names)
	defer sampler.stop()

	killed := time.Now()
	f.srvs["db1"].Kill()
	t.Logf("killed db1's mariadbd (SIGKILL); acknowledged rows 1-8, db2 has 1-5")

	alive := f.names
	deadline := time.Now().Add(30 * time.Second)
	writer, ok := f.writerNow(alive[1:])
	for ; (!ok || writer == "db1") && time.Now().Before(deadline); writer, ok = f.writerNow(alive[1:]) {
		time.Sleep(100 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("30s after db1's mariadbd was killed, no server takes writes:%s", f.describe(alive))
	}
	took := time.Since(killed)
	t.Logf("%s takes writes, holds the term and is every surviving agent's writer %s after the kill", writer, took.Round(time.Millisecond))
	if writer != "db3" {
		t.Fatalf("the failover promoted %s, not db3, the most advanced replica:%s", writer, f.describe(alive))
	}
	if m := f.missingOn(t, f.srvs["db3"]); len(m) > 0 {
		t.Fatalf("acknowledged rows %v missing on the new writer db3", m)
	}
	tm := termOf(consensusOf(f.agents["db2"]), "main")
	if !strings.Contains(tm.Why, "failover from db1") {
		t.Errorf("term %d's why %q does not say it is a failover from db1", tm.Term, tm.Why)
	}
	// The leader that ran it says so in `shoal info` (the API's consensus.failovers).
	var said []string
	for _, name := range alive { // db1's agent lives on, and may lead
		if c := consensusOf(f.agents[name]); c != nil && c.Failovers["main"] != "" {
			said = append(said, name+": "+c.Failovers["main"])
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "failed over to db3 (term 2)") {
		t.Errorf("the agents' last failover decisions: %q, want one leader's \"failed over to db3 (term 2)\"", said)
	}
	// The new writer takes writes; db2 replicates from it and catches up.
	f.srvs["db3"].MustExec("INSERT INTO fo.t VALUES (9)")
	deadline = time.Now().Add(30 * time.Second)
	for n := 0; n != 9; {
		if err := f.srvs["db2"].DB().QueryRow("SELECT COUNT(*) FROM fo.t").Scan(&n); err != nil || time.Now().After(deadline) {
			st, _ := f.srvs["db2"].SlaveStatus()
			t.Fatalf("db2 does not replicate every row from db3 (%d rows, %v): source %s:%s IO %s SQL %s, last IO error %q, last SQL error %q",
				n, err, st["Master_Host"], st["Master_Port"], st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_IO_Error"], st["Last_SQL_Error"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	// db1 comes back read-only, and stays so: it no longer holds the term.
	f.srvs["db1"].Restart()
	testkit.WaitFor(t, 30*time.Second, "db1 back and in db2's pool as out or a reader", func() bool {
		return readOnlyOf(f.srvs["db1"]) == "1"
	})
	time.Sleep(3 * time.Second) // a few fence and grant rounds
	if ro := readOnlyOf(f.srvs["db1"]); ro != "1" {
		t.Errorf("db1 read_only=%s after it came back", ro)
	}
	if w, _ := poolOf(f.agents["db2"]); w != "db3" {
		t.Errorf("after db1 came back, db2's pool routes writes to %q, not db3", w)
	}
	// db1 held nothing beyond what db3 had when promoted: its agent
	// makes it a replica of db3, and it gets the rows written since.
	testkit.WaitFor(t, 30*time.Second, "db1 replicating row 9 from db3", func() bool {
		var n int
		_ = f.srvs["db1"].DB().QueryRow("SELECT COUNT(*) FROM fo.t").Scan(&n)
		return n == 9
	})
	if st, err := f.srvs["db1"].SlaveStatus(); err != nil || st["Master_Port"] != strconv.Itoa(f.srvs["db3"].Port()) {
		t.Errorf("db1 replicates from port %q (%v), want db3's %d", st["Master_Port"], err, f.srvs["db3"].Port())
	}
	if c := consensusOf(f.agents["db1"]); c == nil || !strings.Contains(c.Returned["main"], "replica of db3") {
		t.Errorf("db1's shoal info does not say it rejoined as a replica of db3: %+v", c)
	}
	sampler.stop()
	if v := sampler.violations(); len(v) > 0 {
		t.Errorf("two servers writable at once at %d sample points, the first: %s", len(v), v[0])
	}
}

// TestNoFailoverWithoutTheSetting: the same kill without
// consensus.failover leaves the cluster without a writer (the default of
// this release), and nothing touches the replicas: both still configured
// to replicate from db1.
func TestNoFailoverWithoutTheSetting(t *testing.T) {
	f := startFailoverFleet(t, false)
	f.write(t, 1, 3)
	f.srvs["db1"].Kill()
	time.Sleep(10 * time.Second)
	if w, ok := f.writerNow(f.names[1:]); ok {
		t.Fatalf("%s takes writes without consensus.failover:%s", w, f.describe(f.names[1:]))
	}
	for _, name := range f.names[1:] {
		if readOnlyOf(f.srvs[name]) != "1" {
			t.Errorf("%s is writable without consensus.failover", name)
		}
	}
}

// TestNoFailoverWhileReplicasReceive: the writer's agent is killed
// (SIGKILL) while its mariadbd runs on. The agent is one witness, but the
// replicas still receive from the writer: no failover, however long, and
// the replicas still replicate from db1.
func TestNoFailoverWhileReplicasReceive(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.write(t, 1, 3)
	if err := f.agents["db1"].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Past the writer's lease (5 s with the defaults) and then some.
	time.Sleep(15 * time.Second)
	for _, name := range f.names[1:] {
		if tm := termOf(consensusOf(f.agents[name]), "main"); tm.Term != 1 || tm.Writer != "db1" {
			t.Errorf("agent %s: term %d held by %s (%s), want term 1 still db1's", name, tm.Term, tm.Writer, tm.Why)
		}
		if ro := readOnlyOf(f.srvs[name]); ro != "1" {
			t.Errorf("%s read_only=%s", name, ro)
		}
		st, err := f.srvs[name].SlaveStatus()
		if err != nil || st["Slave_IO_Running"] != "Yes" || st["Master_Port"] != fmt.Sprint(f.srvs["db1"].Port()) {
			t.Errorf("%s no longer replicates from db1: IO %q source port %q, %v", name, st["Slave_IO_Running"], st["Master_Port"], err)
		}
	}
	f.write(t, 4, 4) // db1, with no agent to fence it, still takes writes
}

// TestManualFailover: consensus.failover off (the default). db3 is three
// acknowledged transactions ahead of db2 when db1's mariadbd is killed:
// the hand promotion of db2 that lost a write in the field is what
// `shoal failover` must not do. `shoal failover --dry-run` says the writer
// is alive before the kill (exit 1), refuses an unknown cluster (exit 2),
// and after it names db3 and why db2 is passed over (exit 0) without
// changing anything; `shoal failover` then makes db3 the writer with every
// acknowledged row (exit 0).
func TestManualFailover(t *testing.T) {
	f := startFailoverFleet(t, false)
	f.db3Ahead(t)
	api := f.agents["db2"].http
	out, errOut, code := shoal(t, "failover", "--dry-run", "--http-addr", api)
	if code != 1 || !strings.Contains(out, "verdict: alive") {
		t.Fatalf("dry run with db1 alive: exit %d, want 1 and the verdict alive\n%s%s", code, out, errOut)
	}
	if _, errOut, code := shoal(t, "failover", "--cluster", "nope", "--http-addr", api); code != 2 || !strings.Contains(errOut, `cluster "nope"`) {
		t.Fatalf("unknown cluster: exit %d, want 2\n%s", code, errOut)
	}
	f.srvs["db1"].PersistReadOnly(true)
	f.srvs["db1"].Kill()
	testkit.WaitFor(t, 20*time.Second, "shoal failover --dry-run says db1 is dead", func() bool {
		out, errOut, code = shoal(t, "failover", "--dry-run", "--http-addr", api)
		return code == 0
	})
	t.Logf("shoal failover --dry-run:\n%s", out)
	for _, want := range []string{"verdict: DEAD", "db3", "the pick", "passed over: lacks 3 transactions db3 applied", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s%s", want, out, errOut)
		}
	}
	if w, ok := f.writerNow(f.names[1:]); ok {
		t.Fatalf("%s takes writes after a dry run", w)
	}
	// Run it on a voter that does not lead: it asks the leader (a signed step).
	for _, name := range f.names[1:] {
		if c := consensusOf(f.agents[name]); c != nil && c.State != "leader" {
			api = f.agents[name].http
			t.Logf("shoal failover on %s; the raft leader is %s", name, c.Leader)
			break
		}
	}
	out, errOut, code = shoal(t, "failover", "--http-addr", api)
	t.Logf("shoal failover:\n%s%s", out, errOut)
	if code != 0 || !strings.Contains(out, "failed over: db3 holds term 2") {
		t.Fatalf("shoal failover: exit %d, want 0 and db3 holding term 2", code)
	}
	f.newWriterHasEveryRow(t, "db3", 15*time.Second)
}

// TestFailoverLeaderKilled: the raft leader's agent is killed (SIGKILL)
// while it fails the dead db1 over, during the survey (db2's SQL thread
// waits on a row lock, so its drain lasts until the lock goes). Another
// leader must finish the job: within 60 s a surviving server takes writes,
// holding the current term in every surviving agent and routed to by
// their pools, with every acknowledged row; never two servers writable.
func TestFailoverLeaderKilled(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.write(t, 1, 3)
	f.caughtUp(t)
	lock := holdRowLock(t, f.srvs["db2"], "SELECT id FROM fo.t WHERE id = 1 FOR UPDATE")
	t.Cleanup(lock)
	f.srvs["db1"].MustExec("DELETE FROM fo.t WHERE id = 1") // db2 cannot apply it while the lock is held
	f.acked = f.acked[1:]
	f.write(t, 4, 4)
	// Row 4 reached both replicas (db2's relay log holds it behind the
	// lock): no acknowledged row is lost to asynchronous replication.
	if got := gtidWait(t, f.srvs["db3"], gtidOf(t, f.srvs["db1"]), 30*time.Second); got != 0 {
		t.Fatalf("db3 did not catch up: %d", got)
	}
	pos := gtidOf(t, f.srvs["db1"])
	testkit.WaitFor(t, 30*time.Second, "db2 received row 4", func() bool {
		st, err := f.srvs["db2"].SlaveStatus()
		return err == nil && st["Gtid_IO_Pos"] == pos
	})
	f.srvs["db1"].PersistReadOnly(true)
	sampler := startWritableSampler(f.srvs, f.names)
	defer sampler.stop()
	f.srvs["db1"].Kill()
	killed := time.Now()
	// The survey has begun once db3's IO thread is stopped (db2's drain waits on the lock).
	testkit.WaitFor(t, 20*time.Second, "the failover's survey stopped db3's IO thread", func() bool {
		st, err := f.srvs["db3"].SlaveStatus()
		return err == nil && st["Slave_IO_Running"] == "No"
	})
	var leader string
	for _, name := range f.names {
		if c := consensusOf(f.agents[name]); c != nil && c.State == "leader" {
			leader = name
		}
	}
	if leader == "" {
		t.Fatal("no raft leader during the failover")
	}
	if err := f.agents[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader %s's agent %.2fs after db1's mariadbd, during the survey", leader, time.Since(killed).Seconds())
	lock()
	var alive []string
	for _, name := range f.names {
		if name != leader {
			alive = append(alive, name)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	writer, ok := f.writerNow(alive)
	for ; (!ok || writer == "db1") && time.Now().Before(deadline); writer, ok = f.writerNow(alive) {
		time.Sleep(100 * time.Millisecond)
	}
	if !ok || writer == "db1" {
		t.Fatalf("60s after the leader died mid-failover, no surviving server takes writes:%s", f.describe(alive))
	}
	t.Logf("%s takes writes %.2fs after db1's mariadbd was killed", writer, time.Since(killed).Seconds())
	if m := f.missingOn(t, f.srvs[writer]); len(m) > 0 {
		t.Errorf("acknowledged rows %v missing on the new writer %s", m, writer)
	}
	sampler.stop()
	if v := sampler.violations(); len(v) > 0 {
		t.Errorf("two servers writable at once at %d sample points, the first: %s", len(v), v[0])
	}
}

// TestFailoverTwiceInARow: db1's mariadbd is killed and db3 takes over
// (db2 re-pointed to it); then db3's mariadbd is killed too: db2, the
// last server, must take over with every acknowledged row, holding term
// 3 in every agent of the surviving servers' and db1's.
func TestFailoverTwiceInARow(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.db3Ahead(t)
	for _, name := range f.names {
		f.srvs[name].PersistReadOnly(true)
	}
	sampler := startWritableSampler(f.srvs, f.names)
	defer sampler.stop()
	f.srvs["db1"].Kill()
	deadline := time.Now().Add(30 * time.Second)
	for w, ok := f.writerNow(f.names[1:]); !ok || w != "db3"; w, ok = f.writerNow(f.names[1:]) {
		if time.Now().After(deadline) {
			t.Fatalf("no failover to db3 within 30s:%s", f.describe(f.names))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// db3 takes writes; db2 replicates them from it.
	for id := 9; id <= 11; id++ {
		f.srvs["db3"].MustExec("INSERT INTO fo.t VALUES (?)", id)
		f.acked = append(f.acked, id)
	}
	if got := gtidWait(t, f.srvs["db2"], gtidOf(t, f.srvs["db3"]), 30*time.Second); got != 0 {
		st, _ := f.srvs["db2"].SlaveStatus()
		t.Fatalf("db2 does not replicate from db3: %d (IO %q, last IO error %q)", got, st["Slave_IO_Running"], st["Last_IO_Error"])
	}
	killed := time.Now()
	f.srvs["db3"].Kill()
	deadline = time.Now().Add(30 * time.Second)
	for w, ok := f.writerNow([]string{"db1", "db2"}); !ok || w != "db2"; w, ok = f.writerNow([]string{"db1", "db2"}) {
		if time.Now().After(deadline) {
			t.Fatalf("no second failover, to db2, within 30s of db3's kill:%s", f.describe(f.names))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("db2 takes writes %.2fs after db3's mariadbd was killed", time.Since(killed).Seconds())
	if tm := termOf(consensusOf(f.agents["db2"]), "main"); tm.Term != 3 {
		t.Errorf("term %d, want 3", tm.Term)
	}
	if m := f.missingOn(t, f.srvs["db2"]); len(m) > 0 {
		t.Errorf("acknowledged rows %v missing on db2", m)
	}
	sampler.stop()
	if v := sampler.violations(); len(v) > 0 {
		t.Errorf("two servers writable at once at %d sample points, the first: %s", len(v), v[0])
	}
}

// TestNoFailoverToABrokenReplica: db3's SQL thread stopped on a
// duplicate key (a row written on db3 alone, then by the writer), so
// db3's relay log holds a transaction it cannot apply; db2's IO thread
// was stopped before it, so db2 lacks it. When db1's mariadbd is killed
// no replica may be promoted: db3 would lose the transaction it cannot
// apply (a broken SQL thread), db2 lacks it. The cluster stays without a
// writer, and the leader says why in `shoal info`.
func TestNoFailoverToABrokenReplica(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.write(t, 1, 3)
	f.caughtUp(t)
	f.srvs["db2"].MustExec("STOP SLAVE IO_THREAD")
	ctx := context.Background()
	conn, err := f.srvs["db3"].DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET SESSION sql_log_bin=0", "SET GLOBAL read_only=OFF", "INSERT INTO fo.t VALUES (4)", "SET GLOBAL read_only=ON"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s on db3: %v", q, err)
		}
	}
	conn.Close()
	f.write(t, 4, 4) // db3 receives it and stops on the duplicate; db2 never gets it
	testkit.WaitFor(t, 30*time.Second, "db3's SQL thread stopped on the duplicate key", func() bool {
		st, err := f.srvs["db3"].SlaveStatus()
		return err == nil && st["Slave_SQL_Running"] == "No" && st["Last_SQL_Errno"] == "1062"
	})
	f.srvs["db1"].PersistReadOnly(true)
	f.srvs["db1"].Kill()
	said := f.decision(t)
	t.Logf("the leader: %s", said)
	for _, want := range []string{"not failed over", "db3: replication SQL thread stopped on an error: 1062", "db2: lacks 1 transactions db3 received"} {
		if !strings.Contains(said, want) {
			t.Errorf("the leader's decision lacks %q", want)
		}
	}
	time.Sleep(5 * time.Second)
	if w, ok := f.writerNow(f.names[1:]); ok {
		t.Fatalf("%s was promoted:%s", w, f.describe(f.names))
	}
	for _, name := range f.names[1:] {
		if ro := readOnlyOf(f.srvs[name]); ro != "1" {
			t.Errorf("%s read_only=%s", name, ro)
		}
	}
}

// TestFailoverOldWriterDiverged: both replicas stop receiving (IO threads
// stopped by hand) and db1 takes three more acknowledged writes (rows
// 9-11) that no replica has; then its mariadbd is killed. The failover
// promotes db3 (rows 1-8): rows 9-11 are lost to the cluster, as with any
// asynchronous replication. When db1 comes back its agent counts and
// names them (3 transactions, their GTIDs; shoal info, the metric,
// history), and leaves the server read-only and replicating from nobody
// (diverged): it never rejoins with transactions the writer lacks.
func TestFailoverOldWriterDiverged(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.db3Ahead(t)
	f.srvs["db1"].PersistReadOnly(true)
	f.srvs["db3"].MustExec("STOP SLAVE IO_THREAD")
	before := gtidOf(t, f.srvs["db1"])
	f.write(t, 9, 11)
	after := gtidOf(t, f.srvs["db1"])
	f.srvs["db1"].Kill()
	t.Logf("db1 wrote rows 9-11 (%s -> %s) that no replica received; killed", before, after)

	testkit.WaitFor(t, 30*time.Second, "db3 the writer", func() bool {
		w, ok := f.writerNow(f.names[1:])
		return ok && w == "db3"
	})
	missing := f.missingOn(t, f.srvs["db3"])
	if !slices.Equal(missing, []int{9, 10, 11}) {
		t.Fatalf("acknowledged rows missing on db3: %v, want [9 10 11]", missing)
	}
	f.srvs["db1"].Restart()
	var said string
	testkit.WaitFor(t, 30*time.Second, "db1's agent to judge its server", func() bool {
		c := consensusOf(f.agents["db1"])
		said = ""
		if c != nil {
			said = c.Returned["main"]
		}
		return said != ""
	})
	t.Logf("db1's shoal info: %s", said)
	seq := func(g string) string { return g[strings.LastIndex(g, "-")+1:] }
	want := fmt.Sprintf("3 transactions (0-%d-%s..0-%d-%s)", f.srvs["db1"].ServerID(), strconv.Itoa(atoi(t, seq(before))+1), f.srvs["db1"].ServerID(), seq(after))
	if !strings.Contains(said, "diverged") || !strings.Contains(said, want) {
		t.Errorf("db1's shoal info says %q, want it diverged with %q", said, want)
	}
	if n := metricOf(f.agents["db1"], "shoal_failover_lost_transactions_total"); n != float64(len(missing)) {
		t.Errorf("shoal_failover_lost_transactions_total = %v, want %d (the acknowledged rows missing on the new writer)", n, len(missing))
	}
	out, _, code := shoal(t, "history", "--http-addr", f.agents["db1"].http, "--kind", "fence")
	if code != 0 || !strings.Contains(out, "diverged") || !strings.Contains(out, "failover-return") {
		t.Errorf("db1's history (exit %d) does not name the divergence:\n%s", code, out)
	}
	time.Sleep(3 * time.Second)
	if ro := readOnlyOf(f.srvs["db1"]); ro != "1" {
		t.Errorf("db1 read_only=%s: a diverged server must stay read-only", ro)
	}
	if st, err := f.srvs["db1"].SlaveStatus(); err != nil || len(st) != 0 {
		t.Errorf("db1 replicates (%v, %v): a diverged server must not rejoin", st["Master_Port"], err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestNoFailoverToAnErrantReplica: db3 took a write of its own (made
// writable by mistake, binlogged with its server_id: an errant GTID) that
// neither db1 nor db2 has. db1's mariadbd is killed: the failover passes
// db3 over for it, though its position looks the most advanced, and
// promotes db2, which lacks nothing but the errant transaction.
func TestNoFailoverToAnErrantReplica(t *testing.T) {
	f := startFailoverFleet(t, true)
	f.write(t, 1, 3)
	f.caughtUp(t)
	ctx := context.Background()
	conn, err := f.srvs["db3"].DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET GLOBAL read_only=OFF", "INSERT INTO fo.t VALUES (100)", "SET GLOBAL read_only=ON"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s on db3: %v", q, err)
		}
	}
	conn.Close()
	errant := gtidOf(t, f.srvs["db3"])
	t.Logf("db3's errant write: gtid_current_pos %s (db1's %s)", errant, gtidOf(t, f.srvs["db1"]))
	time.Sleep(2 * time.Second) // the errant position gossiped
	f.srvs["db1"].PersistReadOnly(true)
	f.srvs["db1"].Kill()
	said := f.decision(t)
	t.Logf("the leader: %s", said)
	for _, want := range []string{"failed over to db2", "db2 is the most advanced replica"} {
		if !strings.Contains(said, want) {
			t.Errorf("the leader's decision lacks %q", want)
		}
	}
	f.newWriterHasEveryRow(t, "db2", 30*time.Second)
	var leaderLog string
	for _, name := range f.names {
		leaderLog += f.agents[name].log.String()
	}
	if !strings.Contains(leaderLog, "errant transactions: "+errant) {
		t.Errorf("no agent's log says db3 was passed over for its errant transaction %s", errant)
	}
}
