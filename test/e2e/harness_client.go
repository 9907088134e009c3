//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Op is one client operation: connect through HAProxy, query, close.
type Op struct {
	Start    time.Time
	Dur      time.Duration
	ServerID int64
	Err      string
}

// Client sends queries through an app host's HAProxy at a fixed pace, from
// inside the app host's namespace, one new connection per operation (the
// classic connect/query/close pattern), and records every operation.
type Client struct {
	db     *sql.DB
	query  string
	every  time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	ops []Op
}

// appConfig is the application's connection to HAProxy's port on h, dialed
// in h's namespace, with a 2 s connect timeout and rw as the read and write
// timeouts.
func appConfig(h *Host, port int, rw time.Duration) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = AppUser, AppPassword
	cfg.Net, cfg.Addr = "tcp", fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, rw, rw
	cfg.DialFunc = h.dialer.DialContext
	cfg.Logger = &mysql.NopLogger{}
	return cfg
}

// appDB is the application's connection pool to HAProxy's port on h, with
// 2 s timeouts and a new connection per operation.
func appDB(h *Host, port int) (*sql.DB, error) {
	conn, err := mysql.NewConnector(appConfig(h, port, 2*time.Second))
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(0) // a new connection per operation
	return db, nil
}

// StartClient starts a client of 127.0.0.1:port in h's namespace running
// query (which must return one integer, e.g. SELECT @@server_id) every
// `every`. Stop it with Stop.
func StartClient(h *Host, port int, query string, every time.Duration) (*Client, error) {
	db, err := appDB(h, port)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{db: db, query: query, every: every, cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c, nil
}

func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		op := Op{Start: time.Now()}
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := c.db.QueryRowContext(qctx, c.query).Scan(&op.ServerID)
		cancel()
		op.Dur = time.Since(op.Start)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			op.Err = err.Error()
		}
		c.mu.Lock()
		c.ops = append(c.ops, op)
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop ends the client and closes its pool. Idempotent.
func (c *Client) Stop() {
	c.cancel()
	<-c.done
	c.db.Close()
}

// Ops returns the operations started in [from, to].
func (c *Client) Ops(from, to time.Time) []Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Op
	for _, op := range c.ops {
		if !op.Start.Before(from) && !op.Start.After(to) {
			out = append(out, op)
		}
	}
	return out
}

// QueryOnce runs query (returning one integer) once through 127.0.0.1:port
// in h's namespace.
func QueryOnce(h *Host, port int, query string) (int64, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = AppUser, AppPassword
	cfg.Net, cfg.Addr = "tcp", fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Timeout, cfg.ReadTimeout = 2*time.Second, 2*time.Second
	cfg.DialFunc = h.dialer.DialContext
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return 0, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var v int64
	err = db.QueryRowContext(ctx, query).Scan(&v)
	return v, err
}
