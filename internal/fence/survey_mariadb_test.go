package fence

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// binlogPos is s's @@gtid_binlog_pos.
func binlogPos(t *testing.T, s *mariadbtest.Server) string {
	t.Helper()
	var pos string
	if err := s.DB().QueryRow("SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	return pos
}

// wantThreads checks s's replication threads (Slave_IO_Running,
// Slave_SQL_Running).
func wantThreads(t *testing.T, s *mariadbtest.Server, io, sqlThread string) {
	t.Helper()
	st, err := s.SlaveStatus()
	if err != nil || st["Slave_IO_Running"] != io || st["Slave_SQL_Running"] != sqlThread {
		t.Fatalf("replication threads: IO %q SQL %q (%v), want %s and %s", st["Slave_IO_Running"], st["Slave_SQL_Running"], err, io, sqlThread)
	}
}

// lockRow holds a row lock on s in a transaction of its own connection;
// the returned func rolls it back.
func lockRow(t *testing.T, s *mariadbtest.Server, q string) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"BEGIN", q} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			conn.Close()
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	done := false
	return func() {
		if !done {
			done = true
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
			conn.Close()
		}
	}
}

// TestSurveyMariaDB: a failover's survey on real servers. A replica whose
// relay log holds an event its SQL thread cannot apply yet (a row lock)
// when the primary dies: the survey stops the IO thread, waits, and once
// the lock goes reports the drained position with the primary's last
// write (the relay log was not lost); with the lock kept it reports not
// drained. A broken SQL thread is reported, not waited for; the IO thread
// starts again with ResumeReplication; a server that is no replica says
// so.
func TestSurveyMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 2, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants})
	r1, r2 := rs[0], rs[1]
	primary.MustExec("CREATE DATABASE sv")
	primary.MustExec("CREATE TABLE sv.t (id INT PRIMARY KEY, v INT)")
	primary.MustExec("INSERT INTO sv.t VALUES (1, 0), (2, 0)")
	pos := binlogPos(t, primary)
	ctx := context.Background()
	for _, r := range rs {
		if err := CatchUp(ctx, cfgOf(r, "shoal"), pos, 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// A broken SQL thread on r2: a row written there alone, then by the primary.
	r2.MustExec("SET GLOBAL read_only=OFF")
	conn, err := r2.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET SESSION sql_log_bin=0", "INSERT INTO sv.t VALUES (3, 99)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	r2.MustExec("SET GLOBAL read_only=ON")
	primary.MustExec("INSERT INTO sv.t VALUES (3, 0)")

	// r1's SQL thread waits on a lock; the primary's last write is in its relay log.
	unlock := lockRow(t, r1, "SELECT v FROM sv.t WHERE id = 1 FOR UPDATE")
	defer unlock()
	primary.MustExec("UPDATE sv.t SET v = 1 WHERE id = 1")
	pos = binlogPos(t, primary)
	// Wait until r1 received it (Gtid_IO_Pos) before the primary dies.
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := r1.SlaveStatus()
		if err == nil && st["Gtid_IO_Pos"] == pos {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r1 did not receive %s: %v %v", pos, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	primary.Kill()

	a1 := New(cfgOf(r1, "shoal"))
	defer a1.Close()
	sv, err := a1.Survey(ctx, time.Second)
	if err != nil || !sv.Replica || sv.Drained || sv.IOPos != pos || sv.SQLError != "" {
		t.Fatalf("survey with the lock kept: %+v, %v; want a replica not drained, IOPos %s", sv, err, pos)
	}
	if st, _ := r1.SlaveStatus(); st["Slave_IO_Running"] != "No" || st["Slave_SQL_Running"] != "Yes" {
		t.Fatalf("after the survey: IO %q SQL %q, want No and Yes", st["Slave_IO_Running"], st["Slave_SQL_Running"])
	}
	go func() {
		time.Sleep(time.Second)
		unlock()
	}()
	t0 := time.Now()
	sv, err = a1.Survey(ctx, 10*time.Second)
	if err != nil || !sv.Drained || !sv.SQLRunning || sv.CurrentPos != pos || sv.IOPos != pos {
		t.Fatalf("survey once the lock goes: %+v, %v; want drained at %s", sv, err, pos)
	}
	t.Logf("drained %s in %s: binlog %q slave %q current %q server_id %d", pos, time.Since(t0).Round(time.Millisecond), sv.BinlogPos, sv.SlavePos, sv.CurrentPos, sv.ServerID)
	var v int
	if err := r1.DB().QueryRow("SELECT v FROM sv.t WHERE id = 1").Scan(&v); err != nil || v != 1 {
		t.Fatalf("the relay log's last event was not applied: v = %d, %v", v, err)
	}

	a2 := New(cfgOf(r2, "shoal"))
	defer a2.Close()
	t0 = time.Now()
	sv, err = a2.Survey(ctx, 10*time.Second)
	if err != nil || sv.Drained || sv.SQLRunning || !strings.HasPrefix(sv.SQLError, "1062: ") {
		t.Fatalf("survey of a broken SQL thread: %+v, %v; want SQLError 1062, not drained", sv, err)
	}
	if time.Since(t0) > 5*time.Second {
		t.Errorf("the survey of a broken SQL thread waited %s", time.Since(t0))
	}

	if err := a1.ResumeReplication(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := r1.SlaveStatus(); st["Slave_IO_Running"] == "No" {
		t.Fatalf("after ResumeReplication the IO thread is %q", st["Slave_IO_Running"])
	}
	// The primary is dead: not a replica, but positions.
	pa := New(cfgOf(r1, "shoal"))
	defer pa.Close()
	if _, err := Promote(ctx, cfgOf(r1, "shoal")); err != nil {
		t.Fatal(err)
	}
	sv, err = pa.Survey(ctx, time.Second)
	if err != nil || sv.Replica || sv.CurrentPos != pos || sv.ServerID == 0 {
		t.Fatalf("survey of a server that is no replica: %+v, %v", sv, err)
	}
	if err := pa.ResumeReplication(ctx); err != nil {
		t.Fatalf("ResumeReplication on a server that is no replica: %v", err)
	}
}

// TestSurveyCaughtUpMariaDB: a caught-up replica's survey is drained at
// once at the primary's position, its IO thread stopped and its SQL
// thread running; ResumeReplication starts the IO thread again and the
// next write arrives; a SQL thread stopped (no error) after it applied
// everything is drained without a wait; the primary, no replica, answers
// its positions. A write on the replica itself (root has READ_ONLY ADMIN:
// read_only does not stop it) is an errant transaction: its GTID, under
// the replica's server_id, is in gtid_binlog_pos and gtid_current_pos,
// not in gtid_slave_pos; the primary's next transaction then stops the
// SQL thread (gtid_strict_mode: 1950, out-of-order sequence number).
func TestSurveyCaughtUpMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 1, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants})
	r := rs[0]
	primary.MustExec("CREATE DATABASE sv")
	primary.MustExec("CREATE TABLE sv.t (id INT PRIMARY KEY)")
	primary.MustExec("INSERT INTO sv.t VALUES (1)")
	pos := binlogPos(t, primary)
	ctx := context.Background()
	if err := CatchUp(ctx, cfgOf(r, "shoal"), pos, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	a := New(cfgOf(r, "shoal"))
	defer a.Close()
	survey := func(drain time.Duration) Survey {
		t.Helper()
		t0 := time.Now()
		sv, err := a.Survey(ctx, drain)
		if err != nil {
			t.Fatalf("survey: %v", err)
		}
		if took := time.Since(t0); took > 2*time.Second {
			t.Errorf("the survey took %s, want no wait", took)
		}
		return sv
	}
	// mariadbtest's replicas: MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1, which the survey reads.
	replica := Survey{Flavor: "mariadb", ServerID: uint32(r.ServerID()), ReadOnly: true, Replica: true, SQLRunning: true, Drained: true,
		Timers: Timers{ConnectRetry: 1, HeartbeatPeriod: 1}}

	want := replica
	want.IOPos, want.BinlogPos, want.SlavePos, want.CurrentPos = pos, pos, pos, pos
	if sv := survey(10 * time.Second); sv != want {
		t.Fatalf("survey of a caught-up replica:\n got %+v\nwant %+v", sv, want)
	}
	wantThreads(t, r, "No", "Yes")

	if err := a.ResumeReplication(ctx); err != nil {
		t.Fatal(err)
	}
	r.WaitReplicating(15 * time.Second)
	primary.MustExec("INSERT INTO sv.t VALUES (2)")
	pos = binlogPos(t, primary)
	if err := CatchUp(ctx, cfgOf(r, "shoal"), pos, 15*time.Second); err != nil {
		t.Fatalf("after ResumeReplication: %v", err)
	}

	r.MustExec("STOP SLAVE SQL_THREAD")
	want = replica
	want.SQLRunning, want.IOPos, want.BinlogPos, want.SlavePos, want.CurrentPos = false, pos, pos, pos, pos
	if sv := survey(10 * time.Second); sv != want {
		t.Fatalf("survey of a stopped SQL thread that applied everything:\n got %+v\nwant %+v", sv, want)
	}
	r.MustExec("START SLAVE")
	r.WaitReplicating(15 * time.Second)

	pa := New(cfgOf(primary, "shoal"))
	defer pa.Close()
	sv, err := pa.Survey(ctx, time.Second)
	want = Survey{Flavor: "mariadb", ServerID: uint32(primary.ServerID()), BinlogPos: pos, CurrentPos: pos}
	if err != nil || sv != want {
		t.Fatalf("survey of a server that is no replica: %v\n got %+v\nwant %+v", err, sv, want)
	}
	if err := pa.ResumeReplication(ctx); err != nil {
		t.Fatalf("ResumeReplication on a server that is no replica: %v", err)
	}

	r.MustExec("INSERT INTO sv.t VALUES (100)")
	seq, err := strconv.Atoi(pos[strings.LastIndex(pos, "-")+1:])
	if err != nil {
		t.Fatal(err)
	}
	errant := fmt.Sprintf("0-%d-%d", r.ServerID(), seq+1)
	want = replica
	want.IOPos, want.BinlogPos, want.SlavePos, want.CurrentPos = pos, errant, pos, errant
	sv = survey(time.Second)
	t.Logf("errant write on the replica (server_id %d; primary %d): gtid_binlog_pos %q gtid_slave_pos %q gtid_current_pos %q Gtid_IO_Pos %q",
		sv.ServerID, primary.ServerID(), sv.BinlogPos, sv.SlavePos, sv.CurrentPos, sv.IOPos)
	if sv != want {
		t.Fatalf("survey after an errant write:\n got %+v\nwant %+v", sv, want)
	}
	if err := a.ResumeReplication(ctx); err != nil {
		t.Fatal(err)
	}
	primary.MustExec("INSERT INTO sv.t VALUES (3)")
	next := binlogPos(t, primary)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, err := r.SlaveStatus(); err == nil && st["Last_SQL_Errno"] != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the primary's %s after the errant %s did not stop the SQL thread", next, errant)
		}
	}
	sv = survey(10 * time.Second)
	t.Logf("then the primary's %s: Gtid_IO_Pos %q, SQL error %q", next, sv.IOPos, sv.SQLError)
	if !strings.HasPrefix(sv.SQLError, "1950: ") || sv.Drained || sv.SQLRunning || sv.IOPos != next || sv.CurrentPos != errant {
		t.Fatalf("survey after the primary's next write: %+v, want SQL error 1950, not drained, IOPos %s", sv, next)
	}
}

// TestSurveySQLErrorDuringDrainMariaDB: a SQL thread that stops on an
// error while the survey waits (a lock wait timeout, no retry) ends the
// wait: the survey reports the error long before its drain.
func TestSurveySQLErrorDuringDrainMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 1, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants})
	r := rs[0]
	// The SQL thread takes the globals when it starts.
	for _, q := range []string{"STOP SLAVE SQL_THREAD", "SET GLOBAL innodb_lock_wait_timeout=1", "SET GLOBAL slave_transaction_retries=0", "START SLAVE SQL_THREAD"} {
		r.MustExec(q)
	}
	primary.MustExec("CREATE DATABASE sv")
	primary.MustExec("CREATE TABLE sv.t (id INT PRIMARY KEY, v INT)")
	primary.MustExec("INSERT INTO sv.t VALUES (1, 0)")
	ctx := context.Background()
	if err := CatchUp(ctx, cfgOf(r, "shoal"), binlogPos(t, primary), 15*time.Second); err != nil {
		t.Fatal(err)
	}
	unlock := lockRow(t, r, "SELECT v FROM sv.t WHERE id = 1 FOR UPDATE")
	defer unlock()
	primary.MustExec("UPDATE sv.t SET v = 1 WHERE id = 1")
	pos := binlogPos(t, primary)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := r.SlaveStatus(); err == nil && st["Gtid_IO_Pos"] == pos {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not receive %s", pos)
		}
	}
	a := New(cfgOf(r, "shoal"))
	defer a.Close()
	t0 := time.Now()
	sv, err := a.Survey(ctx, 30*time.Second)
	took := time.Since(t0)
	if err != nil || sv.Drained || sv.SQLRunning || !strings.HasPrefix(sv.SQLError, "1205: ") || sv.IOPos != pos {
		t.Fatalf("survey: %+v, %v; want SQL error 1205, not drained, IOPos %s", sv, err, pos)
	}
	if took > 10*time.Second {
		t.Errorf("the survey took %s: it waited on after the SQL thread stopped", took)
	}
	t.Logf("SQL thread stopped during the drain: the survey returned in %s: %s", took.Round(time.Millisecond), sv.SQLError)
}
