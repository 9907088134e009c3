package probe

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// connector opens the probe's connections: one at a time, through a
// database/sql pool capped at one connection that the probe holds as a
// *sql.Conn, so database/sql never redials behind its back. It remembers the
// socket of the connection it dialed so the probe can watch it while idle.
type connector struct {
	db *sql.DB

	mu     sync.Mutex
	dialed net.Conn
}

func newConnector(cfg Config, logger *slog.Logger) (*connector, error) {
	c := &connector{}
	mc := mysql.NewConfig()
	mc.User, mc.Passwd = cfg.User, cfg.Password
	mc.Net, mc.Addr = cfg.network()
	// Socket-level bounds: dial, and every read and write (the handshake
	// included). The check's context bounds the whole check at Timeout; the
	// socket deadlines are a backstop a quarter later, so that a hung server
	// normally ends in a clean context error rather than in the driver's
	// "invalid connection".
	mc.Timeout = cfg.Timeout
	mc.ReadTimeout = cfg.socketTimeout()
	mc.WriteTimeout = cfg.socketTimeout()
	mc.ConnectionAttributes = "program_name:shoal-probe"
	mc.Logger = driverLogger{logger}
	mc.DialFunc = c.dial
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysql connector: %w", err)
	}
	c.db = sql.OpenDB(conn)
	c.db.SetMaxOpenConns(1)
	c.db.SetMaxIdleConns(1)
	c.db.SetConnMaxLifetime(0)
	c.db.SetConnMaxIdleTime(0)
	return c, nil
}

func (c *connector) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.dialed = nc
	c.mu.Unlock()
	return nc, nil
}

// open connects and reads the server's version and capabilities.
func (c *connector) open(ctx context.Context) (*session, error) {
	c.mu.Lock()
	c.dialed = nil
	c.mu.Unlock()
	sc, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	nc := c.dialed
	c.dialed = nil
	c.mu.Unlock()
	s := &session{sc: sc, nc: nc}
	if s.info, err = readServerInfo(ctx, sc); err != nil {
		s.discard()
		return nil, err
	}
	return s, nil
}

func (c *connector) close() error { return c.db.Close() }

// session is one connection to the server.
type session struct {
	sc   *sql.Conn
	nc   net.Conn // the socket under sc; nil if unknown (then no idle watch)
	info serverInfo
}

// discard throws a broken (or suspect) connection away for good.
func (s *session) discard() {
	// Returning ErrBadConn from Raw makes database/sql close the driver
	// connection instead of pooling it.
	_ = s.sc.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.sc.Close()
	if s.nc != nil {
		_ = s.nc.Close()
	}
}

// release returns a healthy connection to the pool, which closes it politely
// (COM_QUIT) when the probe shuts down.
func (s *session) release() { _ = s.sc.Close() }

// driverLogger sends the mysql driver's messages to slog at debug level;
// the probe reports what matters itself.
type driverLogger struct{ l *slog.Logger }

func (d driverLogger) Print(v ...any) {
	d.l.Debug("mysql driver", "detail", fmt.Sprint(v...))
}
