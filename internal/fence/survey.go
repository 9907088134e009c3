package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
)

// Survey is what a replica reports when a failover (docs/consensus.md,
// "Failover") asks it to stand still before it picks the most advanced:
// its replication IO thread stopped, everything it received applied.
type Survey struct {
	Flavor     string
	ServerID   uint32
	ReadOnly   bool
	Replica    bool   // a replication source is configured
	SQLRunning bool   // Slave_SQL_Running = Yes after the drain
	SQLError   string // "errno: message" when the SQL thread stopped on an error; "" otherwise
	IOPos      string // Gtid_IO_Pos: what the IO thread had received when it was stopped
	BinlogPos  string // @@gtid_binlog_pos after the drain
	SlavePos   string // @@gtid_slave_pos after the drain
	CurrentPos string // @@gtid_current_pos after the drain
	Drained    bool   // the SQL thread applied IOPos within the wait
	// Timers are its replication's connect retry and heartbeat period
	// (zero: unknown), which the servers re-pointed to it take.
	Timers Timers
}

// ErrNotMariaDB is Survey's error on a MySQL server.
var ErrNotMariaDB = errors.New("automatic failover supports MariaDB GTID replication only (this server is MySQL)")

// drainSlice is how long one MASTER_GTID_WAIT of the drain lasts: between
// two, Survey looks whether the SQL thread stopped, and then waits no more.
const drainSlice = time.Second

// Survey stops the replication IO thread (never the SQL thread; and it
// never starts the IO thread again, which would make MariaDB drop the
// relay logs not yet applied), waits up to drain for the SQL thread to
// apply everything received (MASTER_GTID_WAIT of Gtid_IO_Pos), and reads
// the positions. It does not wait for a SQL thread that is stopped, on an
// error or not, nor once it stops. A server that is not a replica answers
// its positions with Replica false. The whole runs on one connection,
// bounded by drain plus DefaultTimeout, like CatchUp.
func (a *Actuator) Survey(ctx context.Context, drain time.Duration) (Survey, error) {
	drain = max(drain, 0)
	var sv Survey
	err := a.do(ctx, drain+DefaultTimeout, func(ctx context.Context, conn *sql.Conn) error {
		if err := a.lookOn(ctx, conn, &sv); err != nil {
			return err
		}
		if sv.Replica {
			sv.Timers = replicaTimers(ctx, conn, sv.Flavor)
			if _, err := conn.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
				return fmt.Errorf("STOP SLAVE IO_THREAD: %w", err)
			}
			if err := drainRelay(ctx, conn, &sv, drain); err != nil {
				return err
			}
		}
		return readPositions(ctx, conn, &sv)
	})
	return sv, err
}

// Positions reads what Survey reads but stops and waits for nothing: the
// flavor, whether a replication source is configured, the GTID positions,
// server_id and read_only. A returning old writer is judged by it.
func (a *Actuator) Positions(ctx context.Context) (Survey, error) {
	var sv Survey
	err := a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		if err := a.lookOn(ctx, conn, &sv); err != nil {
			return err
		}
		return readPositions(ctx, conn, &sv)
	})
	return sv, err
}

// lookOn reads the flavor (MariaDB only: ErrNotMariaDB) and whether a
// replication source is configured into sv.
func (a *Actuator) lookOn(ctx context.Context, conn *sql.Conn, sv *Survey) error {
	fl, err := a.flavorOn(ctx, conn)
	if err != nil {
		return err
	}
	sv.Flavor = fl
	if fl == string(probe.FlavorMySQL) {
		return ErrNotMariaDB
	}
	st, err := replicaStatus(ctx, conn)
	if err != nil {
		return err
	}
	sv.Replica = st != nil
	return nil
}

// drainRelay reads what the stopped IO thread received and waits, up to
// drain, until the SQL thread applied it.
func drainRelay(ctx context.Context, conn *sql.Conn, sv *Survey, drain time.Duration) error {
	// Read again: what was received is final now.
	if err := readThreads(ctx, conn, sv, true); err != nil {
		return err
	}
	if sv.SQLError != "" {
		return nil // stopped on an event it cannot apply: not drained
	}
	if sv.IOPos == "" {
		sv.Drained = true // nothing received
		return nil
	}
	deadline := time.Now().Add(drain)
	for {
		// A stopped SQL thread applies nothing more: a wait of 0 says
		// whether it had applied everything.
		wait := min(time.Until(deadline), drainSlice)
		if wait < 0 || !sv.SQLRunning {
			wait = 0
		}
		var rc sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", sv.IOPos, wait.Seconds()).Scan(&rc); err != nil {
			return fmt.Errorf("MASTER_GTID_WAIT(%s): %w", sv.IOPos, err)
		}
		if !rc.Valid || (rc.Int64 != 0 && rc.Int64 != -1) {
			return fmt.Errorf("MASTER_GTID_WAIT(%s): returned %v, want 0 or -1", sv.IOPos, rc)
		}
		if err := readThreads(ctx, conn, sv, false); err != nil {
			return err
		}
		if rc.Int64 == 0 || wait == 0 || sv.SQLError != "" || !sv.SQLRunning {
			sv.Drained = rc.Int64 == 0 && sv.SQLError == ""
			return nil
		}
	}
}

// readThreads reads the replication threads' state into sv: the SQL
// thread's, and with io the IO thread's position too.
func readThreads(ctx context.Context, conn *sql.Conn, sv *Survey, io bool) error {
	st, err := replicaStatus(ctx, conn)
	if err != nil {
		return err
	}
	if st == nil {
		return errors.New("SHOW SLAVE STATUS: the server stopped being a replica during the survey")
	}
	ioPos, sqlRunning, sqlError, err := parseThreads(st)
	if err != nil {
		return err
	}
	if io {
		sv.IOPos = ioPos
	}
	sv.SQLRunning, sv.SQLError = sqlRunning, sqlError
	return nil
}

// parseThreads reads a SHOW SLAVE STATUS row: what the IO thread received
// (newlines dropped, checked with CheckGTID), whether the SQL thread runs,
// and its error ("errno: message"; "" when Last_SQL_Errno is 0).
func parseThreads(st map[string]string) (ioPos string, sqlRunning bool, sqlError string, err error) {
	for _, c := range []string{"Gtid_IO_Pos", "Slave_SQL_Running", "Last_SQL_Errno", "Last_SQL_Error"} {
		if _, ok := st[c]; !ok {
			return "", false, "", fmt.Errorf("SHOW SLAVE STATUS: no column %s", c)
		}
	}
	ioPos = strings.ReplaceAll(st["Gtid_IO_Pos"], "\n", "")
	if err := CheckGTID(ioPos); err != nil {
		return "", false, "", fmt.Errorf("SHOW SLAVE STATUS: Gtid_IO_Pos: %w", err)
	}
	if errno := st["Last_SQL_Errno"]; errno != "" && errno != "0" {
		sqlError = errno + ": " + st["Last_SQL_Error"]
	}
	return ioPos, strings.EqualFold(st["Slave_SQL_Running"], "Yes"), sqlError, nil
}

// readPositions reads the server's GTID positions, server_id and
// read_only.
func readPositions(ctx context.Context, conn *sql.Conn, sv *Survey) error {
	var binlog, slave, current sql.NullString
	var id uint64
	var ro int
	q := "SELECT @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_slave_pos, @@GLOBAL.gtid_current_pos, @@GLOBAL.server_id, @@GLOBAL.read_only"
	if err := conn.QueryRowContext(ctx, q).Scan(&binlog, &slave, &current, &id, &ro); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	clean := func(s sql.NullString) string { return strings.ReplaceAll(s.String, "\n", "") }
	sv.BinlogPos, sv.SlavePos, sv.CurrentPos = clean(binlog), clean(slave), clean(current)
	sv.ServerID, sv.ReadOnly = uint32(id), ro != 0
	return nil
}

// ResumeReplication starts the IO thread again (START SLAVE IO_THREAD)
// after a failover that did not go ahead. A server that is not a replica
// is left alone, and so is a MySQL server, whose Survey stops nothing.
func (a *Actuator) ResumeReplication(ctx context.Context) error {
	return a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		fl, err := a.flavorOn(ctx, conn)
		if err != nil || fl == string(probe.FlavorMySQL) {
			return err
		}
		st, err := replicaStatus(ctx, conn)
		if err != nil || st == nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, "START SLAVE IO_THREAD"); err != nil {
			return fmt.Errorf("START SLAVE IO_THREAD: %w", err)
		}
		return nil
	})
}

// replicaStatus is the SHOW SLAVE STATUS row by column name; nil when the
// server is not a replica (no row, or no Master_Host).
func replicaStatus(ctx context.Context, conn *sql.Conn) (map[string]string, error) {
	st, err := firstRow(ctx, conn, "SHOW SLAVE STATUS")
	if err != nil || st == nil {
		return nil, err
	}
	host, ok := st["Master_Host"]
	if !ok {
		return nil, errors.New("SHOW SLAVE STATUS: no column Master_Host")
	}
	if host == "" {
		return nil, nil
	}
	return st, nil
}
