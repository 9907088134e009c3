package fence

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

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
	var pos string
	if err := primary.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
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
	if err := primary.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
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
