//go:build bench

package bench

// Suite 7 of the benchmarks (issue 25, fresh readers): a replica's
// replication link is cut silently (packets dropped, no RST), so the
// replica keeps reporting IO=Yes and Seconds_Behind_Master 0 until
// slave_net_timeout (60 s by default) ends the connection. How long does
// each method keep routing reads to data older than max_lag
// (TestFreshnessWindow), and what do the GTID positions in the gossip cost
// in bandwidth and CPU (TestFreshnessCost)?
//
//	go test -tags 'bench e2e' -count=1 -v -timeout 90m -run '^TestFreshness' ./test/bench/

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/pkg/client"
	"github.com/shoaldb/shoal/test/e2e"
)

const (
	freshMaxLag      = 5 * time.Second        // pool.max_lag of every agent, and the anchors' threshold
	freshWriteEvery  = 100 * time.Millisecond // one insert on the primary
	freshAnchorEvery = time.Second            // the anchors' check interval
	freshCap         = 90 * time.Second       // a trial's cap after the data turned stale
	freshPhase       = time.Second            // each cut waits a random time in [0, freshPhase) first
	freshScan        = 100 * time.Millisecond // how often a trial looks at the methods' answers
	freshRecoverMax  = 120 * time.Second
)

// freshMethods are the methods measured, in table order.
var freshMethods = []struct{ key, label, short string }{
	{"shoal", "shoal: out of the readers of /v1/pool (slowest of the 4 agents)", "shoal"},
	{"sbm", "Seconds_Behind_Master rule, checked every 1 s (ProxySQL-style: SBM > max_lag, NULL, or a thread not Yes)", "SBM rule"},
	{"hb", "pt-heartbeat --update --interval 1 on the primary, lag checked on the replica every 1 s", "pt-heartbeat"},
}

// freshBench is suite 7's setup: the e2e cluster (db1 primary, db2 and db3
// replicas, app1) with max_lag on every agent, the writer, pt-heartbeat and
// the anchors' pollers.
type freshBench struct {
	c         *e2e.Cluster
	dir       string
	writer    *freshWriter
	sbm, hb   *freshPoller
	primaryID int
	ptCheck   map[string][2]float64 // replica → pt-heartbeat --check's lag, the poller's formula's lag (s)
}

// freshWaitGTID waits until every replica has applied the primary's
// current binlog position.
func freshWaitGTID(t *testing.T, c *e2e.Cluster, limit time.Duration) {
	t.Helper()
	var pos string
	if err := c.Primary().Server.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatalf("gtid_binlog_pos of the primary: %v", err)
	}
	for _, r := range c.Replicas() {
		if err := freshReach(r, pos, limit); err != nil {
			t.Fatal(err)
		}
	}
}

// freshReach waits up to limit until replica has applied pos.
func freshReach(r *e2e.DBHost, pos string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit+5*time.Second)
	defer cancel()
	var res *int64
	if err := r.Server.DB().QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, limit.Seconds()).Scan(&res); err != nil {
		return fmt.Errorf("%s: MASTER_GTID_WAIT(%s): %w", r.Name, pos, err)
	}
	if res == nil || *res != 0 {
		return fmt.Errorf("%s did not reach GTID %s within %s", r.Name, pos, limit)
	}
	return nil
}

func freshSetup(t *testing.T) *freshBench {
	t.Helper()
	e2e.Require(t)
	b := &freshBench{dir: freshRunDir(t), ptCheck: map[string][2]float64{}}
	start := time.Now()
	b.c = e2e.NewCluster(t, e2e.Options{AgentFlags: []string{"--max-lag", freshMaxLag.String()}})
	c := b.c

	p := c.Primary().Server
	for _, q := range append(freshSchema, "CREATE DATABASE IF NOT EXISTS heartbeat") {
		p.MustExec(q)
	}
	b.primaryID = p.ServerID()
	startPTHeartbeat(t, b.dir, p.Socket())
	// pt-heartbeat creates its table and writes its first row at once.
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range c.Replicas() {
		for {
			lag, err := ptLag(context.Background(), r.Server.DB(), b.primaryID)
			if err == nil && lag < 2*time.Second {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pt-heartbeat's row did not reach %s with a lag under 2 s within 30 s (lag %s, err %v); its log is in %s",
					r.Name, lag, err, b.dir)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	freshWaitGTID(t, c, 30*time.Second)
	// The poller's formula must agree with pt-heartbeat's own check.
	for _, r := range c.Replicas() {
		got, err := ptCheck(r.Server.Socket(), b.primaryID)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		own, err := ptLag(context.Background(), r.Server.DB(), b.primaryID)
		if err != nil {
			t.Fatal(err)
		}
		b.ptCheck[r.Name] = [2]float64{got, own.Seconds()}
		if d := got - own.Seconds(); d > 1.5 || d < -1.5 {
			t.Fatalf("%s: pt-heartbeat --check says %.2f s of lag, the poller's reading %.2f s", r.Name, got, own.Seconds())
		}
	}

	b.writer = startFreshWriter(p.DB(), freshWriteEvery)
	t.Cleanup(b.writer.Stop)
	servers := map[string]*e2e.DBHost{}
	var names []string
	for _, r := range c.Replicas() {
		servers[r.Name] = r
		names = append(names, r.Name)
	}
	b.sbm = startFreshPoller(freshAnchorEvery, names, func(ctx context.Context, node string) (bool, string) {
		st, err := servers[node].Server.SlaveStatus()
		if err != nil {
			return true, err.Error()
		}
		return sbmRule(st, freshMaxLag)
	})
	t.Cleanup(b.sbm.Stop)
	b.hb = startFreshPoller(freshAnchorEvery, names, func(ctx context.Context, node string) (bool, string) {
		lag, err := ptLag(ctx, servers[node].Server.DB(), b.primaryID)
		if err != nil {
			return true, err.Error()
		}
		return lag > freshMaxLag, fmt.Sprintf("lag %.2fs", lag.Seconds())
	})
	t.Cleanup(b.hb.Stop)
	b.waitIn(t, time.Now())
	t.Logf("setup (cluster, max_lag %s on every agent, pt-heartbeat, writer, pollers) took %s", freshMaxLag,
		time.Since(start).Round(time.Second))
	return b
}

// waitIn waits until every agent shows the healthy pool and both anchors
// have every replica in, with answers after since. Not recovering is
// breakage: the test fails.
func (b *freshBench) waitIn(t *testing.T, since time.Time) time.Duration {
	t.Helper()
	if r := b.c.WaitHealthy(since, freshRecoverMax); !r.OK {
		t.Fatalf("the pool did not come back within %s:\n%s", freshRecoverMax, b.c.Describe())
	}
	for {
		in := true
		for _, r := range b.c.Replicas() {
			in = in && b.sbm.inSince(r.Name, since) && b.hb.inSince(r.Name, since)
		}
		if in {
			return time.Since(since)
		}
		if time.Since(since) > freshRecoverMax {
			var s []string
			for _, r := range b.c.Replicas() {
				s = append(s, fmt.Sprintf("%s: SBM rule %s; pt-heartbeat %s", r.Name, b.sbm.latest(r.Name), b.hb.latest(r.Name)))
			}
			t.Fatalf("the anchors did not take the replicas back within %s:\n%s", freshRecoverMax, strings.Join(s, "\n"))
		}
		time.Sleep(freshScan)
	}
}

// freshTrial is one silent cut.
type freshTrial struct {
	Victim       string
	Cut          time.Time
	FirstMissing time.Time            // commit of the first write the replica did not get
	Out          map[string]time.Time // method → when it had the replica out (absent: never within the cap)
	PerAgent     map[string]time.Time // shoal, per agent
	Reason       string               // shoal's reason on the slowest agent
	Back         time.Duration        // heal → caught up and back in everywhere
	Kicked       bool                 // the IO thread had to be restarted after the heal
}

// StaleAt is when the replica's data became older than max_lag.
func (tr freshTrial) StaleAt() time.Time { return tr.FirstMissing.Add(freshMaxLag) }

// Window is the stale-read window of method in seconds and whether it had
// the replica out within the cap (if not, the value is the cap).
func (tr freshTrial) Window(method string) (float64, bool) {
	at, ok := tr.Out[method]
	if !ok {
		return freshCap.Seconds(), false
	}
	return at.Sub(tr.StaleAt()).Seconds(), true
}

// shoalOut is when every agent had first shown victim out of the readers
// at or after since, the per-agent times and the slowest agent's reason.
func (b *freshBench) shoalOut(victim string, since time.Time) (time.Time, map[string]time.Time, string, bool) {
	per := map[string]time.Time{}
	var last time.Time
	reason := ""
	for _, a := range b.c.AgentNames() {
		for _, s := range b.c.Obs.Snaps(a, since, time.Now()) {
			if s.OK() && !slices.Contains(s.Readers, victim) {
				per[a] = s.At
				if s.At.After(last) {
					last, reason = s.At, s.Out[victim]
				}
				break
			}
		}
	}
	return last, per, reason, len(per) == len(b.c.AgentNames())
}

func (b *freshBench) trial(t *testing.T, victim *e2e.DBHost) freshTrial {
	t.Helper()
	c := b.c
	primary := c.Primary()
	tr := freshTrial{Victim: victim.Name, Out: map[string]time.Time{}}
	time.Sleep(rand.N(freshPhase))
	tr.Cut = time.Now()
	if err := freshCut("-A", victim.Host, primary.Host); err != nil {
		t.Fatal(err)
	}
	deadline := tr.Cut.Add(freshMaxLag + freshCap + freshWriteEvery)
	for {
		if _, ok := tr.Out["shoal"]; !ok {
			if at, per, reason, ok := b.shoalOut(victim.Name, tr.Cut); ok {
				tr.Out["shoal"], tr.PerAgent, tr.Reason = at, per, reason
			}
		}
		if _, ok := tr.Out["sbm"]; !ok {
			if o, ok := b.sbm.firstOut(victim.Name, tr.Cut); ok {
				tr.Out["sbm"] = o.At
			}
		}
		if _, ok := tr.Out["hb"]; !ok {
			if o, ok := b.hb.firstOut(victim.Name, tr.Cut); ok {
				tr.Out["hb"] = o.At
			}
		}
		if len(tr.Out) == len(freshMethods) || time.Now().After(deadline) {
			break
		}
		time.Sleep(freshScan)
	}
	if _, ok := tr.Out["shoal"]; !ok {
		_, tr.PerAgent, tr.Reason, _ = b.shoalOut(victim.Name, tr.Cut)
	}
	// The replica's data is frozen until the heal: the first row it lacks
	// is the first missing write.
	applied, err := freshApplied(victim.Server.DB())
	if err != nil {
		t.Fatal(err)
	}
	id, at, ok := b.writer.firstAfter(applied)
	if !ok {
		rows, errs, lastErr := b.writer.stats()
		t.Fatalf("%s has every row the writer wrote (%d rows, %d failed inserts, last error %q): the writer stopped",
			victim.Name, rows, errs, lastErr)
	}
	tr.FirstMissing = at
	if at.Before(tr.Cut.Add(-time.Second)) {
		t.Logf("note: %s was already missing row %d, written %.2fs before the cut", victim.Name, id, tr.Cut.Sub(at).Seconds())
	}

	heal := time.Now()
	if err := freshCut("-D", victim.Host, primary.Host); err != nil {
		t.Fatal(err)
	}
	// After a long silence both ends back off (TCP retransmits, the IO
	// thread's reconnects): once healed, give replication 5 s, then restart
	// the IO thread so that the next trial need not wait for the back-off.
	var pos string
	if err := primary.Server.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatalf("gtid_binlog_pos of the primary: %v", err)
	}
	if freshReach(victim, pos, 5*time.Second) != nil {
		tr.Kicked = true
		victim.Server.MustExec("STOP SLAVE IO_THREAD")
		victim.Server.MustExec("START SLAVE IO_THREAD")
		if err := freshReach(victim, pos, freshRecoverMax); err != nil {
			t.Fatalf("after the heal: %v", err)
		}
	}
	tr.Back = b.waitIn(t, heal)
	return tr
}

// TestFreshnessWindow measures the stale-read window of shoal and of two
// anchors over silent cuts of a replica's replication link.
func TestFreshnessWindow(t *testing.T) {
	b := freshSetup(t)
	trials := Pick(10, 3)
	replicas := b.c.Replicas()
	var res []freshTrial
	start := time.Now()
	for i := range trials {
		tr := b.trial(t, replicas[i%len(replicas)])
		res = append(res, tr)
		var line []string
		for _, m := range freshMethods {
			w, ok := tr.Window(m.key)
			if ok {
				line = append(line, fmt.Sprintf("%s=%+.2fs", m.key, w))
			} else {
				line = append(line, fmt.Sprintf("%s=never within %s", m.key, freshCap))
			}
		}
		var agents []string
		for _, a := range b.c.AgentNames() {
			if at, ok := tr.PerAgent[a]; ok {
				agents = append(agents, fmt.Sprintf("%s %+.2fs", a, at.Sub(tr.StaleAt()).Seconds()))
			}
		}
		t.Logf("trial %d/%d on %s: first missing write %+.3fs after the cut; windows: %s (shoal per agent: %s); shoal reason %q; back in %.1fs (IO thread restarted: %v)",
			i+1, trials, tr.Victim, tr.FirstMissing.Sub(tr.Cut).Seconds(), strings.Join(line, " "), strings.Join(agents, ", "),
			tr.Reason, tr.Back.Seconds(), tr.Kicked)
	}
	rows, errs, lastErr := b.writer.stats()
	if errs > 0 {
		t.Logf("writer: %d rows, %d failed inserts (last: %s)", rows, errs, lastErr)
	}
	body := freshWindowSection(b, res, time.Since(start))
	WriteSection(t, "70-freshness", body)
	t.Logf("section:\n%s", body)
}

// fd formats a duration for prose: "100 ms", "5 s", "90 s".
func fd(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// fmtSigned formats seconds with a sign, with fmtS's precision.
func fmtSigned(v float64) string {
	if v < 0 {
		return "−" + fmtS(-v)
	}
	return "+" + fmtS(v)
}

// freshRatio is "a ÷ b" as "0.09×", or "–" when b is 0.
func freshRatio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func freshWindowSection(b *freshBench, res []freshTrial, took time.Duration) string {
	var s strings.Builder
	s.WriteString("## 7. Freshness: stale reads after a silent cut\n\n")
	fmt.Fprintf(&s, "A replica's replication link goes silent: packets are dropped, nothing is reset, so the replica keeps "+
		"`Slave_IO_Running: Yes` and `Seconds_Behind_Master: 0` until `slave_net_timeout` (MariaDB's default, 60 s, "+
		"left as it is) ends the connection. Meanwhile the primary takes a write every %s. Measured per method: the "+
		"**stale-read window**, from the moment the replica's data became older than max_lag (%s; the commit of the "+
		"first write the replica did not get, plus max_lag) until the method takes the replica out of reads; negative "+
		"when it is out before. A method that has not taken it out %s after that moment is recorded as %s "+
		"(\"never within %s\").\n\n", fd(freshWriteEvery), fd(freshMaxLag), fd(freshCap), fmtS(freshCap.Seconds()), fd(freshCap))
	fmt.Fprintf(&s, "**How.** The e2e harness: real MariaDB (GTID replication, `MASTER_HEARTBEAT_PERIOD=1`, "+
		"`MASTER_CONNECT_RETRY=1`), db1 primary, db2 and db3 replicas, shoal agents on the three db hosts and one app "+
		"host, each host a network namespace; every agent started with `--max-lag %s`. "+
		"The cut: `iptables-legacy` DROP rules on INPUT in the replica's namespace (from the primary's "+
		"port 3306) and in the primary's (from the replica to port 3306): only the replication connection goes "+
		"silent; gossip and the agents' local probes go on. %d trials, alternating between the two replicas, each "+
		"after a random wait in [0, %s). After each trial the rules are deleted, the replica catches up (if it has not "+
		"within 5 s, its IO thread is restarted, to skip TCP's back-off), and the next trial starts once every agent's "+
		"pool and both anchors have it back. The methods, in the same run on the same cuts:\n\n",
		freshMaxLag, len(res), fd(freshPhase))
	fmt.Fprintf(&s, "- **shoal**: each agent's `/v1/pool` polled every %s; the time is the first answer without the "+
		"replica among the readers; per trial the slowest of the 4 agents counts.\n", fd(e2e.PollInterval))
	fmt.Fprintf(&s, "- **Seconds_Behind_Master rule**, as ProxySQL's monitor (`max_replication_lag`, a NULL lag "+
		"shunned) or an HAProxy agent-check apply it: `SHOW SLAVE STATUS` on the replica every %s; out when "+
		"`Seconds_Behind_Master` > %s, is NULL, or either thread is not `Yes`.\n", fd(freshAnchorEvery), fd(freshMaxLag))
	fmt.Fprintf(&s, "- **pt-heartbeat** (%s): `pt-heartbeat --update --interval 1 --utc` on the primary; every %s "+
		"the replica's heartbeat row is read and its lag computed as `pt-heartbeat --check` does (now − ts − "+
		"`--skew` %s; one host, one clock: no skew between them); out when the lag > %s. Checked at setup against "+
		"`pt-heartbeat --check` itself (%s).\n\n", ptVersion(), fd(freshAnchorEvery), fd(ptSkew), fd(freshMaxLag), b.ptCheckString())
	fmt.Fprintf(&s, "Command: %s\n\n", Command("^TestFreshness"))
	if Quick() {
		s.WriteString("**BENCH_QUICK=1 run: too few trials for the figures to mean much.**\n\n")
	}

	var rows [][]string
	detect := map[string][]float64{} // method → seconds from the first missing write to out (cap counted)
	for _, m := range freshMethods {
		var ws []float64
		never := 0
		for _, tr := range res {
			w, ok := tr.Window(m.key)
			if !ok {
				never++
			}
			ws = append(ws, w)
			detect[m.key] = append(detect[m.key], w+freshMaxLag.Seconds())
		}
		st := Summarize(ws)
		nv := "0"
		if never > 0 {
			nv = fmt.Sprintf("**%d** (counted as %s)", never, fmtS(freshCap.Seconds()))
		}
		rows = append(rows, []string{m.label, fmt.Sprint(st.N), nv, fmtSigned(st.P50), fmtSigned(st.P99), fmtSigned(st.Max),
			fmtS(Summarize(detect[m.key]).P50)})
	}
	s.WriteString(Table([]string{"method", "trials", "never within " + fd(freshCap), "window p50 (s)", "p99", "max",
		"first missing write → out, p50 (s)"}, rows))
	sh := Summarize(detect["shoal"])
	s.WriteString("\n")
	for _, m := range freshMethods[1:] {
		a := Summarize(detect[m.key])
		fmt.Fprintf(&s, "- shoal ÷ %s, time from the first missing write until out: p50 %s (%s s vs %s s), max %s (%s s vs %s s).\n",
			m.short, freshRatio(sh.P50, a.P50), fmtS(sh.P50), fmtS(a.P50), freshRatio(sh.Max, a.Max), fmtS(sh.Max), fmtS(a.Max))
	}
	s.WriteString("\nPer trial (window in seconds; shoal's reason on its slowest agent):\n\n")
	var trows [][]string
	for i, tr := range res {
		row := []string{fmt.Sprint(i + 1), tr.Victim, fmt.Sprintf("%.3f", tr.FirstMissing.Sub(tr.Cut).Seconds())}
		for _, m := range freshMethods {
			if w, ok := tr.Window(m.key); ok {
				row = append(row, fmtSigned(w))
			} else {
				row = append(row, "never within "+fd(freshCap))
			}
		}
		reason := tr.Reason
		if reason == "" {
			reason = "–"
		}
		row = append(row, "`"+reason+"`", fmt.Sprintf("%.1f", tr.Back.Seconds()))
		trows = append(trows, row)
	}
	s.WriteString(Table([]string{"trial", "replica", "first missing write after the cut (s)", "shoal", "SBM rule", "pt-heartbeat",
		"shoal reason", "heal → back in (s)"}, trows))
	fmt.Fprintf(&s, "\nTrials took %s.\n", took.Round(time.Second))
	return s.String()
}

func (b *freshBench) ptCheckString() string {
	var names []string
	for n := range b.ptCheck {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		v := b.ptCheck[n]
		out = append(out, fmt.Sprintf("%s: `--check` %.2f s, the poller's reading %.2f s", n, v[0], v[1]))
	}
	return strings.Join(out, "; ")
}

// ---------------------------------------------------------------------------
// cost of positions

// freshCostState is one measured window: per agent, gossip bytes per
// second (sent in total, sent over UDP and over TCP, received) and CPU in
// % of a core.
type freshCostState struct {
	Out, OutUDP, OutTCP, In, CPU map[string]float64
	Updates                      map[string]float64 // member tag updates the agent's serf processed per second
	Secs                         float64
}

func newFreshCostState() freshCostState {
	return freshCostState{Out: map[string]float64{}, OutUDP: map[string]float64{}, OutTCP: map[string]float64{},
		In: map[string]float64{}, CPU: map[string]float64{}, Updates: map[string]float64{}}
}

// maps lists the state's per-agent maps, for arithmetic over all of them.
func (s freshCostState) maps() []map[string]float64 {
	return []map[string]float64{s.Out, s.OutUDP, s.OutTCP, s.In, s.CPU, s.Updates}
}

// freshUpdates is serf's counter of member updates (a member's tags
// changed), as the agents' /metrics expose it.
const freshUpdates = "shoal_serf_member_update_total"

// Pacing of the cost measurement.
var (
	freshCostSettle = Pick(60*time.Second, 45*time.Second) // after every agent sees every other alive
	freshCostRounds = Pick(3, 2)                           // idle and write windows, alternated
	freshCostSwitch = 5 * time.Second                      // after a state change, before its window
)

// freshMeanState averages states (per agent, then each agent's mean).
func freshMeanState(xs []freshCostState) freshCostState {
	out := newFreshCostState()
	for _, x := range xs {
		out.Secs += x.Secs
		dst, src := out.maps(), x.maps()
		for i := range src {
			for k, v := range src[i] {
				dst[i][k] += v / float64(len(xs))
			}
		}
	}
	return out
}

// freshCostCell is one cluster size.
type freshCostCell struct {
	N, DBs      int
	Mode        string // gossip.positions
	Formed      time.Duration
	Idle, Write []freshCostState // one per round
	Rows        []int            // rows the writer wrote in each write window
}

// freshNode is an agent and its host, for the cost measurement.
type freshNode struct {
	agent *e2e.Agent
	db    bool
}

// measureCost reads every node's gossip counters and CPU time, sleeps
// window, reads them again.
func measureCost(t *testing.T, nodes []freshNode, window time.Duration) freshCostState {
	t.Helper()
	type snap struct {
		g       gossipCount
		cpu     time.Duration
		updates float64
	}
	read := func() (map[string]snap, time.Time) {
		out := map[string]snap{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, len(nodes))
		for _, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := gossipBytes(n.agent.Host)
				if err != nil {
					errs <- err
					return
				}
				u, err := Usage(n.agent.Proc().PID())
				if err != nil {
					errs <- fmt.Errorf("%s: %w", n.agent.Name, err)
					return
				}
				upd, err := agentCounter(n.agent, freshUpdates)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				out[n.agent.Name] = snap{g, u.CPU, upd}
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return out, time.Now()
	}
	a, t0 := read()
	time.Sleep(window)
	z, t1 := read()
	wall := t1.Sub(t0).Seconds()
	st := newFreshCostState()
	st.Secs = wall
	rate := func(x, y uint64) float64 { return float64(x-y) / wall }
	for name, x := range z {
		y := a[name]
		st.OutUDP[name] = rate(x.g.OutUDP, y.g.OutUDP)
		st.OutTCP[name] = rate(x.g.OutTCP, y.g.OutTCP)
		st.Out[name] = st.OutUDP[name] + st.OutTCP[name]
		st.In[name] = rate(x.g.InUDP+x.g.InTCP, y.g.InUDP+y.g.InTCP)
		st.CPU[name] = 100 * (x.cpu - y.cpu).Seconds() / wall
		st.Updates[name] = (x.updates - y.updates) / wall
	}
	return st
}

func freshCostRun(t *testing.T, n int, window time.Duration, mode string) *freshCostCell {
	e2e.RaiseNeighbourLimits(t, n)
	cell := &freshCostCell{N: n, DBs: 3, Mode: mode}
	start := time.Now()
	flags := []string{"--positions", mode}
	c := e2e.NewCluster(t, e2e.Options{FormTimeout: 3 * time.Minute, AgentFlags: flags})
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	var nodes []freshNode
	for _, d := range c.DBs {
		nodes = append(nodes, freshNode{d.Agent, true})
	}
	for _, a := range c.Apps {
		nodes = append(nodes, freshNode{a.Agent, false})
	}
	for i := len(nodes); i < n; i++ {
		h := c.AddHost(t)
		a := c.AddAgent(t, h, e2e.AgentSpec{Name: fmt.Sprintf("app%d", i-len(c.DBs)+1), Role: "app", Key: c.Key, Join: seeds, Extra: flags})
		nodes = append(nodes, freshNode{a, false})
		time.Sleep(100 * time.Millisecond) // staggered joins, as a fleet starts
	}
	// Every agent sees every other alive.
	deadline := time.Now().Add(3 * time.Minute)
	for _, nd := range []freshNode{nodes[0], nodes[len(nodes)-1]} {
		for {
			var mem struct {
				Members []client.Member `json:"members"`
			}
			alive := 0
			if err := c.Get(nd.agent, "/v1/members", &mem); err == nil {
				for _, m := range mem.Members {
					if m.Status == "alive" {
						alive++
					}
				}
			}
			if alive == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("N=%d: %s sees %d of %d members alive after 3 minutes", n, nd.agent.Name, alive, n)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	cell.Formed = time.Since(start)
	// The harness's observer polls four agents 20 times a second: stopped,
	// so that only gossip and probes run during the windows.
	c.Obs.Stop()
	for _, nd := range nodes {
		if err := addGossipCounters(nd.agent.Host); err != nil {
			t.Fatal(err)
		}
	}
	// Joins leave gossip busy for a while (their broadcasts, push-pulls):
	// settle, then alternate the states so that a drift shows as a spread
	// between rounds rather than as a difference between states.
	p := c.Primary().Server
	for _, q := range freshSchema {
		p.MustExec(q)
	}
	time.Sleep(freshCostSettle)
	for r := range freshCostRounds {
		cell.Idle = append(cell.Idle, measureCost(t, nodes, window))
		w := startFreshWriter(p.DB(), freshWriteEvery)
		time.Sleep(freshCostSwitch)
		rows0, _, _ := w.stats()
		cell.Write = append(cell.Write, measureCost(t, nodes, window))
		rows1, errs, lastErr := w.stats()
		w.Stop()
		cell.Rows = append(cell.Rows, rows1-rows0)
		if errs > 0 {
			t.Logf("N=%d round %d: writer: %d failed inserts (last: %s)", n, r+1, errs, lastErr)
		}
		t.Logf("N=%d round %d/%d: idle: %s; writes: %s", n, r+1, freshCostRounds, cell.Idle[r].summary(), cell.Write[r].summary())
		time.Sleep(freshCostSwitch) // the positions stop moving
	}
	return cell
}

// TestFreshnessCost measures what publishing GTID positions costs: gossip
// bytes and agent CPU with the db servers idle and with writes on the
// primary, at 15 (and 50) agents.
func TestFreshnessCost(t *testing.T) {
	e2e.Require(t)
	var sizes []int
	for _, s := range envList("BENCH_FRESH_SIZES", Pick([]string{"15", "50"}, []string{"15"})) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 4 || n > 200 {
			t.Fatalf("BENCH_FRESH_SIZES: %q is not a size in 4..200", s)
		}
		sizes = append(sizes, n)
	}
	window := envDur("BENCH_FRESH_WINDOW", Pick(60*time.Second, 20*time.Second))
	modes := envList("BENCH_FRESH_MODES", []string{gossip.PositionsStream, gossip.PositionsTags})
	for _, m := range modes {
		if m != gossip.PositionsStream && m != gossip.PositionsTags {
			t.Fatalf("BENCH_FRESH_MODES: %q is not %s or %s", m, gossip.PositionsStream, gossip.PositionsTags)
		}
	}
	var cells []*freshCostCell
	for _, n := range sizes {
		for _, mode := range modes {
			var cell *freshCostCell
			// One subtest per cluster: its cleanups tear the cluster down
			// before the next is built.
			if !t.Run(fmt.Sprintf("N=%d/%s", n, mode), func(t *testing.T) { cell = freshCostRun(t, n, window, mode) }) {
				t.FailNow()
			}
			t.Logf("N=%d positions %s formed in %s; idle: %s; writes: %s", n, mode, cell.Formed.Round(time.Second), freshMeanState(cell.Idle).summary(),
				freshMeanState(cell.Write).summary())
			cells = append(cells, cell)
		}
	}
	body := freshCostSection(cells, window)
	WriteSection(t, "71-freshness-cost", body)
	t.Logf("section:\n%s", body)
}

// mean of m's values for the agents keep selects.
func freshMean(m map[string]float64, keep func(string) bool) float64 {
	var sum float64
	n := 0
	for k, v := range m {
		if keep(k) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func freshIsDB(name string) bool { return strings.HasPrefix(name, "db") }

func (s freshCostState) summary() string {
	all := func(string) bool { return true }
	return fmt.Sprintf("gossip out %.0f B/s (UDP %.0f, TCP %.0f), in %.0f B/s, CPU %.2f %% per agent (db agents: out UDP %.0f B/s, CPU %.2f %%)",
		freshMean(s.Out, all), freshMean(s.OutUDP, all), freshMean(s.OutTCP, all), freshMean(s.In, all), freshMean(s.CPU, all),
		freshMean(s.OutUDP, freshIsDB), freshMean(s.CPU, freshIsDB))
}

func freshCostSection(cells []*freshCostCell, window time.Duration) string {
	var s strings.Builder
	s.WriteString("### 7b. Cost of positions: gossip bandwidth and agent CPU\n\n")
	fmt.Fprintf(&s, "Every db agent gossips its server's GTID position; while the primary takes writes the positions change: "+
		"the writer's agent publishes one at most every 250 ms and the replicas' agents at most every 1 s. Two ways, "+
		"each a cluster of its own in the same run (`gossip.positions`): `stream`, the default, sends each position in "+
		"a packet of its own to 3 random agents, each passing a new one on to 3 others once (the health tag carries a "+
		"change of the position alone every 30 s); `tags`, as releases before the stream did, republishes the whole "+
		"health tag at each position, which every agent relays as a memberlist broadcast. Measured: gossip bytes (UDP and TCP from or to port %d, "+
		"counted by `iptables-legacy` rules on each host's eth0: IP packets, without Ethernet headers) and agent CPU "+
		"(utime+stime from `/proc`, %% of one core), and the member tag updates each agent's serf processed (its "+
		"`/metrics`), over %s windows, in two states: the db servers idle (positions "+
		"constant) and one insert every %s on the primary (positions change), alternated %d times once the cluster "+
		"has settled for %s after forming (each figure is the mean of the rounds). The difference is the cost of positions. "+
		"The cluster: the e2e harness's 3 db hosts with real MariaDB and 1 app host with HAProxy, plus app agents "+
		"(no sink) in namespaces of their own up to N; profile `fast`. The harness's `/v1/pool` observer is stopped "+
		"before the windows. The machine is shared (2 cores): CPU figures carry the noise of whatever else ran.\n\n",
		e2e.GossipPort, fd(window), fd(freshWriteEvery), freshCostRounds, fd(freshCostSettle))
	fmt.Fprintf(&s, "Command: %s\n\n", Command("^TestFreshnessCost"))
	if Quick() {
		s.WriteString("**BENCH_QUICK=1 run: short windows (15 agents unless BENCH_FRESH_SIZES says otherwise).**\n\n")
	}
	all := func(string) bool { return true }
	app := func(n string) bool { return !freshIsDB(n) }
	type metric struct {
		label string
		get   func(freshCostState) float64
		unit  string
	}
	metrics := []metric{
		{"member tag updates processed per agent (`" + freshUpdates + "`, /s)", func(x freshCostState) float64 { return freshMean(x.Updates, all) }, "%"},
		{"gossip sent per agent (B/s)", func(x freshCostState) float64 { return freshMean(x.Out, all) }, "B"},
		{"… of which UDP: probes, broadcasts (B/s)", func(x freshCostState) float64 { return freshMean(x.OutUDP, all) }, "B"},
		{"… of which TCP: push-pull (B/s)", func(x freshCostState) float64 { return freshMean(x.OutTCP, all) }, "B"},
		{"gossip received per agent (B/s)", func(x freshCostState) float64 { return freshMean(x.In, all) }, "B"},
		{"gossip sent per db agent (B/s)", func(x freshCostState) float64 { return freshMean(x.Out, freshIsDB) }, "B"},
		{"… of which UDP (B/s)", func(x freshCostState) float64 { return freshMean(x.OutUDP, freshIsDB) }, "B"},
		{"CPU per agent (% of a core)", func(x freshCostState) float64 { return freshMean(x.CPU, all) }, "%"},
		{"CPU per db agent (% of a core)", func(x freshCostState) float64 { return freshMean(x.CPU, freshIsDB) }, "%"},
		{"CPU per app agent (% of a core)", func(x freshCostState) float64 { return freshMean(x.CPU, app) }, "%"},
		{"CPU, all agents together (% of a core)", func(x freshCostState) float64 { return freshMean(x.CPU, all) * float64(len(x.CPU)) }, "%"},
	}
	var rows [][]string
	for _, c := range cells {
		for _, m := range metrics {
			i, w := m.get(freshMeanState(c.Idle)), m.get(freshMeanState(c.Write))
			f := func(v float64) string {
				if m.unit == "B" {
					return fmt.Sprintf("%.0f", v)
				}
				return fmt.Sprintf("%.2f", v)
			}
			diff := f(w - i)
			if w-i >= 0 {
				diff = "+" + diff
			}
			rows = append(rows, []string{fmt.Sprint(c.N), "`" + c.Mode + "`", m.label, f(i), f(w), diff})
		}
	}
	s.WriteString(Table([]string{"agents", "positions", "measure", "db servers idle", "writes on the primary", "difference"}, rows))
	s.WriteString("\n" + freshCostRatios(cells))
	s.WriteString("\nPositions travel in UDP packets either way, so the UDP rows carry their cost. TCP is " +
		"memberlist's periodic push-pull of the full member state; each agent runs one every tens of seconds, so a " +
		"window holds zero or one per agent depending on its phase, and the TCP rows swing by hundreds of B/s between " +
		"windows whatever the state (see the rounds below); the positions add only their few bytes to each push-pull.\n\n")
	for _, c := range cells {
		var idle, write []string
		for r := range c.Idle {
			idle = append(idle, fmt.Sprintf("%.0f+%.0f", freshMean(c.Idle[r].OutUDP, all), freshMean(c.Idle[r].OutTCP, all)))
			write = append(write, fmt.Sprintf("%.0f+%.0f", freshMean(c.Write[r].OutUDP, all), freshMean(c.Write[r].OutTCP, all)))
		}
		fmt.Fprintf(&s, "- N=%d, `%s`: formed in %s; gossip sent per agent in each round (UDP+TCP B/s), idle %s, writes %s; rows written per write window %v.\n",
			c.N, c.Mode, c.Formed.Round(time.Second), strings.Join(idle, " / "), strings.Join(write, " / "), c.Rows)
	}
	return s.String()
}

// freshCostRatios compares, per size, what positions cost (writes less
// idle) with the stream and with the tags, against issue 39's targets:
// per agent at most idle + 2 KB/s and idle + 0.2 % of a core.
func freshCostRatios(cells []*freshCostCell) string {
	all := func(string) bool { return true }
	cost := func(c *freshCostCell) (bytes, cpu float64) {
		i, w := freshMeanState(c.Idle), freshMeanState(c.Write)
		return freshMean(w.Out, all) - freshMean(i.Out, all), freshMean(w.CPU, all) - freshMean(i.CPU, all)
	}
	var s strings.Builder
	for _, st := range cells {
		if st.Mode != gossip.PositionsStream {
			continue
		}
		b, c := cost(st)
		fmt.Fprintf(&s, "- N=%d, `stream`: positions cost %+.0f B/s and %+.2f %% of a core per agent (target ≤ +2000 B/s and ≤ +0.20 %%: %s)",
			st.N, b, c, map[bool]string{true: "met", false: "**not met**"}[b <= 2000 && c <= 0.2])
		for _, tg := range cells {
			if tg.N == st.N && tg.Mode == gossip.PositionsTags {
				tb, tc := cost(tg)
				fmt.Fprintf(&s, "; `tags` in the same run: %+.0f B/s and %+.2f %% (stream ÷ tags: bytes %.2f×, CPU %.2f×)", tb, tc, b/tb, c/tc)
			}
		}
		s.WriteString(".\n")
	}
	return s.String()
}
