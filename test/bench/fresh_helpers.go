//go:build bench

package bench

// Helpers of suite 7 (fresh_test.go): the writer on the primary, the two
// anchors' pollers (a Seconds_Behind_Master rule and a pt-heartbeat
// checker), pt-heartbeat itself, the silent cut of a replication link, and
// the gossip byte counters.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// ---------------------------------------------------------------------------
// writer

// freshWriter inserts one row into fresh.w on the primary every `every` and
// remembers when each insert returned (autocommit: the commit), by row id.
type freshWriter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	at      map[int64]time.Time
	errs    int
	lastErr string
}

// freshSchema is the writer's table, created on the primary.
var freshSchema = []string{
	"CREATE DATABASE IF NOT EXISTS fresh",
	"CREATE TABLE IF NOT EXISTS fresh.w (id BIGINT AUTO_INCREMENT PRIMARY KEY, at BIGINT NOT NULL)",
}

func startFreshWriter(db *sql.DB, every time.Duration) *freshWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &freshWriter{cancel: cancel, at: map[int64]time.Time{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			w.one(ctx, db)
		}
	}()
	return w
}

func (w *freshWriter) one(ctx context.Context, db *sql.DB) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := db.ExecContext(qctx, "INSERT INTO fresh.w (at) VALUES (?)", time.Now().UnixNano())
	var id int64
	if err == nil {
		id, err = res.LastInsertId()
	}
	done := time.Now()
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs++
		w.lastErr = err.Error()
		return
	}
	w.at[id] = done
}

// Stop ends the writer and waits for it. Idempotent.
func (w *freshWriter) Stop() {
	w.cancel()
	w.wg.Wait()
}

// firstAfter is the commit time of the lowest row id above applied: the
// first write a replica that has applied rows up to applied is missing.
func (w *freshWriter) firstAfter(applied int64) (int64, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	best := int64(-1)
	for id := range w.at {
		if id > applied && (best < 0 || id < best) {
			best = id
		}
	}
	if best < 0 {
		return 0, time.Time{}, false
	}
	return best, w.at[best], true
}

// stats is the number of rows written and of failed inserts.
func (w *freshWriter) stats() (rows, errs int, lastErr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.at), w.errs, w.lastErr
}

// rowsBetween is the number of inserts that returned within [from, to].
func (w *freshWriter) rowsBetween(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.at {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// freshApplied is the highest fresh.w id the server has (0 for none).
func freshApplied(db *sql.DB) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var id int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM fresh.w").Scan(&id); err != nil {
		return 0, fmt.Errorf("read fresh.w: %w", err)
	}
	return id, nil
}

// ---------------------------------------------------------------------------
// anchors' pollers

// freshObs is one check of one replica by an anchor.
type freshObs struct {
	At     time.Time // when the answer arrived
	Out    bool
	Detail string
}

// freshPoller runs check on every node every `every` (the anchors' 1 s)
// and keeps the answers.
type freshPoller struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	obs map[string][]freshObs
}

func startFreshPoller(every time.Duration, nodes []string, check func(ctx context.Context, node string) (bool, string)) *freshPoller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &freshPoller{cancel: cancel, obs: map[string][]freshObs{}}
	for _, n := range nodes {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				cctx, ccancel := context.WithTimeout(ctx, every)
				out, detail := check(cctx, n)
				ccancel()
				if ctx.Err() != nil {
					return
				}
				p.mu.Lock()
				p.obs[n] = append(p.obs[n], freshObs{At: time.Now(), Out: out, Detail: detail})
				p.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	return p
}

// Stop ends the polling and waits for it. Idempotent.
func (p *freshPoller) Stop() {
	p.cancel()
	p.wg.Wait()
}

// firstOut is the first answer at or after since that had node out.
func (p *freshPoller) firstOut(node string, since time.Time) (freshObs, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.obs[node] {
		if !o.At.Before(since) && o.Out {
			return o, true
		}
	}
	return freshObs{}, false
}

// inSince reports whether the latest answer about node came at or after
// since and had it in.
func (p *freshPoller) inSince(node string, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	obs := p.obs[node]
	if len(obs) == 0 {
		return false
	}
	last := obs[len(obs)-1]
	return !last.At.Before(since) && !last.Out
}

// latest is node's latest answer, for messages.
func (p *freshPoller) latest(node string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	obs := p.obs[node]
	if len(obs) == 0 {
		return "no answer yet"
	}
	last := obs[len(obs)-1]
	return fmt.Sprintf("out=%v %s at %s", last.Out, last.Detail, last.At.Format("15:04:05.000"))
}

// sbmRule is the rule ProxySQL's monitor (mysql_servers.max_replication_lag,
// a NULL lag shunned) and HAProxy setups with an SBM agent-check apply to
// SHOW SLAVE STATUS: out when Seconds_Behind_Master > maxLag, when it is
// NULL, or when either replication thread is not Yes.
func sbmRule(st map[string]string, maxLag time.Duration) (out bool, detail string) {
	io, sqlT, sbm := st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Seconds_Behind_Master"]
	detail = fmt.Sprintf("io=%s sql=%s sbm=%s", io, sqlT, sbm)
	if len(st) == 0 {
		return true, "not a replica"
	}
	if io != "Yes" || sqlT != "Yes" || sbm == "" {
		return true, detail
	}
	n, err := strconv.ParseInt(sbm, 10, 64)
	if err != nil {
		return true, detail
	}
	return time.Duration(n)*time.Second > maxLag, detail
}

// ---------------------------------------------------------------------------
// pt-heartbeat

// ptSkew is pt-heartbeat's default --skew: its checks subtract half a
// second (the update lands just after each second starts on the primary).
const ptSkew = 500 * time.Millisecond

// ptTSLayout is the ts column pt-heartbeat writes with --utc.
const ptTSLayout = "2006-01-02T15:04:05.999999"

// startPTHeartbeat runs `pt-heartbeat --update --interval 1` against the
// server behind socket (root over the unix socket), writing heartbeat.heartbeat
// (the database must exist). Killed at cleanup.
func startPTHeartbeat(t testing.TB, dir, socket string) *e2e.Proc {
	t.Helper()
	bin, err := exec.LookPath("pt-heartbeat")
	if err != nil {
		t.Fatalf("pt-heartbeat not found (apt-get install -y percona-toolkit; bash test/install-deps.sh installs it): %v", err)
	}
	p, err := e2e.StartProc("pt-heartbeat --update", "", filepath.Join(dir, "pt-heartbeat.log"), nil, bin,
		"--update", "--interval", "1", "--utc", "--create-table", "--database", "heartbeat",
		"--socket", socket, "--user", "root")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// ptLag reads the primary's (serverID) heartbeat row on a replica and
// computes the lag as `pt-heartbeat --check --utc` does: now − ts − skew,
// at least 0.
func ptLag(ctx context.Context, db *sql.DB, serverID int) (time.Duration, error) {
	var ts string
	err := db.QueryRowContext(ctx, "SELECT ts FROM heartbeat.heartbeat WHERE server_id = ?", serverID).Scan(&ts)
	now := time.Now()
	if err != nil {
		return 0, fmt.Errorf("read heartbeat row of server %d: %w", serverID, err)
	}
	at, err := time.ParseInLocation(ptTSLayout, ts, time.UTC)
	if err != nil {
		return 0, fmt.Errorf("heartbeat ts %q: %w", ts, err)
	}
	return max(now.Sub(at)-ptSkew, 0), nil
}

// ptCheck runs `pt-heartbeat --check` once against the replica behind
// socket and returns the lag it printed (seconds).
func ptCheck(socket string, serverID int) (float64, error) {
	out, err := exec.Command("pt-heartbeat", "--check", "--utc", "--database", "heartbeat",
		"--master-server-id", strconv.Itoa(serverID), "--socket", socket, "--user", "root").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pt-heartbeat --check: %w: %q", err, out)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("pt-heartbeat --check printed %q", out)
	}
	return v, nil
}

// ptVersion is `pt-heartbeat --version`'s answer, for the report.
func ptVersion() string {
	out, err := exec.Command("pt-heartbeat", "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// ---------------------------------------------------------------------------
// the silent cut

// hostRule is one iptables rule (without -A/-D) in one host's namespace.
type hostRule struct {
	host *e2e.Host
	args []string
}

// freshCutRules are the iptables INPUT rules that black-hole the
// replication connection between replica and primary (MariaDB's port only:
// gossip and the agents' probes go on): the replica drops what the
// primary's port 3306 sends, the primary drops what the replica sends to
// it. No RST, no ICMP: both ends see silence.
func freshCutRules(replica, primary *e2e.Host) []hostRule {
	port := strconv.Itoa(e2e.MySQLPort)
	return []hostRule{
		{replica, []string{"INPUT", "-s", primary.IP, "-p", "tcp", "--sport", port, "-j", "DROP"}},
		{primary, []string{"INPUT", "-s", replica.IP, "-p", "tcp", "--dport", port, "-j", "DROP"}},
	}
}

// freshCut adds (op "-A") or deletes (op "-D") the cut's rules.
func freshCut(op string, replica, primary *e2e.Host) error {
	for _, r := range freshCutRules(replica, primary) {
		if err := r.host.IPTables(append([]string{op}, r.args...)...); err != nil {
			return fmt.Errorf("cut of %s's replication link (%s): %w", replica.NS, op, err)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// gossip byte counters

// gossipChains are the chains with a counting rule per protocol for the
// gossip port on eth0 (a rule without a target only counts).
var gossipChains = []struct{ chain, dirFlag string }{{"INPUT", "-i"}, {"OUTPUT", "-o"}}

// addGossipCounters adds, in the host's namespace, rules that count the
// bytes of gossip (UDP and TCP, from or to port 7946) in and out of eth0.
func addGossipCounters(h *e2e.Host) error {
	for _, c := range gossipChains {
		for _, proto := range []string{"udp", "tcp"} {
			if err := h.IPTables("-A", c.chain, c.dirFlag, "eth0", "-p", proto, "-m", "multiport", "--ports",
				strconv.Itoa(e2e.GossipPort)); err != nil {
				return err
			}
		}
	}
	return nil
}

// gossipCount is gossip bytes (IP packets, without the Ethernet header)
// in and out of a host, by protocol: UDP carries memberlist's probes and
// broadcasts (tag updates among them), TCP its push-pull state exchanges.
type gossipCount struct{ InUDP, InTCP, OutUDP, OutTCP uint64 }

// gossipBytes is what the counting rules have seen so far.
func gossipBytes(h *e2e.Host) (gossipCount, error) {
	var g gossipCount
	for _, c := range gossipChains {
		raw, err := exec.Command("ip", "netns", "exec", h.NS, "iptables-legacy", "-w", "-L", c.chain, "-v", "-x", "-n").CombinedOutput()
		if err != nil {
			return g, fmt.Errorf("iptables -L %s in %s: %w: %s", c.chain, h.NS, err, raw)
		}
		udp, tcp, err := parseGossipCounters(string(raw))
		if err != nil {
			return g, fmt.Errorf("%s in %s: %w", c.chain, h.NS, err)
		}
		if c.chain == "INPUT" {
			g.InUDP, g.InTCP = udp, tcp
		} else {
			g.OutUDP, g.OutTCP = udp, tcp
		}
	}
	return g, nil
}

// parseGossipCounters reads the bytes of the UDP and the TCP gossip
// counting rules from `iptables -L CHAIN -v -x -n` output (columns pkts,
// bytes, then the protocol's number: the rules have no target).
func parseGossipCounters(out string) (udp, tcp uint64, err error) {
	found := 0
	port := "ports " + strconv.Itoa(e2e.GossipPort)
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "multiport") || !strings.HasSuffix(strings.TrimSpace(line), port) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bytes column %q: %w", f[1], err)
		}
		switch f[2] {
		case "17", "udp":
			udp += n
		case "6", "tcp":
			tcp += n
		default:
			return 0, 0, fmt.Errorf("gossip counting rule with protocol %q", f[2])
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%d gossip counting rules, want 2 (udp, tcp)", found)
	}
	return udp, tcp, nil
}

// agentCounter sums the samples of the counter name (with any labels) in
// the agent's /metrics; a counter not yet created reads 0.
func agentCounter(a *e2e.Agent, name string) (float64, error) {
	hc := a.Host.HTTPClient(5 * time.Second)
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + a.HTTPAddr() + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", a.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("%s metrics: %s", a.Name, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", a.Name, err)
	}
	return sumCounter(string(b), name), nil
}

// sumCounter sums the samples of name in a Prometheus text exposition.
func sumCounter(exposition, name string) float64 {
	var total float64
	for _, line := range strings.Split(exposition, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// freshRunDir is a directory for the suite's logs, removed at the end
// unless the test failed.
func freshRunDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shoal-bench-fresh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("suite logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
