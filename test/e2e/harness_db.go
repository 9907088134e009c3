//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// Accounts on every server.
const (
	ProbeUser     = "shoal" // the agents' probe, from 127.0.0.1 in the host
	ProbePassword = "e2e-probe-pw"
	AppUser       = "app" // the client through HAProxy, from any test host
	AppPassword   = "e2e-app-pw"
)

// DBHost is a database host: a mariadbd in the host's namespace, bound to
// 0.0.0.0:3306 there (so the agent probes 127.0.0.1 and routers reach
// 198.51.100.x:3306), and a shoal agent probing it.
type DBHost struct {
	Name   string
	Host   *Host
	Server *mariadbtest.Server
	Agent  *Agent
}

// Addr is the address routers send clients to.
func (d *DBHost) Addr() string { return fmt.Sprintf("%s:%d", d.Host.IP, MySQLPort) }

func startServer(t testing.TB, name string, h *Host) *mariadbtest.Server {
	t.Helper()
	s := mariadbtest.Start(t, mariadbtest.Options{
		Netns:       h.NS,
		BindAddress: "0.0.0.0",
		Host:        h.IP,
		Port:        MySQLPort,
	})
	key := h.NS + "/mariadbd"
	reg.addPIDFunc(key, s.PID)
	reg.addDir(s.Dir())
	t.Cleanup(func() {
		reg.removePIDFunc(key)
		reg.removeDir(s.Dir())
	})
	return s
}

// setupAccounts creates, on the primary and binlogged so that they
// replicate, the probe and client accounts, a replication account any test
// host may use (for switchovers), and the client's table; then waits until
// every replica has them.
// clientSchema is the probe's account, the client's account and the
// client's table, as statements for the primary (or the first Galera node).
func clientSchema() []string {
	return []string{
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS 2", ProbeUser, ProbePassword),
		// SLAVE MONITOR for the probe; READ_ONLY ADMIN, CONNECTION ADMIN
		// and PROCESS for fencing; REPLICATION SLAVE ADMIN and RELOAD for
		// shoal switchover (docs/operations.md).
		fmt.Sprintf("GRANT SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS, REPLICATION SLAVE ADMIN, RELOAD ON *.* TO '%s'@'127.0.0.1'", ProbeUser),
		fmt.Sprintf("CREATE USER '%s'@'%s%%' IDENTIFIED BY '%s'", AppUser, Subnet, AppPassword),
		"CREATE DATABASE e2e",
		"CREATE TABLE e2e.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
		fmt.Sprintf("GRANT SELECT, INSERT ON e2e.* TO '%s'@'%s%%'", AppUser, Subnet),
	}
}

func setupAccounts(t testing.TB, primary *DBHost, replicas []*DBHost) {
	t.Helper()
	for _, q := range append(clientSchema(),
		fmt.Sprintf("CREATE USER '%s'@'%s%%' IDENTIFIED BY '%s'", mariadbtest.ReplUser, Subnet, mariadbtest.ReplPassword),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'%s%%'", mariadbtest.ReplUser, Subnet),
	) {
		primary.Server.MustExec(q)
	}
	pos := gtidPos(t, primary.Server)
	for _, r := range replicas {
		waitGTID(t, r.Server, pos, 30*time.Second)
	}
}

func gtidPos(t testing.TB, s *mariadbtest.Server) string {
	t.Helper()
	pos, err := readGTIDPos(s)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	return pos
}

// readGTIDPos returns s's gtid_binlog_pos.
func readGTIDPos(s *mariadbtest.Server) (string, error) {
	var pos string
	if err := s.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return "", fmt.Errorf("gtid_binlog_pos of %s: %w", s.Addr(), err)
	}
	return pos, nil
}

// waitGTID waits until s has applied pos.
func waitGTID(t testing.TB, s *mariadbtest.Server, pos string, timeout time.Duration) {
	t.Helper()
	if err := reachGTID(s, pos, timeout); err != nil {
		t.Fatalf("e2e: %v", err)
	}
}

// reachGTID waits up to timeout until s has applied pos.
func reachGTID(s *mariadbtest.Server, pos string, timeout time.Duration) error {
	var res sql.NullInt64
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	err := s.DB().QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, timeout.Seconds()).Scan(&res)
	if err != nil || !res.Valid || res.Int64 != 0 {
		return fmt.Errorf("%s did not reach GTID %s within %s (result %v, err %v)", s.Addr(), pos, timeout, res, err)
	}
	return nil
}

// Switchover makes next the primary: the old primary turns read_only
// (persisted in its my.cnf, as next's read_only=OFF, so restarts keep them)
// first (so there is never a moment with two writable servers), next
// catches up, stops replicating and turns writable, and every other server
// replicates from next. It returns the time next became writable.
func (c *Cluster) Switchover(t testing.TB, next *DBHost) time.Time {
	t.Helper()
	old := c.Primary()
	old.Server.SetReadOnly(true)
	waitGTID(t, next.Server, gtidPos(t, old.Server), 30*time.Second)
	next.Server.MustExec("STOP SLAVE")
	next.Server.MustExec("RESET SLAVE ALL")
	next.Server.SetReadOnly(false)
	writable := time.Now()
	c.mu.Lock()
	c.primary = next
	c.mu.Unlock()
	for _, d := range c.DBs {
		if d == next {
			continue
		}
		pos := "slave_pos"
		if d == old {
			pos = "current_pos" // its own binlog holds its history
		} else {
			d.Server.MustExec("STOP SLAVE")
		}
		d.Server.MustExec(fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
			"MASTER_USE_GTID=%s, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1",
			next.Host.IP, MySQLPort, mariadbtest.ReplUser, mariadbtest.ReplPassword, pos))
		d.Server.MustExec("START SLAVE")
	}
	for _, d := range c.DBs {
		if d != next {
			d.Server.WaitReplicating(30 * time.Second)
		}
	}
	return writable
}
