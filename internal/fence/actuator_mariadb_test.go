package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// ownConns are the ids of the server's connections of user but except,
// read as root.
func ownConns(t *testing.T, srv *mariadbtest.Server, user, except string) string {
	t.Helper()
	rows, err := srv.DB().Query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> ? ORDER BY ID", user, except)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(ids, ",")
}

// TestActuatorOnePoolMariaDB takes every action, some twice, on two
// Actuators whose account may hold two connections, one held by the
// probe: each Actuator dials once, reads the flavor once, and the server
// sees the same one connection of its from the first action to the last.
func TestActuatorOnePoolMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 1, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants, MaxConns: 2})
	replica := rs[0]
	replica.CreateUser(mariadbtest.User{Name: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword, Grants: "REPLICATION SLAVE"})
	primary.MustExec("CREATE DATABASE pool")
	primary.MustExec("CREATE TABLE pool.t (v INT)")
	primary.MustExec("INSERT INTO pool.t VALUES (1)")
	probes := []string{} // the probes' connection ids, held throughout
	for _, s := range []*mariadbtest.Server{primary, replica} {
		c := clientConn(t, s, "shoal", false)
		var id string
		if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		probes = append(probes, id)
	}
	ctx := context.Background()
	pa, ra := New(cfgOf(primary, "shoal")), New(cfgOf(replica, "shoal"))
	defer pa.Close()
	defer ra.Close()

	var seen [2]string // each server's actuator connection, after the first action
	same := func(i int, srv *mariadbtest.Server, step string) {
		t.Helper()
		ids := ownConns(t, srv, "shoal", probes[i])
		if seen[i] == "" {
			seen[i] = ids
		}
		if ids == "" || strings.Contains(ids, ",") || ids != seen[i] {
			t.Errorf("after %s: the actuator's connections on %s are %q, want the one %q", step, srv.Addr(), ids, seen[i])
		}
	}
	steps := []struct {
		name string
		i    int
		srv  *mariadbtest.Server
		do   func() error
	}{
		{"fence", 0, primary, func() error { _, err := pa.Fence(ctx); return err }},
		{"unfence", 0, primary, func() error { return pa.Unfence(ctx) }},
		{"fence again", 0, primary, func() error { _, err := pa.Fence(ctx); return err }},
		{"demote", 0, primary, func() error {
			res, gtid, err := pa.Demote(ctx)
			if err == nil && (res.Flavor != "mariadb" || gtid == "") {
				err = fmt.Errorf("result %+v, gtid %q", res, gtid)
			}
			if err == nil {
				err = ra.CatchUp(ctx, gtid, 10*time.Second)
			}
			return err
		}},
		{"promote", 1, replica, func() error { _, _, err := ra.Promote(ctx); return err }},
		{"repoint", 0, primary, func() error {
			return pa.Repoint(ctx, Source{Addr: replica.Addr(), User: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword, FormerWriter: true})
		}},
		{"catch up", 0, primary, func() error {
			replica.MustExec("INSERT INTO pool.t VALUES (2)")
			var pos string
			if err := replica.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
				return err
			}
			return pa.CatchUp(ctx, pos, 10*time.Second)
		}},
		{"fence the new primary", 1, replica, func() error { _, err := ra.Fence(ctx); return err }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		same(st.i, st.srv, st.name)
	}
	for name, a := range map[string]*Actuator{"primary": pa, "replica": ra} {
		if d, f := a.conns.dials.Load(), a.detections.Load(); d != 1 || f != 1 {
			t.Errorf("the %s's actuator dialled %d times and read the flavor %d times, want 1 and 1", name, d, f)
		}
	}
}

// TestActuatorServerRestartMariaDB: after a restart the Actuator dials
// again, reads the flavor again, and acts; a server that hangs fails an
// action within the Config's Timeout.
func TestActuatorServerRestartMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	srv.CreateUser(mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants})
	ctx := context.Background()
	cfg := cfgOf(srv, "shoal")
	cfg.Timeout = 2 * time.Second
	a := New(cfg)
	defer a.Close()
	if _, err := a.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if d, f := a.conns.dials.Load(), a.detections.Load(); d != 1 || f != 1 {
		t.Fatalf("before the restart: %d dials, %d flavor reads, want 1 and 1", d, f)
	}

	srv.Restart()
	if res, err := a.Fence(ctx); err != nil || res.Flavor != "mariadb" || !readOnly(t, srv) {
		t.Fatalf("fence after the restart: %+v, %v", res, err)
	}
	if err := a.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if d, f := a.conns.dials.Load(), a.detections.Load(); d != 2 || f != 2 {
		t.Errorf("after the restart: %d dials, %d flavor reads, want 2 and 2", d, f)
	}

	srv.Stop()
	start := time.Now()
	_, err := a.Fence(ctx)
	took := time.Since(start)
	srv.Cont()
	if err == nil || took > cfg.Timeout+time.Second {
		t.Errorf("fence of a hung server: %v after %s, want an error within %s", err, took, cfg.Timeout)
	}
	if _, err := a.Fence(ctx); err != nil {
		t.Errorf("fence once the server runs again: %v", err)
	}
}

// TestActuatorClose: Close is idempotent, and an action after it fails
// with ErrClosed without connecting.
func TestActuatorClose(t *testing.T) {
	a := New(Config{Network: "tcp", Addr: "127.0.0.1:1", User: "shoal"})
	for i := range 2 {
		if err := a.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	if _, err := a.Fence(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("fence after close: %v, want ErrClosed", err)
	}
	if err := a.CatchUp(context.Background(), "0-1-2", time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("catch up after close: %v, want ErrClosed", err)
	}
	if a.conns.dials.Load() != 0 {
		t.Error("a closed actuator dialled")
	}
}
