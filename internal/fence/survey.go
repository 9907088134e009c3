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

// A failover (docs/consensus.md, "Failover") asks each candidate replica
// to stand still before it picks the most advanced: Survey stops the
// replication IO thread, waits for the SQL thread to apply what was
// received, and reads the positions. ResumeReplication undoes it when no
// failover follows. MariaDB GTID replication only.

// Survey is what a replica reports once it stands still.
type Survey struct {
	Flavor     string
	ServerID   uint32
	ReadOnly   bool
	Replica    bool   // a replication source is configured
	SQLRunning bool   // Slave_SQL_Running = Yes after the drain
	SQLError   string // "errno: message" when the SQL thread stopped on an error
	IOPos      string // Gtid_IO_Pos: what the IO thread had received when stopped
	BinlogPos  string // @@gtid_binlog_pos after the drain
	SlavePos   string // @@gtid_slave_pos after the drain
	CurrentPos string // @@gtid_current_pos after the drain
	Drained    bool   // the SQL thread applied IOPos within the wait
}

// ErrNotMariaDB is Survey's error on a MySQL server.
var ErrNotMariaDB = errors.New("automatic failover supports MariaDB GTID replication only (this server is MySQL)")

// Survey stops the replication IO thread (never the SQL thread; and it
// never starts the IO thread again, which would make MariaDB drop the
// relay logs not yet applied), waits up to drain for the SQL thread to
// apply everything received (MASTER_GTID_WAIT of Gtid_IO_Pos), and reads
// the positions. A server that is not a replica answers its positions
// with Replica false. The whole is bounded by drain plus DefaultTimeout.
func (a *Actuator) Survey(ctx context.Context, drain time.Duration) (Survey, error) {
	var sv Survey
	err := a.do(ctx, drain+DefaultTimeout, func(ctx context.Context, conn *sql.Conn) error {
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
		if st != nil {
			sv.Replica = true
			if _, err := conn.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
				return fmt.Errorf("STOP SLAVE IO_THREAD: %w", err)
			}
			// Read again: what was received is final now.
			if st, err = replicaStatus(ctx, conn); err != nil {
				return err
			}
			if st == nil {
				return errors.New("SHOW SLAVE STATUS: the replica's status went away")
			}
			sv.IOPos = strings.ReplaceAll(st["Gtid_IO_Pos"], "\n", "")
			if err := a.drain(ctx, conn, &sv, st, drain); err != nil {
				return err
			}
		}
		return readPositions(ctx, conn, &sv)
	})
	return sv, err
}

// drain waits until the SQL thread applied sv.IOPos, unless it stopped on
// an error, and reads its state after.
func (a *Actuator) drain(ctx context.Context, conn *sql.Conn, sv *Survey, st map[string]string, wait time.Duration) error {
	if err := sqlThread(st, sv); err != nil || sv.SQLError != "" || !sv.SQLRunning {
		return err // nothing applies what was received: no wait
	}
	if err := CheckGTID(sv.IOPos); err != nil {
		return fmt.Errorf("Gtid_IO_Pos: %w", err)
	}
	if sv.IOPos == "" {
		sv.Drained = sv.SQLRunning
		return nil
	}
	var rc sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", sv.IOPos, wait.Seconds()).Scan(&rc); err != nil {
		return fmt.Errorf("MASTER_GTID_WAIT(%s): %w", sv.IOPos, err)
	}
	if !rc.Valid {
		return fmt.Errorf("MASTER_GTID_WAIT(%s): NULL", sv.IOPos)
	}
	st, err := replicaStatus(ctx, conn)
	if err != nil {
		return err
	}
	if st != nil {
		if err := sqlThread(st, sv); err != nil {
			return err
		}
	}
	sv.Drained = rc.Int64 == 0 && sv.SQLError == ""
	return nil
}

// sqlThread reads the SQL thread's state from a SHOW SLAVE STATUS row.
func sqlThread(st map[string]string, sv *Survey) error {
	running, ok := st["Slave_SQL_Running"]
	if !ok {
		return errors.New("SHOW SLAVE STATUS: no column Slave_SQL_Running")
	}
	sv.SQLRunning = strings.EqualFold(running, "Yes")
	sv.SQLError = ""
	if errno := st["Last_SQL_Errno"]; errno != "" && errno != "0" {
		sv.SQLError = errno + ": " + st["Last_SQL_Error"]
	}
	return nil
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
// is left alone.
func (a *Actuator) ResumeReplication(ctx context.Context) error {
	return a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
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
// server is not a replica.
func replicaStatus(ctx context.Context, conn *sql.Conn) (map[string]string, error) {
	rows, err := conn.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, fmt.Errorf("SHOW SLAVE STATUS: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("SHOW SLAVE STATUS: %w", err)
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("SHOW SLAVE STATUS: %w", err)
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = string(vals[i])
	}
	if out["Master_Host"] == "" {
		return nil, rows.Err()
	}
	return out, rows.Err()
}
