//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/pkg/client"
)

// Fencing by the local agent (issue 26, part 3): a db agent whose server
// is writable while another node holds the writer term sets it read-only
// and kills its client connections, after consensus.fence_after (3 s by
// default), once; with --consensus-fence=false it does nothing.
//
//	go test -tags e2e -count=1 -v -run '^TestFencing$' ./test/e2e/

// Bounds of the fencing scenarios.
const (
	fenceAfter  = 3 * time.Second // consensus.fence_after's default
	fenceMargin = 6 * time.Second // observing the conflict, one fencing attempt, the machine is shared
)

func TestFencing(t *testing.T) {
	Require(t)
	ckey := Keygen(t)
	c := NewCluster(t, Options{DBHosts: 3, AppHosts: 1, DBFlags: ConsensusFlags(ckey, 3), AppFlags: ConsensusAppFlags(ckey)})
	var voters []*Agent
	for _, d := range c.DBs {
		voters = append(voters, d.Agent)
	}
	if _, last, ok := c.WaitConsensus(voters, 30*time.Second, func(ci *ConsensusInfo) bool {
		tm := ci.Term("main")
		return ci != nil && ci.Voter && tm.Term == 1 && tm.Writer == "db1"
	}); !ok {
		t.Fatalf("no term 1 to db1 on every voter within 30s: %s", describeConsensus(last))
	}
	// The sessions write to a table of their own (no key to collide with
	// what replicates from db1).
	c.DBs[0].Server.MustExec("CREATE TABLE e2e.fence (v INT)")
	for _, d := range c.DBs[1:] {
		waitGTID(t, d.Server, gtidPos(t, c.DBs[0].Server), 30*time.Second)
	}
	t.Run("second_writable_fenced", func(t *testing.T) { fenceSecondWritable(t, c) })
	t.Run("fence_off", func(t *testing.T) { fenceOff(t, c) })
	t.Run("leader_stopped_writer_kept", func(t *testing.T) { fenceLeaderStopped(t, c, voters) })
	t.Run("lease_lost", func(t *testing.T) { fenceLeaseLost(t, c) })
}

// fenceLeaderStopped: the raft leader's agent, not the holder's, is
// SIGSTOPped, three times: the others elect a new leader, and db1, the
// holder, a follower that hears no leader during the election, must not
// fence its server (its lease outlasts an election).
func fenceLeaderStopped(t *testing.T, c *Cluster, voters []*Agent) {
	db1 := c.DBs[0]
	for round := 1; round <= 3; round++ {
		leader, rest, err := c.ConsensusLeader(voters)
		if err != nil {
			t.Fatal(err)
		}
		if leader == db1.Agent {
			// Move the leadership off the holder: stop its agent for
			// longer than an election, then let it follow.
			if err := leader.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4 * time.Second)
			_ = leader.Signal(syscall.SIGCONT)
			if _, last, ok := c.WaitConsensus(voters, 15*time.Second, func(ci *ConsensusInfo) bool {
				return ci != nil && ci.Leader != "" && ci.Leader != db1.Name
			}); !ok {
				t.Fatalf("round %d: no leader but db1 within 15s: %s", round, describeConsensus(last))
			}
			if leader, rest, err = c.ConsensusLeader(voters); err != nil {
				t.Fatal(err)
			}
		}
		if err := leader.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		took, last, ok := c.WaitConsensus(rest, 15*time.Second, func(ci *ConsensusInfo) bool {
			return ci != nil && ci.Leader != "" && ci.Leader != leader.Name
		})
		time.Sleep(3 * time.Second)
		_ = leader.Signal(syscall.SIGCONT)
		if !ok {
			t.Fatalf("round %d: no new leader within 15s of %s stopped: %s", round, leader.Name, describeConsensus(last))
		}
		t.Logf("round %d: %s stopped, new leader %s after %.2fs", round, leader.Name, last[rest[0].Name].Leader, took.Seconds())
		if _, ok := waitReadOnly(t, db1, false, time.Second); !ok {
			t.Fatalf("round %d: db1, the holder, fenced during the election after %s stopped (%.1fs ago); db1's log:\n%s",
				round, leader.Name, time.Since(stopped).Seconds(), db1.Agent.LogTail(30))
		}
		time.Sleep(2 * time.Second)
	}
	var h client.HistoryResponse
	if err := c.Get(db1.Agent, "/v1/history?kind=fence", &h); err != nil || len(h.Entries) != 0 {
		t.Errorf("db1's fence history after the elections: %+v, %v", h.Entries, err)
	}
}

// fenceLeaseLost: db1, the term holder, cut off from every other host
// (its agent alive, its mysqld running), fences its own server within the
// writer's lease (2 × heartbeat_timeout + 3 × election_timeout, 5 s) and a few
// seconds, kills its
// client session; once the cut heals and db1 still holds term 1, its
// agent undoes the fence and every agent routes writes to db1 again.
func fenceLeaseLost(t *testing.T, c *Cluster) {
	db1 := c.DBs[0]
	sess, sessID := fenceSession(t, c, db1)
	if _, err := sess.ExecContext(context.Background(), "INSERT INTO e2e.fence VALUES (4)"); err != nil {
		t.Fatalf("the session's write to db1: %v", err)
	}
	var others []*Host
	for _, a := range c.Agents() {
		if a.Host != db1.Host {
			others = append(others, a.Host)
		}
	}
	if err := Partition([]*Host{db1.Host}, others); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	healed := false
	heal := func() {
		if healed {
			return
		}
		healed = true
		for _, h := range append([]*Host{db1.Host}, others...) {
			if err := h.ClearRules(); err != nil {
				t.Errorf("clear rules on %s: %v", h.NS, err)
			}
		}
	}
	defer heal()
	const lease = 5 * time.Second
	took, ok := waitReadOnly(t, db1, true, lease+fenceMargin)
	if !ok {
		t.Fatalf("db1 still writable %s after it was cut off; db1's log:\n%s", lease+fenceMargin, db1.Agent.LogTail(40))
	}
	t.Logf("db1 read-only %.2fs after it was cut off (lease %s)", took.Seconds(), lease)
	// The lease counts from db1's last heartbeat, which may precede the
	// cut by a heartbeat interval (heartbeat_timeout / 10).
	if took < lease-250*time.Millisecond {
		t.Errorf("db1 fenced %.2fs after the cut, before the lease (%s) ran out", took.Seconds(), lease)
	}
	if !processGone(t, db1, sessID, killBound) {
		t.Errorf("the session's connection %d is still in db1's process list", sessID)
	}
	var h client.HistoryResponse
	if err := c.Get(db1.Agent, "/v1/history?kind=fence", &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Entries) != 1 || h.Entries[0].Reason != "ok" || !strings.Contains(h.Entries[0].Detail, "lease lost: holds term 1 of main") {
		t.Errorf("db1's fence history: %+v", h.Entries)
	} else {
		t.Logf("db1's history: %s", h.Entries[0].Detail)
	}
	heal()
	healedAt := time.Now()
	// Contact is back and db1 still holds term 1 (no other server was
	// granted one): its agent undoes the fence after fence_after of
	// contact, and every agent routes writes to db1 again.
	took, ok = waitReadOnly(t, db1, false, fenceAfter+15*time.Second)
	if !ok {
		t.Fatalf("db1 still read-only %s after the cut healed, still holding term 1; db1's log:\n%s", fenceAfter+15*time.Second, db1.Agent.LogTail(40))
	}
	t.Logf("db1 writable again %.2fs after the cut healed (fence_after %s)", took.Seconds(), fenceAfter)
	if err := c.Get(db1.Agent, "/v1/history?kind=fence", &h); err != nil {
		t.Fatal(err)
	}
	if n := len(h.Entries); n != 2 || h.Entries[n-1].To != "writable" || !strings.Contains(h.Entries[n-1].Detail, "still holds term 1 of main") {
		t.Errorf("db1's fence history after the heal: %+v", h.Entries)
	}
	w := c.Obs.WaitAgents(c.AgentNames(), healedAt, 20*time.Second, func(s Snap) bool { return s.OK() && slices.Equal(s.Writers, []string{"db1"}) })
	if !w.OK {
		t.Errorf("not every agent routes writes to db1 within 20s of the heal:\n%s", c.Describe())
	}
	t.Logf("every agent routes writes to db1 again %.2fs after the heal (%.1fs after the cut)", w.Took.Seconds(), time.Since(cut).Seconds())
}

// fenceSecondWritable: db2 made writable by mistake, with a client session
// writing to it, is read-only again by its own agent after fence_after
// and within a few seconds more; the session was killed; db2's history
// has the fence entry, `shoal health` the last fencing, /metrics the
// counts; db1 stayed the writer on every agent; db2 was fenced once.
func fenceSecondWritable(t *testing.T, c *Cluster) {
	db2 := c.DBs[1]
	sess, sessID := fenceSession(t, c, db2)
	since := time.Now()
	db2.Server.MustExec("SET GLOBAL read_only=0")
	if _, err := sess.ExecContext(context.Background(), "INSERT INTO e2e.fence VALUES (1)"); err != nil {
		t.Fatalf("the session's write to writable db2: %v", err)
	}
	took, ok := waitReadOnly(t, db2, true, fenceAfter+fenceMargin)
	if !ok {
		t.Fatalf("db2 still writable %s after it was made writable; db2's log:\n%s", fenceAfter+fenceMargin, db2.Agent.LogTail(40))
	}
	t.Logf("db2 read-only again %.2fs after it was made writable (fence_after %s)", took.Seconds(), fenceAfter)
	if took < fenceAfter {
		t.Errorf("db2 fenced %.2fs after it was made writable, before fence_after (%s)", took.Seconds(), fenceAfter)
	}

	// The session was killed: its connection is gone from the process
	// list, and its next statement fails on the connection, not with
	// read_only's error 1290.
	if !processGone(t, db2, sessID, killBound) {
		t.Errorf("the session's connection %d is still in db2's process list", sessID)
	}
	_, err := sess.ExecContext(context.Background(), "INSERT INTO e2e.fence VALUES (2)")
	var me *mysql.MySQLError
	if err == nil || errors.As(err, &me) && me.Number == 1290 {
		t.Errorf("the session's write after fencing: %v, want a dead connection", err)
	}

	// Published: history, shoal health, metrics.
	var h client.HistoryResponse
	if err := c.Get(db2.Agent, "/v1/history?kind=fence", &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Entries) != 1 || h.Entries[0].Reason != "ok" || h.Entries[0].Node != "db2" || h.Entries[0].To != "read-only" ||
		!strings.Contains(h.Entries[0].Detail, "term 1 belongs to db1") || !strings.Contains(h.Entries[0].Detail, "client connections killed") {
		t.Errorf("db2's fence history: %+v", h.Entries)
	} else {
		t.Logf("db2's history: %s %s -> %s (%s): %s", h.Entries[0].Kind, h.Entries[0].From, h.Entries[0].To, h.Entries[0].Reason, h.Entries[0].Detail)
	}
	var hr client.HealthResponse
	if err := c.Get(db2.Agent, "/v1/health", &hr); err != nil {
		t.Fatal(err)
	}
	if hr.MySQL == nil || hr.MySQL.Fence == nil || hr.MySQL.Fence.Result != "ok" || hr.MySQL.Fence.Killed < 1 {
		t.Errorf("db2's health: fence %+v", hr.MySQL)
	}
	if m := metricsText(t, db2.Agent); !regexp.MustCompile(`(?m)^shoal_fence_total\{result="ok"\} 1$`).MatchString(m) ||
		!regexp.MustCompile(`(?m)^shoal_fence_connections_killed_total [1-9]`).MatchString(m) {
		t.Errorf("db2's fence metrics:\n%s", grepLines(m, "shoal_fence"))
	}

	// db1 stayed the writer on every agent, and the pool is healthy again
	// (db2 a reader) everywhere.
	if w := c.WaitHealthy(time.Now(), 15*time.Second); !w.OK {
		t.Errorf("pool not healthy within 15s of db2 fenced:\n%s", c.Describe())
	}
	for _, a := range c.AgentNames() {
		for _, s := range c.Obs.Snaps(a, since, time.Now()) {
			if s.OK() && strings.Join(s.Writers, ",") != "db1" {
				t.Errorf("%s at %s: writers %v, want db1", a, s.At.Format("15:04:05.000"), s.Writers)
				break
			}
		}
	}
	// Once: no second attempt while the pool settles.
	time.Sleep(2 * time.Second)
	if err := c.Get(db2.Agent, "/v1/history?kind=fence", &h); err != nil || len(h.Entries) != 1 {
		t.Errorf("db2's fence history 2s later: %+v, %v; want the one entry", h.Entries, err)
	}
}

// fenceOff: db2's agent restarted with --consensus-fence=false leaves db2
// writable, and the session alive, well past fence_after.
func fenceOff(t *testing.T, c *Cluster) {
	db2 := c.DBs[1]
	db2.Agent.Stop(15 * time.Second)
	db2.Agent.AddFlags("--consensus-fence=false")
	db2.Agent.Start(t, true)
	if w := c.WaitHealthy(time.Now(), 30*time.Second); !w.OK {
		t.Fatalf("pool not healthy within 30s of db2's agent restarted:\n%s", c.Describe())
	}
	sess, sessID := fenceSession(t, c, db2)
	since := time.Now()
	db2.Server.MustExec("SET GLOBAL read_only=0")
	w := c.Obs.WaitAgents(c.AgentNames(), since, 15*time.Second, func(s Snap) bool { return s.OK() && s.Out["db2"] == "conflict" })
	if !w.OK {
		t.Fatalf("db2 not out with reason conflict on every agent within 15s:\n%s", c.Describe())
	}
	time.Sleep(fenceAfter + fenceMargin)
	if _, ok := waitReadOnly(t, db2, false, time.Second); !ok {
		t.Errorf("db2 read-only with fencing off")
	}
	if !processAlive(t, db2, sessID) {
		t.Errorf("the session's connection %d was killed with fencing off", sessID)
	}
	if _, err := sess.ExecContext(context.Background(), "INSERT INTO e2e.fence VALUES (3)"); err != nil {
		t.Errorf("the session's write with fencing off, %s after db2 writable: %v", time.Since(since).Round(time.Second), err)
	}
	var h client.HistoryResponse
	if err := c.Get(db2.Agent, "/v1/history?kind=fence", &h); err != nil || len(h.Entries) != 0 {
		t.Errorf("db2's fence history with fencing off: %+v, %v", h.Entries, err)
	}
	if m := metricsText(t, db2.Agent); !strings.Contains(m, `shoal_fence_total{result="ok"} 0`) || !strings.Contains(m, `shoal_fence_total{result="error"} 0`) {
		t.Errorf("db2's fence metrics with fencing off:\n%s", grepLines(m, "shoal_fence"))
	}
	t.Logf("fencing off: db2 writable, the session alive and writing %.1fs after db2 was made writable", time.Since(since).Seconds())
	db2.Server.MustExec("SET GLOBAL read_only=1")
	if w := c.WaitHealthy(time.Now(), 15*time.Second); !w.OK {
		t.Errorf("pool not healthy within 15s of db2 read-only again:\n%s", c.Describe())
	}
}

// fenceSession opens a client session to d's server, as the application
// account from the app host (not through HAProxy: a client that connects
// directly), and returns it with its connection id.
func fenceSession(t *testing.T, c *Cluster, d *DBHost) (*sql.Conn, int64) {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = AppUser, AppPassword
	cfg.Net, cfg.Addr = "tcp", d.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 5*time.Second, 5*time.Second
	cfg.DialFunc = c.Apps[0].Host.dialer.DialContext
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	sess, err := db.Conn(context.Background())
	if err != nil {
		t.Fatalf("session to %s: %v", d.Name, err)
	}
	t.Cleanup(func() { sess.Close() })
	var id int64
	if err := sess.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatalf("session to %s: %v", d.Name, err)
	}
	return sess, id
}

// waitReadOnly polls d's read_only every 50 ms until it is want or limit
// passes, and returns how long it took.
func waitReadOnly(t *testing.T, d *DBHost, want bool, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	for {
		var ro bool
		if err := d.Server.DB().QueryRow("SELECT @@global.read_only").Scan(&ro); err == nil && ro == want {
			return time.Since(start), true
		}
		if time.Since(start) > limit {
			return time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processAlive reports whether connection id is in d's process list.
func processAlive(t *testing.T, d *DBHost, id int64) bool {
	t.Helper()
	var n int
	if err := d.Server.DB().QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
		t.Fatalf("%s: process list: %v", d.Name, err)
	}
	return n > 0
}

// killBound is how long after the server turned read-only its client
// sessions must be gone: fencing sets read_only first and kills the
// sessions right after, and a killed thread may stay listed a moment.
const killBound = 2 * time.Second

// processGone reports whether connection id left d's process list within
// bound.
func processGone(t *testing.T, d *DBHost, id int64, bound time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(bound); ; time.Sleep(50 * time.Millisecond) {
		if !processAlive(t, d, id) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// metricsText is an agent's /metrics.
func metricsText(t *testing.T, a *Agent) string {
	t.Helper()
	hc := a.Host.HTTPClient(5 * time.Second)
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(fmt.Sprintf("http://%s/metrics", a.HTTPAddr()))
	if err != nil {
		t.Fatalf("%s /metrics: %v", a.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s /metrics: %v", a.Name, err)
	}
	return string(b)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
