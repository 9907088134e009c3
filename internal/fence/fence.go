package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/internal/probe"
)

// Config says how to reach the local server: the probe's address and
// account (FromProbe).
type Config struct {
	Network  string // "tcp" or "unix"
	Addr     string
	User     string
	Password string
	// Timeout bounds one action (a fencing attempt, a switchover step),
	// connecting included (default DefaultTimeout); CatchUp and Survey are
	// bounded by their wait plus DefaultTimeout.
	Timeout time.Duration
}

// FromProbe is the fencing Config of the probe's: the same server and
// account, timeout bounding a fencing attempt.
func FromProbe(pc probe.Config, timeout time.Duration) Config {
	pc = pc.WithDefaults()
	c := Config{Network: "tcp", Addr: pc.Target(), User: pc.User, Password: pc.Password, Timeout: timeout}
	if pc.Socket != "" {
		c.Network = "unix"
	}
	return c
}

// DefaultTimeout bounds an action when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Result is what one fencing attempt did; on error, what it did before the
// error.
type Result struct {
	Flavor   string // "mariadb" or "mysql"
	ReadOnly bool   // read_only (and super_read_only on MySQL) is now on
	Killed   int    // client connections killed
	Kept     int    // connections left alone (Keep)
	Gone     int    // connections that ended before they could be killed
}

// MySQL error numbers Fence tells apart.
const (
	errUnknownThread = 1094 // ER_NO_SUCH_THREAD: it ended by itself
)

// Fence sets the server read-only, then kills its client connections. It
// builds an Actuator for the one action and closes it before it returns.
func Fence(ctx context.Context, cfg Config) (Result, error) {
	a := New(cfg)
	defer a.Close()
	return a.Fence(ctx)
}

// Fence sets the server read-only, then kills its client connections but
// the actuator's own (Keep). The error says which step failed, with the
// server's error (a missing privilege names it); res says what was done
// before it.
func (a *Actuator) Fence(ctx context.Context) (res Result, err error) {
	err = a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		return a.fenceOn(ctx, conn, &res)
	})
	return res, err
}

// fenceOn fences on conn, filling in res.
func (a *Actuator) fenceOn(ctx context.Context, conn *sql.Conn, res *Result) error {
	var err error
	if res.Flavor, err = a.flavorOn(ctx, conn); err != nil {
		return err
	}
	if err := setReadOnly(ctx, conn, res.Flavor); err != nil {
		return err
	}
	res.ReadOnly = true
	return killClients(ctx, conn, a.cfg.User, res)
}

// Unfence makes the server writable again (Actuator.Unfence), with an
// Actuator built for the one action.
func Unfence(ctx context.Context, cfg Config) error {
	a := New(cfg)
	defer a.Close()
	return a.Unfence(ctx)
}

// Unfence makes the server writable again: read_only=OFF (which turns
// super_read_only off too on MySQL). The agent does it only for a server
// it fenced because its lease ran out, once contact is back and it still
// holds the same term (docs/consensus.md, "Fencing").
func (a *Actuator) Unfence(ctx context.Context) error {
	return a.do(ctx, a.cfg.Timeout, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, "SET GLOBAL read_only=OFF"); err != nil {
			return fmt.Errorf("SET GLOBAL read_only=OFF on %s: %w", a.cfg.Addr, err)
		}
		return nil
	})
}

// flavor reads the server's flavor: MariaDB has no super_read_only.
func flavor(ctx context.Context, conn *sql.Conn) (string, error) {
	var version, comment string
	if err := conn.QueryRowContext(ctx, "SELECT @@version, @@version_comment").Scan(&version, &comment); err != nil {
		return "", fmt.Errorf("read the server version: %w", err)
	}
	return string(probe.FlavorOf(version, comment)), nil
}

// setReadOnly sets read_only on MariaDB, super_read_only (and with it
// read_only) on MySQL.
func setReadOnly(ctx context.Context, conn *sql.Conn, flavor string) error {
	q := "SET GLOBAL read_only=ON"
	if flavor == string(probe.FlavorMySQL) {
		q = "SET GLOBAL super_read_only=ON"
	}
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// killClients kills every connection Keep does not keep. Without PROCESS
// the process list shows only the account's own connections, so it
// checks that privilege first: fencing that kills nothing because it sees
// nothing must not pass for a success.
func killClients(ctx context.Context, conn *sql.Conn, self string, res *Result) error {
	// SHOW ENGINE INNODB STATUS needs PROCESS, through a role as well.
	if _, err := conn.ExecContext(ctx, "SHOW ENGINE INNODB STATUS"); err != nil {
		return fmt.Errorf("list connections: PROCESS privilege needed to see other accounts' connections: %w", err)
	}
	conns, err := processList(ctx, conn)
	if err != nil {
		return err
	}
	var failed int
	var first error
	for _, c := range conns {
		if keep, _ := Keep(c, self); keep {
			res.Kept++
			continue
		}
		_, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", c.ID))
		var me *mysql.MySQLError
		switch {
		case err == nil:
			res.Killed++
		case errors.As(err, &me) && me.Number == errUnknownThread:
			res.Gone++
		default:
			if failed++; first == nil {
				first = fmt.Errorf("kill connection %d of %s: %w", c.ID, c.User, err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d connections not killed: %w", failed, failed+res.Killed+res.Gone, first)
	}
	return nil
}

// processList reads every connection but this one.
func processList(ctx context.Context, conn *sql.Conn) ([]Conn, error) {
	rows, err := conn.QueryContext(ctx, "SELECT ID, COALESCE(USER, ''), COALESCE(COMMAND, '') FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()")
	if err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	defer rows.Close()
	var out []Conn
	for rows.Next() {
		var c Conn
		if err := rows.Scan(&c.ID, &c.User, &c.Command); err != nil {
			return nil, fmt.Errorf("list connections: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	return out, nil
}
