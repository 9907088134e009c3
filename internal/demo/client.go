package demo

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ClientRate is the load client's operations per second on each side
// (writes through the read-write port, reads through the read-only one).
const ClientRate = 20

// erReadOnly is MariaDB's "running with --read-only" error.
const erReadOnly = 1290

// Second is one second of the load client, as written to client.jsonl.
type Second struct {
	Time        time.Time `json:"time"` // end of the second
	Writes      int       `json:"writes"`
	WriteErrors int       `json:"write_errors"`
	ReadOnly    int       `json:"read_only"` // writes refused with ER 1290 (counted in write_errors too)
	// WriteCut and ReadCut count the errors on a connection closed under
	// the client (cutError), counted in write_errors and read_errors too.
	WriteCut   int            `json:"write_cut,omitempty"`
	Reads      int            `json:"reads"`
	ReadErrors int            `json:"read_errors"`
	ReadCut    int            `json:"read_cut,omitempty"`
	WritesBy   map[string]int `json:"writes_by"` // node (server_id) that took each write
	ReadsBy    map[string]int `json:"reads_by"`
	LastError  string         `json:"last_error,omitempty"`
}

type tally struct {
	mu sync.Mutex
	s  Second
}

func newSecond() Second {
	return Second{WritesBy: map[string]int{}, ReadsBy: map[string]int{}}
}

func (t *tally) add(write bool, server string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil && write:
		t.s.WriteErrors++
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me) && me.Number == erReadOnly:
			t.s.ReadOnly++
		case cutError(err):
			t.s.WriteCut++
		}
		t.s.LastError = "write: " + err.Error()
	case err != nil:
		t.s.ReadErrors++
		if cutError(err) {
			t.s.ReadCut++
		}
		t.s.LastError = "read: " + err.Error()
	case write:
		t.s.Writes++
		t.s.WritesBy[server]++
	default:
		t.s.Reads++
		t.s.ReadsBy[server]++
	}
}

// erConnectionKilled is MariaDB's "Connection was killed" (KILL CONNECTION
// of a connection waiting for its next statement).
const erConnectionKilled = 1927

// cutError reports whether err says the connection was closed under the
// client: go-sql-driver's "invalid connection" (ErrInvalidConn, what it
// returns when the server or HAProxy closed the connection: the real cause
// goes to its logger, which the client silences), a reset, an EOF, ER
// 1927, or a refused connect.
func cutError(err error) bool {
	var me *mysql.MySQLError
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.As(err, &me) && me.Number == erConnectionKilled
}

func (t *tally) take(now time.Time) Second {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.Time = now
	t.s = newSecond()
	return s
}

func (l *Layout) clientDB(addr, pw string) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User = appUser
	c.Passwd = pw
	c.Net = "tcp"
	c.Addr = addr
	c.DBName = appDB
	c.Timeout = time.Second
	c.ReadTimeout = 2 * time.Second
	c.WriteTimeout = 2 * time.Second
	c.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	// A new connection per operation, like a connect/query/close
	// application: each one goes where HAProxy sends it now.
	db.SetMaxIdleConns(0)
	db.SetMaxOpenConns(4)
	return db, nil
}

// RunClient is the load client: ClientRate INSERTs per second through the
// read-write port and as many reads through the read-only port, each on a
// new connection, reporting every second to out (one line) and to
// DIR/client.jsonl, until ctx ends.
func (l *Layout) RunClient(ctx context.Context, out io.Writer) error {
	pw, err := l.readSecret("demo.password")
	if err != nil {
		return err
	}
	rw, err := l.clientDB(l.RWAddr(), pw)
	if err != nil {
		return err
	}
	defer rw.Close()
	ro, err := l.clientDB(l.ROAddr(), pw)
	if err != nil {
		return err
	}
	defer ro.Close()
	jf, err := os.OpenFile(l.Path("client.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer jf.Close()

	fmt.Fprintf(out, "shoal-demo client: %d INSERT/s through %s (writer), %d SELECT/s through %s (readers), a new connection each\n",
		ClientRate, l.RWAddr(), ClientRate, l.ROAddr())
	fmt.Fprintf(out, "each line: ops/s, errors, and which server answered: dbN = @@server_id N, @@port %d+N\n", l.PortBase)
	var t tally
	t.s = newSecond()
	var wg sync.WaitGroup
	for _, write := range []bool{true, false} {
		db := ro
		if write {
			db = rw
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / ClientRate)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				server, err := clientOp(ctx, db, write)
				if ctx.Err() != nil {
					return
				}
				t.add(write, server, err)
			}
		}()
	}
	sec := time.NewTicker(time.Second)
	defer sec.Stop()
	enc := json.NewEncoder(jf)
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case now := <-sec.C:
			s := t.take(now)
			fmt.Fprintln(out, formatSecond(s, l.PortBase))
			if err := enc.Encode(s); err != nil {
				return fmt.Errorf("write %s: %w", l.Path("client.jsonl"), err)
			}
		}
	}
}

// clientOp does one write or read and says which server answered.
func clientOp(ctx context.Context, db *sql.DB, write bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if write {
		if _, err := conn.ExecContext(ctx, "INSERT INTO ops (server_id, port, at) VALUES (@@server_id, @@port, NOW(6))"); err != nil {
			return "", err
		}
	}
	var id, port int
	var maxID sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT @@server_id, @@port, (SELECT MAX(id) FROM ops)").Scan(&id, &port, &maxID); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s[%d@%d]", NodeOfServerID(id), id, port), nil
}

func formatSecond(s Second, base int) string {
	by := func(m map[string]int) string {
		if len(m) == 0 {
			return "-"
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
		}
		return strings.Join(parts, " ")
	}
	line := fmt.Sprintf("%s  writes %2d/s err %d (read-only %d, cut %d) -> %-22s | reads %2d/s err %d -> %s",
		s.Time.Format("15:04:05"), s.Writes, s.WriteErrors, s.ReadOnly, s.WriteCut, by(s.WritesBy), s.Reads, s.ReadErrors, by(s.ReadsBy))
	if s.LastError != "" {
		e := s.LastError
		if len(e) > 100 {
			e = e[:100] + "..."
		}
		line += "  last error: " + e
	}
	return line
}

// ReadSeconds reads DIR/client.jsonl.
func (l *Layout) ReadSeconds() ([]Second, error) {
	f, err := os.Open(l.Path("client.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Second
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s Second
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			continue // a line being written
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// stepErrors are the load client's errors during a tour step.
type stepErrors struct {
	Seconds                   int // the client's seconds counted
	Write, ReadOnly, WriteCut int
	Read, ReadCut             int
}

// describe says what the errors were: writes refused as read-only, and
// operations whose connection was closed under them (cutError).
func (e stepErrors) describe() string {
	var w []string
	if e.ReadOnly > 0 {
		w = append(w, fmt.Sprintf("%d refused as read-only, ER 1290", e.ReadOnly))
	}
	if e.WriteCut > 0 {
		w = append(w, fmt.Sprintf("%d on a connection closed under it, \"invalid connection\"", e.WriteCut))
	}
	if other := e.Write - e.ReadOnly - e.WriteCut; other > 0 && len(w) > 0 {
		w = append(w, fmt.Sprintf("%d other", other))
	}
	out := fmt.Sprintf("%d write errors", e.Write)
	if len(w) > 0 {
		out += " (" + strings.Join(w, "; ") + ")"
	}
	out += fmt.Sprintf(", %d read errors", e.Read)
	if e.ReadCut > 0 {
		out += fmt.Sprintf(" (%d \"invalid connection\")", e.ReadCut)
	}
	return out
}

// clientErrors sums the client's errors in the seconds that overlap
// [from, to].
func (l *Layout) clientErrors(from, to time.Time) stepErrors {
	var e stepErrors
	secs, err := l.ReadSeconds()
	if err != nil {
		return e
	}
	for _, s := range secs {
		if s.Time.Before(from) || s.Time.Add(-time.Second).After(to) {
			continue
		}
		e.Write += s.WriteErrors
		e.ReadOnly += s.ReadOnly
		e.WriteCut += s.WriteCut
		e.Read += s.ReadErrors
		e.ReadCut += s.ReadCut
		e.Seconds++
	}
	return e
}
