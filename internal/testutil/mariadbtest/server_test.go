package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func queryInt(t *testing.T, s *Server, q string) int64 {
	t.Helper()
	var v int64
	if err := s.DB().QueryRow(q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func TestServerLifecycle(t *testing.T) {
	Require(t)
	t0 := time.Now()
	s := Start(t, Options{})
	t.Logf("start: %s (pid %d, %s, %s)", time.Since(t0).Round(time.Millisecond), s.PID(), s.Addr(), s.Socket())

	if got := queryInt(t, s, "SELECT @@server_id"); got != int64(s.ServerID()) {
		t.Errorf("server_id = %d, want %d", got, s.ServerID())
	}
	if got := queryInt(t, s, "SELECT @@gtid_strict_mode"); got != 1 {
		t.Errorf("gtid_strict_mode = %d, want 1", got)
	}
	if got := queryInt(t, s, "SELECT @@read_only"); got != 0 {
		t.Errorf("read_only = %d, want 0", got)
	}
	// TCP as root works with the DSN.
	cfg, err := mysql.ParseDSN(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = &mysql.NopLogger{} // the kill below makes the driver chatty
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tcp := sql.OpenDB(connector)
	defer tcp.Close()
	if err := tcp.Ping(); err != nil {
		t.Fatalf("ping over %s: %v", s.DSN(), err)
	}

	s.MustExec("CREATE DATABASE d")
	s.MustExec("CREATE TABLE d.t (id INT PRIMARY KEY)")
	s.MustExec("INSERT INTO d.t VALUES (1)")

	pid := s.PID()
	s.Kill()
	if s.PID() != 0 {
		t.Fatalf("PID after Kill = %d, want 0", s.PID())
	}
	t0 = time.Now()
	s.Restart()
	t.Logf("restart after kill -9: %s", time.Since(t0).Round(time.Millisecond))
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("PID after restart = %d (was %d)", s.PID(), pid)
	}
	if got := queryInt(t, s, "SELECT COUNT(*) FROM d.t"); got != 1 {
		t.Fatalf("rows after restart = %d, want 1", got)
	}

	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = tcp.PingContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ping of a stopped server: %v, want deadline exceeded", err)
	}
	s.Cont()
	if err := tcp.Ping(); err != nil {
		t.Fatalf("ping after SIGCONT: %v", err)
	}

	// A clean restart of a stopped server works too.
	s.Stop()
	s.Restart()
	if got := queryInt(t, s, "SELECT COUNT(*) FROM d.t"); got != 1 {
		t.Fatalf("rows after restart = %d, want 1", got)
	}
}

func TestReplicateFrom(t *testing.T) {
	Require(t)
	t0 := time.Now()
	p := Start(t, Options{})
	r := Start(t, Options{})
	t.Logf("two servers: %s", time.Since(t0).Round(time.Millisecond))
	if p.ServerID() == r.ServerID() {
		t.Fatalf("server ids not unique: %d", p.ServerID())
	}
	p.MustExec("CREATE DATABASE d")
	p.MustExec("CREATE TABLE d.t (id INT PRIMARY KEY)")
	t0 = time.Now()
	r.ReplicateFrom(p)
	t.Logf("replication running: %s", time.Since(t0).Round(time.Millisecond))
	p.MustExec("INSERT INTO d.t VALUES (1), (2)")

	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int64
		err := r.DB().QueryRow("SELECT COUNT(*) FROM d.t").Scan(&n)
		if err == nil && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica has %d rows (err %v), want 2", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := queryInt(t, r, "SELECT @@read_only"); got != 1 {
		t.Errorf("replica read_only = %d, want 1", got)
	}
	// The repl user must not have been binlogged on the primary.
	if got := queryInt(t, p, "SELECT COUNT(*) FROM mysql.user WHERE user='repl'"); got != 1 {
		t.Errorf("repl users on primary = %d", got)
	}
	if got := queryInt(t, r, "SELECT COUNT(*) FROM mysql.user WHERE user='repl'"); got != 0 {
		t.Errorf("repl user replicated to the replica (%d rows): it was binlogged", got)
	}

	r.Restart()
	if got := queryInt(t, r, "SELECT @@read_only"); got != 1 {
		t.Errorf("replica read_only after restart = %d, want 1", got)
	}
	r.WaitReplicating(30 * time.Second)
}
