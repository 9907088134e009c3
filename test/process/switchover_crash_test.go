package process

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// switchGrants are what a db agent's account needs for a switchover:
// SLAVE MONITOR for the probe; READ_ONLY ADMIN, CONNECTION ADMIN and
// PROCESS for the demote (the fencing code); REPLICATION SLAVE ADMIN and
// RELOAD for the promote and the re-point (docs/consensus.md, "Grants").
const switchGrants = "SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS, REPLICATION SLAVE ADMIN, RELOAD"

// TestSwitchoverCoordinatorCrash: three voting db agents on real MariaDB
// servers, db1 the writer by term 1, db2 and db3 replicating from it.
// `shoal switchover --to db2` runs on db3's agent while db2 cannot catch
// up (its replication SQL thread waits on a row lock the test holds), and
// db3's agent, the coordinator, is killed with SIGKILL once db1 has been
// demoted, between the demote and the grant. Within 30 s a server must take
// writes again: db1 or db2 writable, holding the cluster's current term as
// db1's and db2's agents report it, and their pools routing writes to it;
// at no sample point (every 100 ms) may two servers be writable.
//
// Today a switchover's progress lives only in the coordinator's memory:
// with it gone nobody restores db1, which stays read-only holding the term,
// and no server takes writes. The test passes once the switchover intent
// is in raft and the raft leader rolls an orphaned one back (or forward).
//
// The catch-up is blocked with a row lock, not STOP SLAVE SQL_THREAD: a
// replica with a stopped thread is out of the pool (replication-stopped),
// and a switchover refuses a target that is not a reader. The SQL thread
// blocked on a lock still runs, and its lag stays under pool.max_lag (10 s)
// for the moment the switchover takes to plan.
func TestSwitchoverCoordinatorCrash(t *testing.T) {
	mariadbtest.Require(t)
	const pw = "pw-crash"
	gkey, ckey := newKey(t), newKey(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", pw)
	names := []string{"db1", "db2", "db3"}
	srvs := map[string]*mariadbtest.Server{}
	for i, name := range names {
		srvs[name] = mariadbtest.Start(t, mariadbtest.Options{ReadOnly: i > 0})
		srvs[name].CreateUser(mariadbtest.User{Name: "shoal", Password: pw, Grants: switchGrants})
	}
	srvs["db1"].MustExec("CREATE DATABASE crash")
	srvs["db1"].MustExec("CREATE TABLE crash.t (id INT PRIMARY KEY, v INT)")
	srvs["db1"].MustExec("INSERT INTO crash.t VALUES (1, 0)")
	for _, name := range names[1:] {
		srvs[name].ReplicateFrom(srvs["db1"])
		if got := gtidWait(t, srvs[name], gtidOf(t, srvs["db1"]), 30*time.Second); got != 0 {
			t.Fatalf("%s did not replicate db1's schema: MASTER_GTID_WAIT = %d", name, got)
		}
	}

	replPW := filepath.Join(t.TempDir(), "repl.password")
	if err := os.WriteFile(replPW, []byte(mariadbtest.ReplPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agents := map[string]*proc{}
	for _, name := range names {
		args := []string{"--mysql-addr", srvs[name].Addr(), "--mysql-user", "shoal", "--cluster", "main",
			"--mysql-replication-user", mariadbtest.ReplUser, "--mysql-replication-password-file", replPW,
			"--consensus-key", ckey, "--consensus-keyring-file", t.TempDir() + "/consensus.keyring",
			"--consensus-bind", ports.Free(t), "--consensus-bootstrap-expect", "3"}
		if name != "db1" {
			args = append(args, "--join", agents["db1"].bind)
		}
		agents[name] = startAgent(t, name, gkey, args...)
	}
	testkit.WaitFor(t, 60*time.Second, "term to db1, db1 the writer and db2 a reader in every agent's pool", func() bool {
		for _, name := range names {
			tm := termOf(consensusOf(agents[name]), "main")
			w, r := poolOf(agents[name])
			if tm.Term == 0 || tm.Writer != "db1" || w != "db1" || !strings.Contains(","+r+",", ",db2,") {
				return false
			}
		}
		return true
	})

	// Every 100 ms from here on: no two servers writable at once.
	sampler := startWritableSampler(srvs, names)
	defer sampler.stop()

	// db2 cannot catch up: its SQL thread waits on a row lock held here.
	lock := holdRowLock(t, srvs["db2"], "SELECT v FROM crash.t WHERE id = 1 FOR UPDATE")
	t.Cleanup(lock) // before the servers stop (cleanups run last in, first out)
	srvs["db1"].MustExec("UPDATE crash.t SET v = v + 1 WHERE id = 1")
	if got := gtidWait(t, srvs["db2"], gtidOf(t, srvs["db1"]), time.Second); got != -1 {
		t.Fatalf("the row lock does not hold db2 back: MASTER_GTID_WAIT = %d, want -1 (timeout)", got)
	}

	cli := startCLI(t, "switchover", "--http-addr", agents["db3"].http, "--to", "db2", "--catch-up", "30s", "--force") // db2 lags by design
	testkit.WaitFor(t, 60*time.Second, "db1 demoted (read_only=1) by the switchover", func() bool {
		select {
		case <-cli.done:
			t.Fatalf("the switchover ended before db1 was demoted:\n%s", cli.out.String())
		default:
		}
		return readOnlyOf(srvs["db1"]) == "1"
	})
	// The coordinator dies between the demote and the grant; so does its client.
	killed := time.Now()
	if err := agents["db3"].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cli.kill()
	t.Logf("killed db3's agent (the coordinator) and the CLI; the CLI had printed: %q", cli.out.String())

	survivors := []string{"db1", "db2"}
	writerOK := func() (string, bool) {
		for _, s := range survivors {
			if readOnlyOf(srvs[s]) != "0" {
				continue
			}
			held := true
			var term uint64
			for _, a := range survivors {
				tm := termOf(consensusOf(agents[a]), "main")
				w, _ := poolOf(agents[a])
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
	deadline := time.Now().Add(30 * time.Second)
	writer, ok := writerOK()
	for ; !ok && time.Now().Before(deadline); writer, ok = writerOK() {
		time.Sleep(250 * time.Millisecond)
	}
	sampler.stop()
	if !ok {
		var b strings.Builder
		for _, name := range names {
			fmt.Fprintf(&b, "\n  server %s: read_only=%s", name, readOnlyOf(srvs[name]))
		}
		for _, name := range survivors {
			tm := termOf(consensusOf(agents[name]), "main")
			w, r := poolOf(agents[name])
			fmt.Fprintf(&b, "\n  agent %s: term %d held by %q (%s); pool writers [%s] readers [%s]", name, tm.Term, tm.Writer, tm.Why, w, r)
		}
		t.Errorf("30s after the coordinator (db3's agent) died mid-switchover, no server takes writes:%s", b.String())
	} else {
		t.Logf("%s takes writes %s after the coordinator died", writer, time.Since(killed).Round(time.Millisecond))
	}
	if v := sampler.violations(); len(v) > 0 {
		t.Errorf("two servers writable at once at %d sample points, the first: %s", len(v), v[0])
	}
}

// poolOf is an agent's writers and readers of cluster main, comma
// separated ("?" when it does not answer).
func poolOf(p *proc) (writers, readers string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := client.New(p.http).Pool(ctx, "main")
	if err != nil {
		return "?", "?"
	}
	var w, rd []string
	for _, n := range r.Writers {
		w = append(w, n.Name)
	}
	for _, n := range r.Readers {
		rd = append(rd, n.Name)
	}
	return strings.Join(w, ","), strings.Join(rd, ",")
}

// readOnlyOf is a server's @@global.read_only: "1", "0", or "?" when it
// does not answer within 2 s.
func readOnlyOf(s *mariadbtest.Server) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var ro int
	if err := s.DB().QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro); err != nil {
		return "?"
	}
	return fmt.Sprint(ro)
}

func gtidOf(t *testing.T, s *mariadbtest.Server) string {
	t.Helper()
	var pos string
	if err := s.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatalf("gtid_binlog_pos of %s: %v", s.Addr(), err)
	}
	return pos
}

// gtidWait is MASTER_GTID_WAIT(pos, d) on s: 0 when s applied pos, -1
// when d passed first.
func gtidWait(t *testing.T, s *mariadbtest.Server, pos string, d time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
	defer cancel()
	var res sql.NullInt64
	if err := s.DB().QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, d.Seconds()).Scan(&res); err != nil || !res.Valid {
		t.Fatalf("MASTER_GTID_WAIT(%s) on %s: %v (null: %v)", pos, s.Addr(), err, !res.Valid)
	}
	return res.Int64
}

// holdRowLock runs query (a locking read) in a transaction on a
// connection of its own and keeps it open; the returned func rolls back
// and closes.
func holdRowLock(t *testing.T, s *mariadbtest.Server, query string) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", s.Addr(), err)
	}
	for _, q := range []string{"BEGIN", query} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			t.Fatalf("on %s: %s: %v", s.Addr(), q, err)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
		})
	}
}

// cliProc is a CLI command running in the background.
type cliProc struct {
	cmd  *exec.Cmd
	out  *testkit.SyncBuffer
	done chan struct{} // closed when it has exited
}

// kill ends it with SIGKILL if it still runs, and waits for it.
func (c *cliProc) kill() {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// startCLI starts the CLI in the background (with the agent's token file
// as shoalEnv gives it); the test's cleanup kills it if it still runs.
func startCLI(t *testing.T, args ...string) *cliProc {
	t.Helper()
	c := &cliProc{cmd: exec.Command(shoalBin(t), args...), out: &testkit.SyncBuffer{}, done: make(chan struct{})}
	for i, a := range args {
		if a == "--http-addr" && i+1 < len(args) {
			if f, ok := tokenFiles.Load(args[i+1]); ok {
				c.cmd.Env = append(os.Environ(), "SHOAL_API_TOKEN_FILE="+f.(string))
			}
		}
	}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("--- output of shoal %s ---\n%s", strings.Join(args, " "), c.out.String())
		}
	})
	return c
}

// writableSampler reads every server's read_only every 100 ms and notes
// each sample with two or more writable.
type writableSampler struct {
	quit chan struct{}
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	bad  []string
}

func startWritableSampler(srvs map[string]*mariadbtest.Server, names []string) *writableSampler {
	s := &writableSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var writable, seen []string
			for _, n := range names {
				ro := readOnlyOf(srvs[n])
				seen = append(seen, n+"="+ro)
				if ro == "0" {
					writable = append(writable, n)
				}
			}
			if len(writable) > 1 {
				s.mu.Lock()
				s.bad = append(s.bad, time.Now().Format("15:04:05.000")+" read_only "+strings.Join(seen, " "))
				s.mu.Unlock()
			}
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and waits for it; safe to call twice.
func (s *writableSampler) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}

func (s *writableSampler) violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}
