//go:build bench

package bench

// Helpers of suites 3 and 4 (mysql_test.go): the pool-change hook and its
// log, HAProxy pollers, the HAProxy instances with their own mysql-check,
// an open-loop client in a host's namespace, and server status counters.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/test/e2e"
)

// ---------------------------------------------------------------------------
// pool-change hook

// myPoolHookScript is the pool-change handler every agent runs: it appends
// one line per event to the file given as its argument, "<unix-nanos when
// the handler started> <the JSON document from stdin>".
const myPoolHookScript = `#!/bin/sh
T=$(date +%s%N)
J=$(cat)
printf '%s %s\n' "$T" "$J" >> "$1"
`

// myWritePoolHook writes the handler into dir and returns its path.
func myWritePoolHook(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "pool-hook.sh")
	if err := os.WriteFile(p, []byte(myPoolHookScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// myHookRec is one pool-change event as an agent's handler logged it.
type myHookRec struct {
	Handler time.Time // when the handler process started (date +%s%N)
	Event   time.Time // the event's "time": when the agent computed the pool
	Node    string
	Readers []string
	Writers []string
	Out     map[string]string // name → reason
}

type myHookDoc struct {
	Version int       `json:"version"`
	Event   string    `json:"event"`
	Time    time.Time `json:"time"`
	Node    string    `json:"node"`
	Data    struct {
		Pool struct {
			Clusters []struct {
				Name    string `json:"name"`
				Writers []struct {
					Name string `json:"name"`
				} `json:"writers"`
				Readers []struct {
					Name string `json:"name"`
				} `json:"readers"`
				Out []struct {
					Name   string `json:"name"`
					Reason string `json:"reason"`
				} `json:"out"`
			} `json:"clusters"`
		} `json:"pool"`
	} `json:"data"`
}

// myReadHookLog parses a handler log; a missing file is no events.
func myReadHookLog(path string) ([]myHookRec, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []myHookRec
	for _, line := range strings.Split(string(b), "\n") {
		ts, js, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		var d myHookDoc
		if err := json.Unmarshal([]byte(js), &d); err != nil || d.Event != "pool-change" {
			continue // a line still being written
		}
		r := myHookRec{Handler: time.Unix(0, ns), Event: d.Time, Node: d.Node, Out: map[string]string{}}
		for _, c := range d.Data.Pool.Clusters {
			for _, n := range c.Writers {
				r.Writers = append(r.Writers, n.Name)
			}
			for _, n := range c.Readers {
				r.Readers = append(r.Readers, n.Name)
			}
			for _, n := range c.Out {
				r.Out[n.Name] = n.Reason
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// myFirstOut is the first event at or after since in which node is in no
// role.
func myFirstOut(recs []myHookRec, node string, since time.Time) (myHookRec, bool) {
	for _, r := range recs {
		if r.Event.Before(since) {
			continue
		}
		if !slices.Contains(r.Readers, node) && !slices.Contains(r.Writers, node) {
			return r, true
		}
	}
	return myHookRec{}, false
}

// ---------------------------------------------------------------------------
// HAProxy state pollers

// myHXChange is a server's state as first seen by a poll.
type myHXChange struct {
	At    time.Time // when the answer showing it arrived
	State string    // up, down, starting, stopping, maint, drain
}

// myHXPoller polls an HAProxy's `show servers state` every interval and keeps
// every state change of every server ("backend/server").
type myHXPoller struct {
	hx    *e2e.HAProxy
	every time.Duration

	mu      sync.Mutex
	changes map[string][]myHXChange
	polls   int
	errs    int
	lastErr string
	maxGap  time.Duration
}

func myStartPoller(t testing.TB, ctx context.Context, hx *e2e.HAProxy, every time.Duration) *myHXPoller {
	p := &myHXPoller{hx: hx, every: every, changes: map[string][]myHXChange{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last time.Time
		for {
			p.poll(&last)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(wg.Wait)
	return p
}

func (p *myHXPoller) poll(last *time.Time) {
	resp, err := p.hx.Command("show servers state")
	at := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	if !last.IsZero() {
		p.maxGap = max(p.maxGap, at.Sub(*last))
	}
	*last = at
	if err != nil {
		p.errs++
		p.lastErr = err.Error()
		return
	}
	for key, st := range myParseServersState(resp) {
		ch := p.changes[key]
		if len(ch) == 0 || ch[len(ch)-1].State != st {
			p.changes[key] = append(ch, myHXChange{At: at, State: st})
		}
	}
}

// myParseServersState maps "backend/server" to up, down, starting, stopping
// (the operational state, set by health checks), or maint / drain when the
// administrative state (set through the runtime API) overrides it.
func myParseServersState(resp string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(resp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
		if len(f) < 7 || strings.HasPrefix(f[0], "#") {
			continue
		}
		op, err1 := strconv.Atoi(f[5])
		admin, err2 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil {
			continue
		}
		st := map[int]string{0: "down", 1: "starting", 2: "up", 3: "stopping"}[op]
		switch {
		case admin&0x01 != 0 || admin&0x02 != 0 || admin&0x20 != 0: // as e2e.HAProxy.States
			st = "maint"
		case admin&0x08 != 0 || admin&0x10 != 0:
			st = "drain"
		}
		out[f[1]+"/"+f[3]] = st
	}
	return out
}

// first is the first change of key to one of states at or after since.
func (p *myHXPoller) first(key string, since time.Time, states ...string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.changes[key] {
		if !c.At.Before(since) && slices.Contains(states, c.State) {
			return c.At, true
		}
	}
	return time.Time{}, false
}

// current is key's latest state ("" before the first poll).
func (p *myHXPoller) current(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := p.changes[key]
	if len(ch) == 0 {
		return ""
	}
	return ch[len(ch)-1].State
}

// stats: polls, failed polls, longest gap between two answers.
func (p *myHXPoller) stats() (polls, errs int, maxGap time.Duration, lastErr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls, p.errs, p.maxGap, p.lastErr
}

// ---------------------------------------------------------------------------
// HAProxy with its own mysql-check

// myCheckHX is an HAProxy in the app host's namespace that routes to the
// replicas with HAProxy's own `option mysql-check`, for comparison.
type myCheckHX struct {
	Label   string // table label
	Backend string
	Port    int
	HX      *e2e.HAProxy // for Command (Sock); not started by e2e
	cfg     string
	host    *e2e.Host

	mu   sync.Mutex
	proc *e2e.Proc
}

// myCheckUser is the passwordless account HAProxy's mysql-check logs in with.
const myCheckUser = "haproxy_check"

// myCheckHAProxyConfig renders a check HAProxy's configuration; its one
// listener uses `balance <balance>` (e.g. leastconn, roundrobin).
func myCheckHAProxyConfig(sock, backend string, port int, servers []*e2e.DBHost, checkOpts, balance string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    stats socket %s mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    option redispatch
    retries 2
listen %s
    bind 127.0.0.1:%d
    balance %s
    option mysql-check user %s
`, sock, backend, port, balance, myCheckUser)
	for _, d := range servers {
		fmt.Fprintf(&b, "    server %s %s %s\n", d.Name, d.Addr(), checkOpts)
	}
	return b.String()
}

// myNewCheckHX writes the configuration and starts the HAProxy.
func myNewCheckHX(t testing.TB, dir string, h *e2e.Host, label, backend string, port int, servers []*e2e.DBHost, checkOpts, balance string) *myCheckHX {
	t.Helper()
	d := filepath.Join(dir, backend)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(d, "admin.sock")
	c := &myCheckHX{Label: label, Backend: backend, Port: port, HX: &e2e.HAProxy{Host: h, Dir: d, Sock: sock},
		cfg: filepath.Join(d, "haproxy.cfg"), host: h}
	if err := os.WriteFile(c.cfg, []byte(myCheckHAProxyConfig(sock, backend, port, servers, checkOpts, balance)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Start(t)
	t.Cleanup(c.Stop)
	return c
}

// Start starts (or restarts) the HAProxy and waits for its runtime API.
func (c *myCheckHX) Start(t testing.TB) {
	t.Helper()
	bin := "/usr/sbin/haproxy"
	if _, err := os.Stat(bin); err != nil {
		bin = "haproxy"
	}
	p, err := e2e.StartProc("haproxy "+c.Backend, c.host.NS, filepath.Join(c.HX.Dir, "haproxy.log"), nil, bin, "-f", c.cfg, "-db")
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.HX.Command("show info"); err == nil {
			return
		} else if time.Now().After(deadline) || p.Exited() {
			log, _ := os.ReadFile(p.LogPath)
			t.Fatalf("haproxy %s: runtime API not up: %v\n%s", c.Backend, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the HAProxy (by its PID).
func (c *myCheckHX) Stop() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// ---------------------------------------------------------------------------
// open-loop client

// myOp is one client operation.
type myOp struct {
	Start time.Time
	Dur   time.Duration
	Err   string
}

func (o myOp) End() time.Time { return o.Start.Add(o.Dur) }

// Client timeouts: the e2e client's (DSN timeout, readTimeout and
// writeTimeout 2 s, 3 s per operation).
const (
	myClientIOTimeout = 2 * time.Second
	myClientOpTimeout = 3 * time.Second
)

// myLoadClient starts one operation (new connection, SELECT @@server_id,
// close) every `every`, open loop: an operation that hangs does not delay
// the next one, as with many application threads or processes.
type myLoadClient struct {
	db     *sql.DB
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	ops []myOp
}

func myStartLoadClient(d *e2e.NSDialer, port int, every time.Duration) (*myLoadClient, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = e2e.AppUser, e2e.AppPassword
	cfg.Net, cfg.Addr = "tcp", fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = myClientIOTimeout, myClientIOTimeout, myClientIOTimeout
	cfg.DialFunc = d.DialContext
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(0) // a new connection per operation
	ctx, cancel := context.WithCancel(context.Background())
	c := &myLoadClient{db: db, cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				c.one(ctx)
			}()
		}
	}()
	return c, nil
}

func (c *myLoadClient) one(ctx context.Context) {
	op := myOp{Start: time.Now()}
	qctx, cancel := context.WithTimeout(ctx, myClientOpTimeout)
	var id int64
	err := c.db.QueryRowContext(qctx, "SELECT @@server_id").Scan(&id)
	cancel()
	op.Dur = time.Since(op.Start)
	if ctx.Err() != nil {
		return // stopped
	}
	if err != nil {
		op.Err = err.Error()
	}
	c.mu.Lock()
	c.ops = append(c.ops, op)
	c.mu.Unlock()
}

// Stop ends the client. Idempotent.
func (c *myLoadClient) Stop() {
	c.cancel()
	c.wg.Wait()
	c.db.Close()
}

// Ops returns the operations for which keep is true.
func (c *myLoadClient) Ops(keep func(myOp) bool) []myOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []myOp
	for _, o := range c.ops {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// server counters

// myServerCounters reads Questions and Connections over conn (one statement,
// no arguments: no prepared statement, so it counts as one question).
func myServerCounters(ctx context.Context, conn *sql.Conn) (questions, connections int64, err error) {
	rows, err := conn.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions','Connections')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, 0, err
		}
		switch strings.ToLower(name) {
		case "questions":
			questions = v
		case "connections":
			connections = v
		}
	}
	return questions, connections, rows.Err()
}

// myCheckStatuses maps each server of backend to its last check status
// (`show stat` column check_status, e.g. L7OK, L4CON, L7STS).
func myCheckStatuses(hx *e2e.HAProxy, backend string) (map[string]string, error) {
	resp, err := hx.Command("show stat")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(resp), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
		return nil, fmt.Errorf("show stat: unexpected answer %q", resp)
	}
	head := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
	col := slices.Index(head, "check_status")
	if col < 0 {
		return nil, fmt.Errorf("show stat: no check_status column")
	}
	out := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > col && f[0] == backend && f[1] != "FRONTEND" && f[1] != "BACKEND" {
			out[f[1]] = f[col]
		}
	}
	return out, nil
}

// myUserConnections counts the sessions of user on the server.
func myUserConnections(ctx context.Context, conn *sql.Conn, user string) (int, error) {
	var n int
	err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='"+user+"'").Scan(&n)
	return n, err
}
