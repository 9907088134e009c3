//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/pkg/client"
	"github.com/shoaldb/shoal/test/e2e"
)

// TestLeaseCost measures what the writer lease (issue 26) costs an agent:
// the CPU and the bandwidth of raft among the voters (heartbeats, leader
// contact) and of shoal's term traffic (signed `shoal:term` events and
// `shoal:term?` queries), which reaches every agent. At N = 15 and then
// N = 50, two clusters of shoal `fast`, one agent process per host
// (network namespace), each with 3 db hosts (a MariaDB primary and two GTID
// replicas, a db agent probing each) and N-3 app agents:
//   - (a) without consensus;
//   - (b) with consensus: the 3 db agents voters (`--consensus-key`,
//     bootstrap_expect 3), the app agents given only the term key
//     (`--consensus-term-key`), as docs/consensus.md advises.
//
// Per agent, split into db agents (the voters in b) and app agents: CPU
// (utime+stime from /proc) in % of a core, and bytes sent+received per
// second from the host's eth0 counters. The lease's cost is (b) − (a),
// p50 against p50 per kind. A cell with consensus counts only when raft
// formed, a term existed on every voter, and neither the leader, the raft
// term nor the writer term changed during the window; otherwise its note
// says what was wrong.
//
// The two clusters run at the same time and are measured over the same
// window when both fit (2N ≤ BENCH_LEASE_TOGETHER_MAX agents, default 60:
// two `fast` clusters of 50 did not form within 3 minutes on 2 cores,
// see TestIdleCPU); otherwise one after the other, and the report says so.
// BENCH_LEASE_SIZES (15,50) and BENCH_LEASE_WINDOW (60s; QUICK 15s) narrow
// it.
//
//	sudo go test -tags 'bench e2e' -count=1 -v -timeout 30m -run '^TestLeaseCost$' ./test/bench/
func TestLeaseCost(t *testing.T) {
	e2e.Require(t)
	mariadbtest.Require(t)
	Tools(t)
	keys := leaseKeys{gossip: e2e.Keygen(t), consensus: e2e.Keygen(t)}
	keys.term = termPublicKey(t, keys.consensus)
	window := envDur("BENCH_LEASE_WINDOW", Pick(60*time.Second, 15*time.Second))
	together := envInt("BENCH_LEASE_TOGETHER_MAX", 60)
	var rows []leaseRow
	start := time.Now()
	for _, ns := range envList("BENCH_LEASE_SIZES", []string{"15", "50"}) {
		var n int
		if _, err := fmt.Sscan(ns, &n); err != nil || n < leaseVoters+1 || n > 100 {
			t.Fatalf("BENCH_LEASE_SIZES: %q is not a size in %d..100", ns, leaseVoters+1)
		}
		e2e.RaiseNeighbourLimits(t, 2*n)
		load := loadAvg1() // before this size's clusters start: the rest of the machine's work
		if 2*n <= together {
			rows = append(rows, runLeaseCells(t, n, keys, window, load, []bool{false, true}, true)...)
			continue
		}
		for _, withConsensus := range []bool{false, true} {
			rows = append(rows, runLeaseCells(t, n, keys, window, load, []bool{withConsensus}, false)...)
		}
	}
	WriteSection(t, "81-lease-cost", leaseCostReport(rows, time.Since(start)))
}

// leaseVoters is how many db hosts (MariaDB and a db agent) each cluster
// has; with consensus they are the voters.
const leaseVoters = 3

// leaseKeys are the keys of a run: gossip, consensus (the voters') and
// the term key derived from it (the app agents').
type leaseKeys struct{ gossip, consensus, term string }

// leaseRow is one (cluster, N, agent kind) over one window.
type leaseRow struct {
	n         int
	consensus bool
	db        bool // the db agents (voters with consensus), else the app agents
	together  bool // measured in the same window as the other cluster
	cpuPct    []float64
	bps       []float64 // bytes sent+received per second, per host
	window    time.Duration
	load1     string // /proc/loadavg's first field before the size's clusters started
	machine   cpuUse
	failed    int    // member-failed events anywhere over the window
	check     string // consensus only: what the stability check found
	ok        bool   // the cluster formed (and, with consensus, the check passed)
	note      string
}

// leaseCell is one running cluster of a cell and what was read of it.
type leaseCell struct {
	c         *GCluster
	dbs       []*mariadbtest.Server
	consensus bool
	err       error
	self0     map[string]*client.Consensus // voters' state before the window
	terms0    map[string]float64
}

// runLeaseCells forms one cluster per entry of variants (with consensus or
// not), waits for raft and the first term where there is consensus, lets
// the joins settle, then measures every cluster over one window. load is
// the load average before the size began, for the report.
func runLeaseCells(t *testing.T, n int, keys leaseKeys, window time.Duration, load string, variants []bool, together bool) []leaseRow {
	var cells []*leaseCell
	defer func() {
		for _, cl := range cells {
			cl.stop()
		}
	}()
	for _, withConsensus := range variants {
		cl := newLeaseCluster(t, n, keys, withConsensus)
		cells = append(cells, cl)
		if cl.err != nil {
			t.Logf("%s: %v", cl.label(), cl.err)
		}
	}
	for _, cl := range cells {
		if cl.err == nil && cl.consensus {
			cl.err = waitLease(cl.c, 90*time.Second)
		}
	}
	// Let joins, push/pulls, the first term's broadcast and its answers
	// die down.
	time.Sleep(Pick(20*time.Second, 5*time.Second))
	for _, cl := range cells {
		cl.self0, cl.terms0 = cl.readState()
	}
	before := make([]map[*GNode]ProcUsage, len(cells))
	rx0, tx0 := make([][]uint64, len(cells)), make([][]uint64, len(cells))
	for i, cl := range cells {
		before[i] = cl.c.usage()
		rx0[i], tx0[i] = linkBytes(t, cl.c)
	}
	m0 := takeCPU()
	time.Sleep(window)
	m1 := takeCPU()
	wall := m1.at.Sub(m0.at)
	// Every cluster's counters first, in the order they were read before
	// the window, so each spans the same time.
	after := make([]map[*GNode]ProcUsage, len(cells))
	rx1, tx1 := make([][]uint64, len(cells)), make([][]uint64, len(cells))
	for i, cl := range cells {
		after[i] = cl.c.usage()
		rx1[i], tx1[i] = linkBytes(t, cl.c)
	}
	var rows []leaseRow
	for i, cl := range cells {
		self1, terms1 := cl.readState()
		db := leaseRow{n: n, consensus: cl.consensus, db: true, together: together, window: wall, load1: load,
			machine: cpuBetween(m0, m1), failed: countFailed(cl.c.Stamps(), m0.at, m1.at, "", ""), ok: cl.err == nil}
		if cl.err != nil {
			db.note = cl.err.Error()
		}
		if cl.consensus {
			check, ok := leaseCheck(cl.c, cl.self0, self1, cl.terms0, terms1)
			db.check, db.ok = check, db.ok && ok
		}
		app := db
		app.db = false
		for j, node := range cl.c.Nodes {
			r := &app
			if j < leaseVoters {
				r = &db
			}
			bps := float64(rx1[i][j]-rx0[i][j]+tx1[i][j]-tx0[i][j]) / wall.Seconds()
			r.bps = append(r.bps, bps)
			b, ok0 := before[i][node]
			a, ok1 := after[i][node]
			if !ok0 || !ok1 {
				continue
			}
			pct := 100 * (a.CPU - b.CPU).Seconds() / wall.Seconds()
			r.cpuPct = append(r.cpuPct, pct)
			if ci := self1[node.Name]; ci != nil && strings.EqualFold(ci.State, "leader") {
				// The leader sends the heartbeats: its own cost, apart.
				db.check += fmt.Sprintf("; the leader %s: %.2f %% CPU, %s/s", node.Name, pct, fmtBytes(bps))
			}
		}
		for _, r := range []leaseRow{db, app} {
			c, b := Summarize(r.cpuPct), Summarize(r.bps)
			t.Logf("%s %s: CPU %% p50 %.3f max %.3f, B/s p50 %.0f max %.0f; %s", cl.label(), r.kind(), c.P50, c.Max, b.P50, b.Max, r.check)
		}
		rows = append(rows, db, app)
	}
	return rows
}

// newLeaseCluster starts the 3 MariaDB servers (db1 primary, db2 and db3
// its GTID replicas) and N agents, one per host, each joining the first
// two; it waits until every agent sees all N alive. The agents serve the
// API on their host's loopback (for /metrics and /v1/agent/self, read
// outside the window only). A cluster that does not form is returned
// with its error, to be reported.
func newLeaseCluster(t *testing.T, n int, keys leaseKeys, withConsensus bool) *leaseCell {
	_, serfBin := Tools(t)
	impl := Impl{Name: "shoal fast", Profile: "fast"}
	if withConsensus {
		impl.Name += " + consensus"
	}
	cl := &leaseCell{consensus: withConsensus, c: &GCluster{Impl: impl, Net: e2e.NewNet(t), serf: serfBin}}
	c, dir := cl.c, t.TempDir()
	stamp, _ := Tools(t)
	for i := 1; i <= n; i++ {
		h := c.Net.AddHost(t, i)
		node := &GNode{Name: fmt.Sprintf("n%02d", i), Host: h, Dir: filepath.Join(dir, fmt.Sprintf("n%02d", i))}
		if err := os.MkdirAll(node.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		node.Stamps = filepath.Join(node.Dir, "stamps")
		node.argv = []string{e2e.ShoalBin(t), "agent", "--node", node.Name, "--bind", fmt.Sprintf("%s:%d", h.IP, e2e.GossipPort),
			"--rpc-addr", "127.0.0.1:7373", "--http-addr", fmt.Sprintf("127.0.0.1:%d", e2e.HTTPPort), "--profile", impl.Profile,
			"--encrypt", keys.gossip, "--event-handler", fmt.Sprintf("member-failed,member-join,member-leave=%s %s", stamp, node.Stamps),
			"--snapshot", filepath.Join(node.Dir, "snapshot"), "--log-level", "warn"}
		if i <= leaseVoters {
			node.argv = append(node.argv, leaseDBFlags(t, node)...)
			cl.dbs = append(cl.dbs, startLeaseServer(t, h))
			if withConsensus {
				for _, f := range e2e.ConsensusFlags(keys.consensus, leaseVoters) {
					node.argv = append(node.argv, strings.ReplaceAll(f, "{dir}", node.Dir))
				}
			}
		} else if withConsensus {
			node.argv = append(node.argv, "--consensus-term-key", keys.term)
		}
		c.Nodes = append(c.Nodes, node)
	}
	for _, r := range cl.dbs[1:] {
		r.ReplicateFrom(cl.dbs[0])
	}
	for i, node := range c.Nodes {
		for _, j := range []int{0, 1, 2} {
			if j != i && len(node.join) < 2 {
				node.join = append(node.join, fmt.Sprintf("%s:%d", c.Nodes[j].Host.IP, e2e.GossipPort))
			}
		}
	}
	for i, node := range c.Nodes {
		if i > 0 {
			time.Sleep(Pick(100*time.Millisecond, 50*time.Millisecond))
		}
		c.Start(t, node)
	}
	if err := c.WaitAllAlive(3 * time.Minute); err != nil {
		cl.err = fmt.Errorf("did not form: %w", err)
	}
	return cl
}

// leaseDBFlags make node a db agent of cluster main probing the MariaDB
// server in its namespace, the password in a file of its own.
func leaseDBFlags(t *testing.T, node *GNode) []string {
	pw := filepath.Join(node.Dir, "mysql-password")
	if err := os.WriteFile(pw, []byte(e2e.ProbePassword), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--mysql-addr", fmt.Sprintf("127.0.0.1:%d", e2e.MySQLPort), "--mysql-port", fmt.Sprint(e2e.MySQLPort),
		"--mysql-user", e2e.ProbeUser, "--mysql-password-file", pw, "--cluster", "main"}
}

// startLeaseServer starts a MariaDB server in h's namespace on 3306, with
// the probe's account (the grants the e2e hosts give it, fencing's
// included). Replication is set up once all three run.
func startLeaseServer(t *testing.T, h *e2e.Host) *mariadbtest.Server {
	s := mariadbtest.Start(t, mariadbtest.Options{Netns: h.NS, BindAddress: "0.0.0.0", Host: h.IP, Port: e2e.MySQLPort})
	s.CreateUser(mariadbtest.User{Name: e2e.ProbeUser, Password: e2e.ProbePassword,
		Grants: "SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS", MaxConns: 2})
	return s
}

// termPublicKey is the term key of consensus key k, from `shoal term-key`
// (the key on its standard input, as an operator would give it).
func termPublicKey(t *testing.T, k string) string {
	cmd := exec.Command(e2e.ShoalBin(t), "term-key")
	cmd.Stdin = strings.NewReader(k + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("shoal term-key: %v", err)
	}
	key := strings.TrimSpace(string(out))
	if key == "" || strings.ContainsAny(key, " \n") {
		t.Fatalf("shoal term-key: unexpected output %q", out)
	}
	return key
}

// waitLease waits until every voter is in a raft configuration of 3,
// all name the same leader, and all hold a writer term of cluster main
// granted to db1 (the primary, n01).
func waitLease(c *GCluster, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		self, err := votersSelf(c)
		if err == nil {
			err = leaseFormed(c, self)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no raft leader and term within %s: %w", limit, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// leaseFormed says what is missing from a formed lease in self (the
// voters' states by name), nil when nothing is.
func leaseFormed(c *GCluster, self map[string]*client.Consensus) error {
	var leader string
	for _, node := range c.Nodes[:leaseVoters] {
		ci := self[node.Name]
		switch {
		case ci == nil || !ci.Voter:
			return fmt.Errorf("%s is no voter", node.Name)
		case !ci.Bootstrapped || len(ci.Voters) != leaseVoters:
			return fmt.Errorf("%s: bootstrapped %v, %d voters", node.Name, ci.Bootstrapped, len(ci.Voters))
		case ci.Leader == "":
			return fmt.Errorf("%s knows no leader", node.Name)
		case leader != "" && ci.Leader != leader:
			return fmt.Errorf("voters disagree on the leader: %s and %s", leader, ci.Leader)
		}
		leader = ci.Leader
		if tm := termOf(ci); tm.Term == 0 || tm.Writer != c.Nodes[0].Name {
			return fmt.Errorf("%s: term of main %d to %q, want one to %s", node.Name, tm.Term, tm.Writer, c.Nodes[0].Name)
		}
	}
	return nil
}

// termOf is cluster main's term on ci (Term 0: none).
func termOf(ci *client.Consensus) client.Term {
	for _, tm := range ci.Terms {
		if tm.Cluster == "main" {
			return tm
		}
	}
	return client.Term{}
}

// votersSelf reads the consensus part of each db agent's /v1/agent/self.
func votersSelf(c *GCluster) (map[string]*client.Consensus, error) {
	out := map[string]*client.Consensus{}
	for _, node := range c.Nodes[:leaseVoters] {
		hc := node.Host.HTTPClient(5 * time.Second)
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/agent/self", e2e.HTTPPort))
		if err != nil {
			return nil, fmt.Errorf("%s agent/self: %w", node.Name, err)
		}
		var self struct {
			Consensus *client.Consensus `json:"consensus"`
		}
		err = json.NewDecoder(resp.Body).Decode(&self)
		resp.Body.Close()
		hc.CloseIdleConnections()
		if err != nil {
			return nil, fmt.Errorf("%s agent/self: %w", node.Name, err)
		}
		out[node.Name] = self.Consensus
	}
	return out, nil
}

// readState reads, outside the window, the voters' consensus state and
// the term counters and gauges of every agent (summed).
func (cl *leaseCell) readState() (map[string]*client.Consensus, map[string]float64) {
	if !cl.consensus || cl.err != nil {
		return nil, nil
	}
	self, err := votersSelf(cl.c)
	if err != nil {
		self = nil
	}
	m := sumMetrics(cl.c, cl.c.Nodes, "shoal_terms_")
	m["knows"] = float64(agentsKnowingTerm(cl.c))
	return self, m
}

// agentsKnowingTerm counts the agents whose /metrics show a writer term
// of cluster main.
func agentsKnowingTerm(c *GCluster) int {
	n := 0
	for _, node := range c.Nodes {
		m, err := node.Metrics(`shoal_consensus_writer_term{cluster="main"}`)
		if err == nil && m[`shoal_consensus_writer_term{cluster="main"}`] >= 1 {
			n++
		}
	}
	return n
}

// leaseCheck compares the voters' state before and after the window: the
// lease counts only if raft had formed with a term before it and neither
// the leader, the raft term nor the writer term moved. It also says how
// many agents knew the term after it and the term traffic the agents
// counted over it.
func leaseCheck(c *GCluster, self0, self1 map[string]*client.Consensus, m0, m1 map[string]float64) (string, bool) {
	if self0 == nil || self1 == nil {
		return "voters' state unreadable", false
	}
	for _, self := range []map[string]*client.Consensus{self0, self1} {
		if err := leaseFormed(c, self); err != nil {
			return err.Error(), false
		}
	}
	v := c.Nodes[0].Name
	a, b := self0[v], self1[v]
	traffic := fmt.Sprintf("over the window: %.0f term queries sent, %.0f answered, %.0f terms learned; %.0f of %d agents knew the term after it",
		m1["shoal_terms_queries_total"]-m0["shoal_terms_queries_total"], m1["shoal_terms_answers_total"]-m0["shoal_terms_answers_total"],
		m1["shoal_terms_learned_total"]-m0["shoal_terms_learned_total"], m1["knows"], len(c.Nodes))
	if a.Leader != b.Leader || a.RaftTerm != b.RaftTerm || termOf(a).Term != termOf(b).Term {
		return fmt.Sprintf("**unstable**: leader %s → %s, raft term %d → %d, writer term %d → %d; %s",
			a.Leader, b.Leader, a.RaftTerm, b.RaftTerm, termOf(a).Term, termOf(b).Term, traffic), false
	}
	return fmt.Sprintf("stable: leader %s, raft term %d, writer term %d to %s; %s", a.Leader, a.RaftTerm, termOf(a).Term, termOf(a).Writer, traffic), true
}

// stop ends the agents, the servers and the hosts.
func (cl *leaseCell) stop() {
	cl.c.Stop()
	for _, s := range cl.dbs {
		s.Kill() // a no-op once it has exited
	}
	cl.c.Net.Delete()
}

func (cl *leaseCell) label() string {
	return fmt.Sprintf("%s N=%d", cl.c.Impl.Name, len(cl.c.Nodes))
}

// kind names the row's agents as the report does.
func (r leaseRow) kind() string {
	switch {
	case r.db && r.consensus:
		return "db (voter)"
	case r.db:
		return "db"
	case r.consensus:
		return "app (term key)"
	default:
		return "app"
	}
}

// loadAvg1 is /proc/loadavg's first field ("?" when unreadable).
func loadAvg1() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func leaseCostReport(rows []leaseRow, took time.Duration) string {
	var b strings.Builder
	b.WriteString("### 8b. What the writer lease costs per agent at N = 15 and 50 (one process per host)\n\n")
	b.WriteString("Two clusters of shoal `fast`, one agent process per host (network namespace), each with 3 db hosts " +
		"(a MariaDB primary and two GTID replicas, a db agent probing each) and N − 3 app agents: (a) without consensus; " +
		"(b) with consensus, the 3 db agents raft voters (`--consensus-key`, `bootstrap_expect` 3, raft's default timeouts) " +
		"and the app agents given only the term key (`--consensus-term-key`). Once raft formed, the first term was granted and the joins settled, " +
		"every agent's CPU (utime+stime from /proc/<pid>/stat, % of one core) and every host's eth0 bytes sent+received per second are read over an idle window; " +
		"distributions are over the agents of one kind. The lease's cost is (b) − (a), p50 against p50. " +
		"A cluster with consensus counts only if the voters had a leader and a term before the window and neither the leader, the raft term " +
		"nor the writer term changed over it (read from each voter's `/v1/agent/self` outside the window). " +
		"`together`: both clusters measured in the same window; otherwise one after the other (two `fast` clusters of 50 do not fit on 2 cores). " +
		"`load` is /proc/loadavg's first field before the size's first cluster started (the rest of the machine's work), `machine busy` all CPU use of the machine over it (cores of 2). ")
	fmt.Fprintf(&b, "Run: %s.\n\n", took.Round(time.Second))
	b.WriteString("Command: `sudo go test -tags 'bench e2e' -count=1 -v -timeout 30m -run '^TestLeaseCost$' ./test/bench/` (`BENCH_QUICK=1` for a short run; `BENCH_LEASE_SIZES=15` for one size)\n\n")
	var tr [][]string
	for _, r := range rows {
		cluster := "(a) no consensus"
		if r.consensus {
			cluster = "(b) consensus"
		}
		c, w := Summarize(r.cpuPct), Summarize(r.bps)
		note := fmt.Sprint(r.failed)
		if !r.ok {
			note += "; **not counted**"
		}
		if r.note != "" {
			note += ": " + r.note
		}
		if c.N == 0 {
			tr = append(tr, []string{fmt.Sprint(r.n), cluster, r.kind(), "0", "–", "–", "–", "–", "–", "–", "–", "–", "–", "–", "–", note})
			continue
		}
		tr = append(tr, []string{fmt.Sprint(r.n), cluster, r.kind(), fmt.Sprint(c.N), r.window.Round(time.Second).String() + leaseTogether(r),
			fmt.Sprintf("%.2f", c.Min), fmt.Sprintf("**%.2f**", c.P50), fmt.Sprintf("%.2f", c.P90), fmt.Sprintf("%.2f", c.Max),
			fmtBytes(w.Min), "**" + fmtBytes(w.P50) + "**", fmtBytes(w.P90), fmtBytes(w.Max),
			r.load1, fmt.Sprintf("%.2f", r.machine.machineCores), note})
	}
	b.WriteString(Table([]string{"N", "cluster", "agents", "n", "window", "CPU % min", "p50", "p90", "max",
		"B/s sent+received min", "p50", "p90", "max", "load", "machine busy", "member-failed in the window"}, tr))
	b.WriteString("\nThe lease's cost, (b) − (a) per agent kind (p50s):\n\n")
	b.WriteString(Table([]string{"N", "agents", "CPU % of a core", "B/s sent+received", "consensus check over the window"}, leaseCostRows(rows)))
	return b.String()
}

// leaseTogether marks a row measured alone.
func leaseTogether(r leaseRow) string {
	if r.together {
		return " (together)"
	}
	return " (alone)"
}

// leaseCostRows pairs each (N, kind) row with consensus with the one
// without, the latest of each.
func leaseCostRows(rows []leaseRow) [][]string {
	type key struct {
		n  int
		db bool
	}
	without := map[key]leaseRow{}
	for _, r := range rows {
		if !r.consensus {
			without[key{r.n, r.db}] = r
		}
	}
	var out [][]string
	for _, r := range rows {
		a, ok := without[key{r.n, r.db}]
		if !r.consensus || !ok {
			continue
		}
		kind := "app agents (term key)"
		if r.db {
			kind = "db agents (voters)"
		}
		check := r.check
		if !r.ok {
			check = "**not counted**: " + strings.TrimSpace(r.note+" "+check)
		}
		if a.failed+r.failed > 0 {
			// Failures and their refutations are gossip and CPU of their
			// own: a window that had any was not idle.
			check = fmt.Sprintf("**disturbed**: %d member-failed in (a)'s window, %d in (b)'s; %s", a.failed, r.failed, check)
		}
		if len(r.cpuPct) == 0 || len(a.cpuPct) == 0 || !a.ok {
			out = append(out, []string{fmt.Sprint(r.n), kind, "–", "–", check + " (a cluster did not form)"})
			continue
		}
		dc := Summarize(r.cpuPct).P50 - Summarize(a.cpuPct).P50
		db := Summarize(r.bps).P50 - Summarize(a.bps).P50
		sign := ""
		if db < 0 {
			sign, db = "−", -db
		}
		out = append(out, []string{fmt.Sprint(r.n), kind, strings.Replace(fmt.Sprintf("%+.2f", dc), "-", "−", 1), sign + fmtBytes(db), check})
	}
	return out
}
