package fence

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

const testPassword = "fence-pw"

// clientConn opens one connection to srv as user; a writer (app) writes
// through it first.
func clientConn(t *testing.T, srv *mariadbtest.Server, user string, writes bool) *sql.Conn {
	t.Helper()
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr = user, testPassword, "tcp", srv.Addr()
	c, err := mysql.NewConnector(mc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if !writes {
		return conn
	}
	if _, err := conn.ExecContext(context.Background(), "INSERT INTO fencetest.t VALUES (1)"); err != nil {
		t.Fatalf("client insert before fencing: %v", err)
	}
	return conn
}

func readOnly(t *testing.T, srv *mariadbtest.Server) bool {
	t.Helper()
	var ro bool
	if err := srv.DB().QueryRow("SELECT @@global.read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	return ro
}

func fenceAs(user string, srv *mariadbtest.Server) (Result, error) {
	pc := probe.Config{Host: "127.0.0.1", Port: srv.Port(), User: user, Password: testPassword}
	return Fence(context.Background(), FromProbe(pc, 5*time.Second))
}

// TestFenceMariaDB: with the documented grants, fencing sets read_only
// and kills a client's connection, keeping its own account's; without
// them it fails, naming the privilege, and says what it did.
func TestFenceMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	srv.MustExec("CREATE DATABASE fencetest")
	srv.MustExec("CREATE TABLE fencetest.t (v INT)")
	srv.CreateUser(mariadbtest.User{Name: "app", Password: testPassword})
	srv.MustExec("GRANT SELECT, INSERT ON fencetest.* TO 'app'@'127.0.0.1'")
	grants := map[string]string{
		"shoal":       "SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS",
		"noreadonly":  "SLAVE MONITOR, CONNECTION ADMIN, PROCESS",
		"noprocess":   "SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN",
		"noconnadmin": "SLAVE MONITOR, READ_ONLY ADMIN, PROCESS",
	}
	for u, g := range grants {
		srv.CreateUser(mariadbtest.User{Name: u, Password: testPassword, Grants: g})
	}

	t.Run("with the grants", func(t *testing.T) {
		srv.MustExec("SET GLOBAL read_only=OFF")
		client := clientConn(t, srv, "app", true)
		own := clientConn(t, srv, "shoal", false) // the probe's account: kept
		res, err := fenceAs("shoal", srv)
		if err != nil {
			t.Fatalf("fence: %v (result %+v)", err, res)
		}
		if !readOnly(t, srv) || !res.ReadOnly || res.Flavor != "mariadb" {
			t.Errorf("read_only %v, result %+v", readOnly(t, srv), res)
		}
		if res.Killed < 2 { // the client and the test's root pool connection
			t.Errorf("killed %d, want at least 2 (result %+v)", res.Killed, res)
		}
		if err := client.PingContext(context.Background()); err == nil {
			t.Error("the client's connection is still alive")
		}
		if err := own.PingContext(context.Background()); err != nil {
			t.Errorf("the fencing account's own connection was killed: %v", err)
		}
		again := clientConn(t, srv, "app", false)
		if _, err := again.ExecContext(context.Background(), "INSERT INTO fencetest.t VALUES (2)"); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("a new client's insert after fencing: %v, want a read-only error", err)
		}
		// Fencing again is harmless: already read-only, nothing to kill.
		if res, err := fenceAs("shoal", srv); err != nil || !res.ReadOnly {
			t.Errorf("second fence: %+v, %v", res, err)
		}
		// Undoing a lease fence makes the server writable again.
		pc := probe.Config{Host: "127.0.0.1", Port: srv.Port(), User: "shoal", Password: testPassword}
		if err := Unfence(context.Background(), FromProbe(pc, 5*time.Second)); err != nil || readOnly(t, srv) {
			t.Errorf("unfence: %v, read_only %v", err, readOnly(t, srv))
		}
	})

	for _, tc := range []struct {
		user, want string
		readOnly   bool
	}{
		{"noreadonly", "READ_ONLY ADMIN", false},
		{"noprocess", "PROCESS privilege needed", true},
		{"noconnadmin", "not owner of thread", true},
	} {
		t.Run("without "+tc.user[2:], func(t *testing.T) {
			srv.MustExec("SET GLOBAL read_only=OFF")
			client := clientConn(t, srv, "app", true)
			res, err := fenceAs(tc.user, srv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fence as %s: error %v, want one with %q", tc.user, err, tc.want)
			}
			t.Logf("fence as %s: %v (result %+v)", tc.user, err, res)
			if res.ReadOnly != tc.readOnly || readOnly(t, srv) != tc.readOnly {
				t.Errorf("read_only %v, result %+v; want %v", readOnly(t, srv), res, tc.readOnly)
			}
			if err := client.PingContext(context.Background()); err != nil {
				t.Errorf("the client's connection was killed: %v", err)
			}
		})
	}

	t.Run("server down", func(t *testing.T) {
		pc := probe.Config{Host: "127.0.0.1", Port: 1, User: "shoal", Password: testPassword}
		_, err := Fence(context.Background(), FromProbe(pc, time.Second))
		if err == nil || !strings.Contains(err.Error(), "connect to 127.0.0.1:1") {
			t.Fatalf("error %v", err)
		}
	})
}
