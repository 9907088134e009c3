//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Session is one client connection held open through an app host's
// HAProxy listener, dialed from inside the app host's namespace, as an
// application's connection pool keeps one: a database/sql Conn pinned to a
// single driver connection, never redialed. A statement after HAProxy shut
// the session down (or the server closed it) fails; it never silently runs
// on a new connection.
type Session struct {
	db   *sql.DB
	conn *sql.Conn
	// ConnID is the server's CONNECTION_ID() at open; ServerID the
	// @@server_id of the server HAProxy routed the connection to.
	ConnID, ServerID int64
}

// OpenSession connects to 127.0.0.1:port in h's namespace as the app user
// and reads the connection's id and server.
func OpenSession(h *Host, port int) (*Session, error) {
	// Per-operation timeouts only: an idle connection has no deadline.
	connector, err := mysql.NewConnector(appConfig(h, port, 5*time.Second))
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open a session on 127.0.0.1:%d in %s: %w", port, h.NS, err)
	}
	s := &Session{db: db, conn: conn}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@server_id").Scan(&s.ConnID, &s.ServerID); err != nil {
		s.Close()
		return nil, fmt.Errorf("session on 127.0.0.1:%d in %s: %w", port, h.NS, err)
	}
	return s, nil
}

// Write inserts a row on the session's connection and returns the
// connection id and server id the connection is on afterwards.
func (s *Session) Write(ctx context.Context) (connID, serverID int64, err error) {
	if _, err := s.conn.ExecContext(ctx, "INSERT INTO e2e.t (v) VALUES (27)"); err != nil {
		return 0, 0, fmt.Errorf("insert: %w", err)
	}
	return s.Read(ctx)
}

// Read returns the connection id and server id of the session's
// connection, read on it.
func (s *Session) Read(ctx context.Context) (connID, serverID int64, err error) {
	if err := s.conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@server_id").Scan(&connID, &serverID); err != nil {
		return 0, 0, fmt.Errorf("select: %w", err)
	}
	return connID, serverID, nil
}

// Close closes the connection and its pool.
func (s *Session) Close() {
	if s.conn != nil {
		s.conn.Close()
	}
	s.db.Close()
}

// SinkCommand is one HAProxy runtime API command an agent's HAProxy sink
// logged as sent ("haproxy command sent").
type SinkCommand struct {
	At      time.Time
	Command string // e.g. "set server mysql_rw/db1 state maint"
}

// Harmful reports whether the command takes a server out or cuts its
// sessions: state maint or drain, or shutdown sessions.
func (c SinkCommand) Harmful() bool {
	return strings.HasSuffix(c.Command, " state maint") || strings.HasSuffix(c.Command, " state drain") ||
		strings.HasPrefix(c.Command, "shutdown sessions")
}

// SinkCommands returns the HAProxy commands the agent logged as sent at or
// after from (its log is in the text format: time=... msg="haproxy command
// sent" ... command="...").
func (a *Agent) SinkCommands(from time.Time) ([]SinkCommand, error) {
	f, err := os.Open(a.LogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []SinkCommand
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="haproxy command sent"`) {
			continue
		}
		at, ok := logTime(line)
		if !ok || at.Before(from) {
			continue
		}
		_, rest, found := strings.Cut(line, " command=")
		if !found {
			continue
		}
		cmd := rest
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			cmd, _ = strconv.Unquote(q)
		} else if i := strings.IndexByte(rest, ' '); i >= 0 {
			cmd = rest[:i]
		}
		out = append(out, SinkCommand{At: at, Command: cmd})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, sc.Err()
}

// logTime parses the time= field that starts a text-format log line.
func logTime(line string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	v, _, _ := strings.Cut(rest, " ")
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}
