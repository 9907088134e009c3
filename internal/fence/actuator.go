package fence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The actuator's pool: at most two connections (the probe's account may
// be allowed only two, and the probe keeps one), one kept idle between
// actions so that the steps of a switchover reuse it, none older than
// connMaxLifetime.
const (
	maxOpenConns    = 2
	maxIdleConns    = 1
	connMaxLifetime = time.Minute
)

// ErrClosed is an action's error on a closed Actuator.
var ErrClosed = errors.New("actuator closed")

// Actuator acts on one server (the local one, with the probe's account):
// it fences and unfences it, and takes the steps of a switchover. It keeps
// one small pool and the server's flavor, read on first use. Its methods
// are safe for concurrent use; each action runs on one connection of the
// pool, bounded by the Config's Timeout. An agent keeps one Actuator per
// server: two would each keep a connection of the account's.
type Actuator struct {
	cfg     Config // Timeout set
	conns   *countingConnector
	db      *sql.DB
	openErr error // building the connector failed: every action's error

	mu        sync.Mutex
	closed    bool
	flavor    string // "" until read
	flavorGen uint64 // conns.dials when flavor was read

	detections atomic.Uint64 // flavor reads, for tests
}

// New returns the actuator of the server cfg names. It connects on the
// first action, not before.
//
// The flavor is read on the first action and kept while the pool dials no
// new connection: the first action after a dial (the server restarted and
// every connection was lost, or one reached connMaxLifetime) reads it
// again, on the connection it runs on. A server replaced at the same
// address (MariaDB by MySQL, say) can only be reached over a new
// connection, so a stale flavor never outlives its connections, and the
// read costs one query on top of a connection's handshake.
func New(cfg Config) *Actuator {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	a := &Actuator{cfg: cfg}
	mc := mysql.NewConfig()
	mc.User, mc.Passwd = cfg.User, cfg.Password
	mc.Net, mc.Addr = cfg.Network, cfg.Addr
	// Timeout bounds the dial and every write; every action's context
	// bounds the whole of it, the handshake and every statement included
	// (the driver closes the connection when the context ends). No read
	// timeout: CatchUp waits longer than Timeout on purpose.
	mc.Timeout, mc.WriteTimeout = cfg.Timeout, cfg.Timeout
	mc.ConnectionAttributes = "program_name:shoal-fence"
	// The driver puts arguments into the statement (escaped): CHANGE
	// MASTER cannot be prepared, and a tiny pool gains nothing from
	// server-side prepared statements.
	mc.InterpolateParams = true
	c, err := mysql.NewConnector(mc)
	if err != nil {
		a.openErr = fmt.Errorf("mysql connector for %s: %w", cfg.Addr, err)
		return a
	}
	a.conns = &countingConnector{Connector: c}
	a.db = sql.OpenDB(a.conns)
	a.db.SetMaxOpenConns(maxOpenConns)
	a.db.SetMaxIdleConns(maxIdleConns)
	a.db.SetConnMaxLifetime(connMaxLifetime)
	return a
}

// Close closes the pool; actions after it fail with ErrClosed. Closing
// again does nothing.
func (a *Actuator) Close() error {
	a.mu.Lock()
	was := a.closed
	a.closed = true
	a.mu.Unlock()
	if was || a.db == nil {
		return nil
	}
	return a.db.Close()
}

// do runs f on one connection of the pool, the whole bounded by timeout,
// and puts the connection back.
func (a *Actuator) do(ctx context.Context, timeout time.Duration, f func(context.Context, *sql.Conn) error) error {
	if a.openErr != nil {
		return a.openErr
	}
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return fmt.Errorf("%s: %w", a.cfg.Addr, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := a.db.Conn(ctx)
	// The account may be allowed two connections (the probe keeps one),
	// and the server counts a connection closed a moment ago for a little
	// while longer: try again for up to a second.
	for i := 0; err != nil && isUserLimit(err) && i < 10 && ctx.Err() == nil; i++ {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		conn, err = a.db.Conn(ctx)
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", a.cfg.Addr, err)
	}
	defer conn.Close()
	return f(ctx, conn)
}

// flavorOn is the server's flavor: the one kept, unless the pool dialled
// since it was read; then it is read on conn.
func (a *Actuator) flavorOn(ctx context.Context, conn *sql.Conn) (string, error) {
	gen := a.conns.dials.Load()
	a.mu.Lock()
	fl, fresh := a.flavor, a.flavor != "" && a.flavorGen == gen
	a.mu.Unlock()
	if fresh {
		return fl, nil
	}
	a.detections.Add(1)
	fl, err := flavor(ctx, conn)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.flavor, a.flavorGen = fl, gen
	a.mu.Unlock()
	return fl, nil
}

// countingConnector counts the connections it opened.
type countingConnector struct {
	driver.Connector
	dials atomic.Uint64
}

func (c *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err == nil {
		c.dials.Add(1)
	}
	return conn, err
}

// errUserLimit is ER_USER_LIMIT_REACHED: the account's
// MAX_USER_CONNECTIONS are in use.
const errUserLimit = 1226

func isUserLimit(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errUserLimit
}
