package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
)

// DSN is a go-sql-driver/mysql DSN for root over TCP (root has no password
// and exists for 127.0.0.1).
func (s *Server) DSN() string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = s.Addr()
	c.Timeout = 5 * time.Second
	return c.FormatDSN()
}

// SocketDSN is a DSN for root over the unix socket.
func (s *Server) SocketDSN() string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "unix"
	c.Addr = s.Socket()
	c.Timeout = 5 * time.Second
	return c.FormatDSN()
}

// DB returns a small pool of root connections over the unix socket, for
// admin statements. It survives Kill and Restart (dead connections are
// replaced). Do not close it; the Server does.
func (s *Server) DB() *sql.DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		c := mysql.NewConfig()
		c.User = "root"
		c.Net = "unix"
		c.Addr = s.cfg.Socket()
		c.Timeout = 5 * time.Second
		c.Logger = &mysql.NopLogger{} // restarts make the driver chatty
		conn, err := mysql.NewConnector(c)
		if err != nil {
			panic(fmt.Sprintf("mariadbtest: connector: %v", err)) // static config: cannot happen
		}
		s.db = sql.OpenDB(conn)
		s.db.SetMaxOpenConns(4)
		s.db.SetMaxIdleConns(2)
	}
	return s.db
}

// Exec runs one admin statement as root over the socket (bounded to 30 s).
// It is safe to call from any goroutine.
func (s *Server) Exec(query string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.DB().ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("%s: exec %q: %w", s.Addr(), query, err)
	}
	return nil
}

// MustExec is Exec that fails the test on error.
func (s *Server) MustExec(query string, args ...any) {
	s.t.Helper()
	if err := s.Exec(query, args...); err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
}

func pingOnce(db *sql.DB, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return db.PingContext(ctx)
}

// Replication account created on a primary by ReplicateFrom.
const (
	ReplUser     = "repl"
	ReplPassword = "replpw"
)

// ReplicateFrom makes s a GTID replica of primary (over primary.Host(),
// 127.0.0.1 by default) and waits until both replication threads run. The
// repl user, for the replica's Host(), is created on the primary
// with sql_log_bin=0 (it must not get GTIDs of its own), read_only=ON is set
// at once and persisted in s's my.cnf so that it survives Restart, and
// replication itself restarts with the server (master.info is in the datadir).
func (s *Server) ReplicateFrom(primary *Server) {
	s.t.Helper()
	must := func(srv *Server, q string, args ...any) {
		s.t.Helper()
		if err := srv.Exec(q, args...); err != nil {
			s.t.Fatalf("mariadbtest: replicate %s from %s: %v", s.Addr(), primary.Addr(), err)
		}
	}
	// One connection, so that sql_log_bin=0 applies to the CREATE and GRANT.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := primary.DB().Conn(ctx)
	if err != nil {
		s.t.Fatalf("mariadbtest: connect to primary %s: %v", primary.Addr(), err)
	}
	for _, q := range []string{
		"SET SESSION sql_log_bin=0",
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'", ReplUser, s.Host(), ReplPassword),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'%s'", ReplUser, s.Host()),
		"SET SESSION sql_log_bin=1",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			s.t.Fatalf("mariadbtest: on primary %s: %q: %v", primary.Addr(), q, err)
		}
	}
	conn.Close()

	s.SetReadOnly(true)
	must(s, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
		"MASTER_USE_GTID=slave_pos, "+replicationTimers,
		primary.Host(), primary.Port(), ReplUser, ReplPassword))
	must(s, "START SLAVE")
	s.WaitReplicating(30 * time.Second)
}

// replicationTimers are the connect retry and heartbeat period of the
// replicas this package sets up.
const replicationTimers = "MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1"

// SetReplicationTimers gives a replica the connect retry and heartbeat
// period of the replicas this package sets up (1 s each), restarting its
// replication: what an operator does by hand for a server a tool re-pointed
// with the server's defaults (MariaDB: MASTER_CONNECT_RETRY 60 s).
func (s *Server) SetReplicationTimers() {
	s.t.Helper()
	for _, q := range []string{"STOP SLAVE", "CHANGE MASTER TO " + replicationTimers, "START SLAVE"} {
		s.MustExec(q)
	}
}

// SetReadOnly sets read_only at once and persists it in the server's
// my.cnf, so that a Restart keeps it (a switched-over primary must not come
// back writable, nor a promoted replica read-only).
func (s *Server) SetReadOnly(on bool) {
	s.t.Helper()
	s.PersistReadOnly(on)
	v := "OFF"
	if on {
		v = "ON"
	}
	if err := s.Exec("SET GLOBAL read_only=" + v); err != nil {
		s.t.Fatalf("mariadbtest: set read_only=%s on %s: %v", v, s.Addr(), err)
	}
}

// PersistReadOnly writes read_only to the server's my.cnf only, for the
// next start: what an operator does after a tool changed read_only at
// runtime (SET GLOBAL does not survive a restart).
func (s *Server) PersistReadOnly(on bool) {
	s.t.Helper()
	s.mu.Lock()
	s.cfg.ReadOnly = on
	err := s.cfg.Write()
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
}

// PersistSetting adds a line to the [mariadbd] section of the server's
// file ("rpl_semi_sync_slave_enabled=ON"), for its next start; the running
// server is not changed.
func (s *Server) PersistSetting(line string) {
	s.t.Helper()
	s.mu.Lock()
	s.cfg.Extra = append(s.cfg.Extra, line)
	err := s.cfg.Write()
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
}

// WaitReplicating waits until both replication threads report Yes.
func (s *Server) WaitReplicating(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		st, err := s.SlaveStatus()
		if err == nil {
			io, sqlRunning := st["Slave_IO_Running"], st["Slave_SQL_Running"]
			if io == "Yes" && sqlRunning == "Yes" {
				return
			}
			last = fmt.Sprintf("IO=%s SQL=%s io_error=%q sql_error=%q", io, sqlRunning, st["Last_IO_Error"], st["Last_SQL_Error"])
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("mariadbtest: %s not replicating after %s: %s", s.Addr(), timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SlaveStatus returns the first row of SHOW SLAVE STATUS by column name
// (NULL as ""), or an empty map when the server is not a replica.
func (s *Server) SlaveStatus() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := launch.FirstRow(ctx, s.DB(), "SHOW SLAVE STATUS")
	if err != nil {
		return nil, fmt.Errorf("%s: show slave status: %w", s.Addr(), err)
	}
	return st, nil
}
