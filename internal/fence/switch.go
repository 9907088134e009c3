package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
)

// The steps of a planned switchover as each db agent takes them on its
// own server (docs/consensus.md, "Switchover"): the old writer is demoted
// (Demote: read-only, clients killed, its GTID position read), the target
// waits for that position (CatchUp), is promoted once it holds the new
// term (Promote), and the other servers replicate from it (Repoint). Each
// runs on one connection of the Actuator's pool, like Fence, with the
// probe's account,
// which then needs REPLICATION SLAVE ADMIN and RELOAD (RESET REPLICA) on
// MariaDB, REPLICATION_SLAVE_ADMIN and RELOAD on MySQL, besides the
// fencing grants.

// Demote sets the server read-only and kills its client connections
// (Fence), then reads its GTID position: what the new writer must have
// applied before it takes writes.
// It uses one connection: the probe's account may be allowed only two
// (the probe keeps one).
func (a *Actuator) Demote(ctx context.Context) (res Result, gtid string, err error) {
	err = a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		if err := a.fenceOn(ctx, conn, &res); err != nil {
			return err
		}
		gtid, err = position(ctx, conn, res.Flavor)
		return err
	})
	return res, gtid, err
}

// Demote demotes the server (Actuator.Demote), with an Actuator built for
// the one action.
func Demote(ctx context.Context, cfg Config) (Result, string, error) {
	a := New(cfg)
	defer a.Close()
	return a.Demote(ctx)
}

// position is the server's own GTID position: every transaction it has
// logged (MariaDB gtid_binlog_pos, MySQL gtid_executed).
func position(ctx context.Context, conn *sql.Conn, flavor string) (string, error) {
	q := "SELECT @@GLOBAL.gtid_binlog_pos"
	if flavor == string(probe.FlavorMySQL) {
		q = "SELECT @@GLOBAL.gtid_executed"
	}
	var pos sql.NullString
	if err := conn.QueryRowContext(ctx, q).Scan(&pos); err != nil {
		return "", fmt.Errorf("%s: %w", q, err)
	}
	return strings.ReplaceAll(pos.String, "\n", ""), nil
}

// ErrCatchUpTimeout is CatchUp's error when the position was not reached
// in time.
var ErrCatchUpTimeout = errors.New("replication did not reach the position in time")

// CatchUp waits, up to wait, until the server's replication has applied
// gtid (MariaDB MASTER_GTID_WAIT, MySQL WAIT_FOR_EXECUTED_GTID_SET). An
// empty position (a server that never logged a transaction) is reached
// at once. The whole is bounded by wait plus DefaultTimeout, not by the
// Config's Timeout.
func (a *Actuator) CatchUp(ctx context.Context, gtid string, wait time.Duration) error {
	if err := CheckGTID(gtid); err != nil {
		return err
	}
	if gtid == "" {
		return nil
	}
	return a.do(ctx, wait+DefaultTimeout, func(ctx context.Context, conn *sql.Conn) error {
		fl, err := a.flavorOn(ctx, conn)
		if err != nil {
			return err
		}
		// Both return 0 when reached; MariaDB -1 and MySQL 1 on timeout.
		q := "SELECT MASTER_GTID_WAIT(?, ?)"
		if fl == string(probe.FlavorMySQL) {
			q = "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)"
		}
		var rc sql.NullInt64
		if err := conn.QueryRowContext(ctx, q, gtid, wait.Seconds()).Scan(&rc); err != nil {
			return fmt.Errorf("wait for GTID %s: %w", gtid, err)
		}
		if !rc.Valid || rc.Int64 != 0 {
			return fmt.Errorf("wait for GTID %s for %s: %w", gtid, wait, ErrCatchUpTimeout)
		}
		return nil
	})
}

// CatchUp waits for gtid (Actuator.CatchUp), with an Actuator built for
// the one action.
func CatchUp(ctx context.Context, cfg Config, gtid string, wait time.Duration) error {
	a := New(cfg)
	defer a.Close()
	return a.CatchUp(ctx, gtid, wait)
}

// CheckGTID checks that s looks like a GTID position or set (digits, the
// separators and, for MySQL, server UUIDs): it goes into a query as a
// parameter, but a position from another host is checked before use.
func CheckGTID(s string) error {
	if len(s) > 4096 {
		return fmt.Errorf("GTID position of %d bytes, more than 4096", len(s))
	}
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F', r == '-', r == ',', r == ':':
		default:
			return fmt.Errorf("GTID position %.40q: character %q at %d", s, r, i)
		}
	}
	return nil
}

// Timers are a replica's connect retry and heartbeat period (seconds;
// zero: unknown, the server's default is kept).
type Timers struct {
	ConnectRetry    int
	HeartbeatPeriod float64
}

// Promote makes the server the writer: it stops replication and forgets
// it (RESET REPLICA ALL, so that it never resumes from the old writer),
// then sets read_only (and super_read_only) off. The caller makes sure
// this server holds the cluster's writer term first. It returns the
// server's flavor and the replication timers it had as a replica, which
// the servers re-pointed to it take over (a former writer would otherwise
// get the server's defaults: a 60 s connect retry).
func (a *Actuator) Promote(ctx context.Context) (string, Timers, error) {
	var fl string
	var tm Timers
	err := a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		var err error
		if fl, err = a.flavorOn(ctx, conn); err != nil {
			return err
		}
		tm = replicaTimers(ctx, conn, fl)
		stmts := []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL read_only=OFF"}
		if fl == string(probe.FlavorMySQL) {
			stmts = []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only=OFF", "SET GLOBAL read_only=OFF"}
		}
		for _, q := range stmts {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	return fl, tm, err
}

// replicaTimers reads the server's replication timers; zero for what it
// cannot read (no replication configured, no grant): they are a courtesy
// to the servers re-pointed later, not a condition of the promotion.
func replicaTimers(ctx context.Context, conn *sql.Conn, flavor string) Timers {
	var tm Timers
	st, err := firstRow(ctx, conn, "SHOW REPLICA STATUS")
	if err != nil || st == nil {
		return tm
	}
	for _, col := range []string{"Connect_Retry", "Source_Connect_Retry"} {
		if v, err := strconv.Atoi(st[col]); err == nil && v > 0 {
			tm.ConnectRetry = v
		}
	}
	q := "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'SLAVE_HEARTBEAT_PERIOD'"
	if flavor == string(probe.FlavorMySQL) {
		q = "SELECT HEARTBEAT_INTERVAL FROM performance_schema.replication_connection_configuration LIMIT 1"
	}
	var hb sql.NullFloat64
	if err := conn.QueryRowContext(ctx, q).Scan(&hb); err == nil && hb.Valid && hb.Float64 > 0 {
		tm.HeartbeatPeriod = hb.Float64
	}
	return tm
}

// Promote makes the server the writer (Actuator.Promote), with an
// Actuator built for the one action.
func Promote(ctx context.Context, cfg Config) (string, error) {
	a := New(cfg)
	defer a.Close()
	fl, _, err := a.Promote(ctx)
	return fl, err
}

// Source is where Repoint makes a server replicate from, and with which
// account.
type Source struct {
	Addr string // host:port of the new writer
	// User and Password, when User is set, replace the server's
	// replication account; otherwise the one it has is kept (a replica's).
	User, Password string
	// FormerWriter says the server was the writer: it resumes from
	// everything it holds (MariaDB MASTER_USE_GTID=current_pos), not from
	// what it last replicated (slave_pos).
	FormerWriter bool
	// Timers, when set, replace the server's connect retry and heartbeat
	// period (the new writer's own as a replica).
	Timers Timers
}

// ErrNoReplicationAccount is Repoint's error for a server that has no
// replication account and was given none.
var ErrNoReplicationAccount = errors.New("no replication account: the server never replicated and none is configured")

// Repoint makes the server replicate from src: it stops replication,
// changes the source (keeping the account unless src gives one), and
// starts it again.
func (a *Actuator) Repoint(ctx context.Context, src Source) error {
	host, portStr, err := net.SplitHostPort(src.Addr)
	if err != nil {
		return fmt.Errorf("replication source %q: %w", src.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("replication source %q: bad port", src.Addr)
	}
	return a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		fl, err := a.flavorOn(ctx, conn)
		if err != nil {
			return err
		}
		if src.User == "" {
			user, err := replicationUser(ctx, conn)
			if err != nil {
				return err
			}
			if user == "" {
				return ErrNoReplicationAccount
			}
		}
		change, args := changeSource(fl, host, port, src)
		for _, st := range []struct {
			q    string
			args []any
		}{{"STOP REPLICA", nil}, {change, args}, {"START REPLICA", nil}} {
			if _, err := conn.ExecContext(ctx, st.q, st.args...); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(st.q, ",", 2)[0], err)
			}
		}
		return nil
	})
}

// Repoint makes the server replicate from src (Actuator.Repoint), with an
// Actuator built for the one action.
func Repoint(ctx context.Context, cfg Config, src Source) error {
	a := New(cfg)
	defer a.Close()
	return a.Repoint(ctx, src)
}

// changeSource is the statement that points replication at host:port, and
// its arguments (interpolated by the driver, which escapes them).
func changeSource(flavor, host string, port int, src Source) (string, []any) {
	if flavor == string(probe.FlavorMySQL) {
		q, args := "CHANGE REPLICATION SOURCE TO SOURCE_HOST=?, SOURCE_PORT=?, SOURCE_AUTO_POSITION=1", []any{host, port}
		if src.User != "" {
			q += ", SOURCE_USER=?, SOURCE_PASSWORD=?"
			args = append(args, src.User, src.Password)
		}
		return withTimers(q, args, "SOURCE", src.Timers)
	}
	use := "slave_pos"
	if src.FormerWriter {
		use = "current_pos"
	}
	q, args := "CHANGE MASTER TO MASTER_HOST=?, MASTER_PORT=?, MASTER_USE_GTID="+use, []any{host, port}
	if src.User != "" {
		q += ", MASTER_USER=?, MASTER_PASSWORD=?"
		args = append(args, src.User, src.Password)
	}
	q, args = withTimers(q, args, "MASTER", src.Timers)
	return q, args
}

// maxHeartbeatPeriod is the longest heartbeat period MySQL and MariaDB
// take, in seconds.
const maxHeartbeatPeriod = 4294967

// withTimers adds the timers that are set to a CHANGE statement (prefix
// MASTER or SOURCE); the driver interpolates the numbers.
func withTimers(q string, args []any, prefix string, tm Timers) (string, []any) {
	if tm.ConnectRetry > 0 {
		q += ", " + prefix + "_CONNECT_RETRY=?"
		args = append(args, tm.ConnectRetry)
	}
	if tm.HeartbeatPeriod > 0 && tm.HeartbeatPeriod <= maxHeartbeatPeriod {
		// A decimal literal written here (the driver could write 1e+06):
		// a number of ours, bounded, not a string from elsewhere.
		q += ", " + prefix + "_HEARTBEAT_PERIOD=" + strconv.FormatFloat(tm.HeartbeatPeriod, 'f', 3, 64)
	}
	return q, args
}

// replicationUser is the account the server's replication uses; "" when
// it has none (it never replicated, or RESET REPLICA ALL).
func replicationUser(ctx context.Context, conn *sql.Conn) (string, error) {
	st, err := firstRow(ctx, conn, "SHOW REPLICA STATUS")
	if err != nil {
		return "", err
	}
	if u, ok := st["Master_User"]; ok {
		return u, nil
	}
	return st["Source_User"], nil
}

// firstRow is the first row of q by column name (NULL as ""); nil when q
// returns no row.
func firstRow(ctx context.Context, conn *sql.Conn, q string) (map[string]string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		return nil, nil
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = string(vals[i])
	}
	return out, nil
}
