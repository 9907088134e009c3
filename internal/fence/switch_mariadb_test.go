package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// switchGrants are the probe account's grants a switchover needs.
const switchGrants = "SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS, REPLICATION SLAVE ADMIN, RELOAD"

func cfgOf(srv *mariadbtest.Server, user string) Config {
	return FromProbe(probe.Config{Host: "127.0.0.1", Port: srv.Port(), User: user, Password: testPassword}, 5*time.Second)
}

// TestSwitchoverStepsMariaDB takes every step of a switchover on real
// servers: the primary demoted, a replica caught up and promoted, the
// other replica and the old primary replicating from it, and a write on
// the new primary reaching both.
func TestSwitchoverStepsMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 2, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants})
	target, other := rs[0], rs[1]
	// The replication account exists everywhere, as it does in a fleet
	// whose accounts replicate.
	for _, s := range []*mariadbtest.Server{target, other} {
		s.CreateUser(mariadbtest.User{Name: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword, Grants: "REPLICATION SLAVE"})
	}
	primary.MustExec("CREATE DATABASE sw")
	primary.MustExec("CREATE TABLE sw.t (v INT PRIMARY KEY)")
	for i := range 50 {
		primary.MustExec(fmt.Sprintf("INSERT INTO sw.t VALUES (%d)", i))
	}
	ctx := context.Background()

	res, gtid, err := Demote(ctx, cfgOf(primary, "shoal"))
	if err != nil || !res.ReadOnly || gtid == "" {
		t.Fatalf("demote: %+v, gtid %q, %v", res, gtid, err)
	}
	if !readOnly(t, primary) {
		t.Fatal("the demoted primary is writable")
	}
	if err := CatchUp(ctx, cfgOf(target, "shoal"), gtid, 10*time.Second); err != nil {
		t.Fatalf("catch up to %s: %v", gtid, err)
	}
	ta := New(cfgOf(target, "shoal"))
	defer ta.Close()
	fl, timers, err := ta.Promote(ctx)
	// mariadbtest's replicas: MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1.
	if err != nil || fl != "mariadb" || timers != (Timers{ConnectRetry: 1, HeartbeatPeriod: 1}) {
		t.Fatalf("promote: %q, timers %+v, %v", fl, timers, err)
	}
	if readOnly(t, target) {
		t.Fatal("the promoted target is read-only")
	}
	if st, err := target.SlaveStatus(); err != nil || len(st) != 0 {
		t.Errorf("the promoted target still has replication configured: %v, %v", st, err)
	}
	// The other replica keeps its account; the old primary, which never
	// replicated, needs one.
	if err := Repoint(ctx, cfgOf(other, "shoal"), Source{Addr: target.Addr()}); err != nil {
		t.Fatalf("repoint the other replica: %v", err)
	}
	err = Repoint(ctx, cfgOf(primary, "shoal"), Source{Addr: target.Addr(), FormerWriter: true})
	if !errors.Is(err, ErrNoReplicationAccount) {
		t.Fatalf("repoint the old primary without an account: %v, want ErrNoReplicationAccount", err)
	}
	if err := Repoint(ctx, cfgOf(primary, "shoal"), Source{Addr: target.Addr(), User: mariadbtest.ReplUser, Password: mariadbtest.ReplPassword,
		FormerWriter: true, Timers: timers}); err != nil {
		t.Fatalf("repoint the old primary: %v", err)
	}
	// The former writer takes the new writer's timers, not the server's
	// defaults (a 60 s connect retry).
	if st, err := primary.SlaveStatus(); err != nil || st["Connect_Retry"] != "1" {
		t.Errorf("the old primary's connect retry is %q, want the target's 1 (%v)", st["Connect_Retry"], err)
	}
	var hb float64
	if err := primary.DB().QueryRow("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'SLAVE_HEARTBEAT_PERIOD'").Scan(&hb); err != nil || hb != 1 {
		t.Errorf("the old primary's heartbeat period is %v, want the target's 1 (%v)", hb, err)
	}
	target.MustExec("INSERT INTO sw.t VALUES (1000)")
	var pos string
	if err := target.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*mariadbtest.Server{other, primary} {
		if err := CatchUp(ctx, cfgOf(s, "shoal"), pos, 15*time.Second); err != nil {
			st, _ := s.SlaveStatus()
			t.Errorf("%s does not follow the new primary to %s: %v (%v)", s.Addr(), pos, err, st)
		}
	}
}

// TestSwitchoverStepErrors: a position never reached times out; a bad
// position, source or missing privilege is an error that says so.
func TestSwitchoverStepErrors(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 1, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants})
	primary.CreateUser(mariadbtest.User{Name: "weak", Password: testPassword, Grants: "SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS"})
	ctx := context.Background()
	start := time.Now()
	err := CatchUp(ctx, cfgOf(rs[0], "shoal"), "0-1-999999", time.Second)
	if !errors.Is(err, ErrCatchUpTimeout) {
		t.Errorf("catch up to a position never reached: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a 1 s catch-up took %s", took)
	}
	if err := CatchUp(ctx, cfgOf(rs[0], "shoal"), "0-1-1'; DROP TABLE x; --", time.Second); err == nil || !strings.Contains(err.Error(), "character") {
		t.Errorf("a malformed position: %v", err)
	}
	if err := CatchUp(ctx, cfgOf(rs[0], "shoal"), "", time.Second); err != nil {
		t.Errorf("an empty position: %v", err)
	}
	if err := Repoint(ctx, cfgOf(rs[0], "shoal"), Source{Addr: "no-port"}); err == nil {
		t.Error("a source without a port was taken")
	}
	if _, err := Promote(ctx, cfgOf(primary, "weak")); err == nil || !strings.Contains(err.Error(), "STOP REPLICA") {
		t.Errorf("promote without REPLICATION SLAVE ADMIN: %v", err)
	}
}

// TestSwitchoverStepsTwoConnections: with the account limited to two
// connections and one held (the probe's), the steps run one after the
// other, each on the one connection left.
func TestSwitchoverStepsTwoConnections(t *testing.T) {
	mariadbtest.Require(t)
	primary, rs := mariadbtest.StartReplicated(t, 1, mariadbtest.User{Name: "shoal", Password: testPassword, Grants: switchGrants, MaxConns: 2})
	probe := clientConn(t, rs[0], "shoal", false) // held, like the probe's
	ctx := context.Background()
	res, gtid, err := Demote(ctx, cfgOf(primary, "shoal"))
	if err != nil {
		t.Fatalf("demote: %+v %v", res, err)
	}
	for i := range 5 {
		if err := CatchUp(ctx, cfgOf(rs[0], "shoal"), gtid, 5*time.Second); err != nil {
			t.Fatalf("catch up %d: %v", i, err)
		}
		if _, err := Promote(ctx, cfgOf(rs[0], "shoal")); err != nil {
			t.Fatalf("promote %d: %v", i, err)
		}
		if _, _, err := Demote(ctx, cfgOf(rs[0], "shoal")); err != nil {
			t.Fatalf("demote %d right after the promote: %v", i, err)
		}
	}
	if err := probe.PingContext(ctx); err != nil {
		t.Errorf("the held connection was lost: %v", err)
	}
}
