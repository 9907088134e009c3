//go:build bench

package bench

// Host-crash detection while the primary takes writes (issue 39: failure
// detection must not depend on how busy the primary is). Every insert moves
// the primary's GTID position, which its agent republishes in its tags;
// every agent relays those updates as memberlist broadcasts, which share
// the queue and the packets with the suspicion and dead messages of a
// failure. So the same crash is timed with the db servers idle and with
// the primary taking writes, alternated in one run.
//
//	go test -tags 'bench e2e' -count=1 -v -timeout 30m -run '^TestDetectionUnderWrites$' ./test/bench/

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
	"github.com/shoaldb/shoal/test/e2e"
)

const (
	detwN          = 15
	detwWriteEvery = 10 * time.Millisecond // 100 inserts/s asked, so that a slow insert leaves well over detwMinRate
	detwMinRate    = 50.0                  // rows/s: a write trial below it does not measure what it claims
	detwLimit      = 30 * time.Second      // a crash not seen failed by every survivor by then fails the test
	detwSwitch     = 5 * time.Second       // from a state change to the crash: positions moving, or still again
	detwUpdWindow  = 2 * time.Second       // the end of that pause, over which the tag updates are counted
	detwBackLimit  = time.Minute           // agent restarted → every agent sees every member alive
)

// detwSettle is the pause after the cluster formed: joins leave gossip
// busy for a while (their broadcasts, push-pulls).
var detwSettle = Pick(30*time.Second, 10*time.Second)

// detwTrial is one crash.
type detwTrial struct {
	write       bool
	victim      string
	first, last float64 // seconds from the kill until the first and the last survivor logged member-failed
	seen        bool    // every survivor did within detwLimit
	rate        float64 // write trials: rows committed per second from the kill until the last survivor
	collateral  int     // member-failed for members other than the victim, from the kill until all alive again
	updates     float64 // member tag updates app1's serf processed per second over the last 2-3 s before the kill
}

// TestDetectionUnderWrites measures host-crash detection at N = 15: the
// e2e harness's 3 db hosts with real MariaDB (db1 the writer, db2 and db3
// replicas) and app agents up to 15, profile fast, no consensus. An app
// host's agent is killed (kill -9, suite 1's crash; not a db host, which
// would disturb the writes) with the db servers idle or with the primary
// taking an insert every 10 ms, trials alternated so that the machine's
// noise hits both states alike. BENCH_DETW_TRIALS (default 20; QUICK 4)
// sets the trials per state.
func TestDetectionUnderWrites(t *testing.T) {
	e2e.Require(t)
	trials := Pick(20, 4)
	if v := os.Getenv("BENCH_DETW_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			t.Fatalf("BENCH_DETW_TRIALS: %q is not a trial count in 1..500", v)
		}
		trials = n
	}
	stamp, _ := Tools(t)
	e2e.RaiseNeighbourLimits(t, detwN)
	start := time.Now()
	// Every agent stamps member events with the program suite 1 uses.
	handler := []string{"--event-handler", fmt.Sprintf("member-failed,member-join,member-leave=%s {dir}/stamps", stamp)}
	c := e2e.NewCluster(t, e2e.Options{AgentFlags: handler, FormTimeout: 3 * time.Minute})
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	agents := c.Agents()
	var victims []*e2e.Agent
	for i := len(agents); i < detwN; i++ {
		a := c.AddAgent(t, c.AddHost(t), e2e.AgentSpec{Name: fmt.Sprintf("app%d", i-len(c.DBs)+1), Role: "app", Key: c.Key,
			Join: seeds, Extra: handler})
		agents = append(agents, a)
		victims = append(victims, a)
		time.Sleep(100 * time.Millisecond) // staggered joins, as a fleet starts
	}
	if err := detwAllAlive(c, agents, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	formed := time.Since(start)
	// The harness's observer polls four agents 20 times a second: stopped,
	// so that only gossip, probes and the writes run during the trials.
	c.Obs.Stop()
	// GCluster's stamp readers need only each agent's name and stamp file.
	sc := &GCluster{}
	nodes := map[string]*GNode{}
	for _, a := range agents {
		n := &GNode{Name: a.Name, Stamps: filepath.Join(a.Dir, "stamps")}
		sc.Nodes = append(sc.Nodes, n)
		nodes[a.Name] = n
	}
	// app1 (never crashed) shows that the writes reach the gossip: the
	// positions' tag updates its serf processed.
	watch := c.Apps[0].Agent
	p := c.Primary().Server
	for _, q := range freshSchema {
		p.MustExec(q)
	}
	time.Sleep(detwSettle)

	var res []detwTrial
	t1 := time.Now()
	for i := range 2 * trials {
		// Each idle/write pair crashes the same host; pairs rotate over
		// the app hosts without a sink.
		v := victims[(i/2)%len(victims)]
		tr := detwTrial{write: i%2 == 1, victim: v.Name}
		var w *freshWriter
		if tr.write {
			w = startFreshWriter(p.DB(), detwWriteEvery)
			t.Cleanup(w.Stop)
		}
		time.Sleep(detwSwitch - detwUpdWindow)
		u0, err := agentCounter(watch, freshUpdates)
		if err != nil {
			t.Fatal(err)
		}
		u0At := time.Now()
		time.Sleep(detwUpdWindow)
		Jitter(time.Second)
		u1, err := agentCounter(watch, freshUpdates)
		if err != nil {
			t.Fatal(err)
		}
		tr.updates = (u1 - u0) / time.Since(u0At).Seconds()
		others := sc.Others(nodes[v.Name])
		t0 := time.Now()
		v.Kill()
		first, last, seen, ok := sc.WaitSeen(others, "member-failed", v.Name, t0, detwLimit)
		tr.first, tr.last, tr.seen = first.Seconds(), last.Seconds(), ok
		if !ok {
			t.Errorf("trial %d (%s): only %d of %d survivors saw %s failed within %s", i+1, detwState(tr.write), seen, len(others), v.Name, detwLimit)
			last = detwLimit
		}
		if w != nil {
			tr.rate = float64(w.rowsBetween(t0, t0.Add(last))) / last.Seconds()
			if tr.rate < detwMinRate {
				_, errs, lastErr := w.stats()
				t.Errorf("trial %d: the primary took %.1f rows/s during the trial, below %.0f (%d failed inserts so far, last error %q)",
					i+1, tr.rate, detwMinRate, errs, lastErr)
			}
		}
		back := time.Now()
		v.Start(t, true)
		if _, _, n, ok := sc.WaitSeen(others, "member-join", v.Name, back, detwBackLimit); !ok {
			t.Fatalf("trial %d: only %d of %d survivors saw %s join again within %s of its restart", i+1, n, len(others), v.Name, detwBackLimit)
		}
		if err := detwAllAlive(c, agents, detwBackLimit); err != nil {
			t.Fatalf("trial %d, after %s's restart: %v", i+1, v.Name, err)
		}
		tr.collateral = countFailed(sc.Stamps(), t0, time.Now(), v.Name, v.Name)
		if w != nil {
			w.Stop()
		}
		res = append(res, tr)
		t.Logf("trial %d/%d (%s, %s): first %.3fs last %.3fs, %.1f rows/s, %.1f tag updates/s before, %d healthy members reported failed",
			i+1, 2*trials, detwState(tr.write), v.Name, tr.first, tr.last, tr.rate, tr.updates, tr.collateral)
	}
	body := detwSection(res, formed, time.Since(t1))
	WriteSection(t, "72-detection-under-writes", body)
	t.Logf("section:\n%s", body)
}

func detwState(write bool) string {
	if write {
		return "writes"
	}
	return "idle"
}

// detwAllAlive waits until every agent's /v1/members shows every one of
// agents alive.
func detwAllAlive(c *e2e.Cluster, agents []*e2e.Agent, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		last := ""
		for _, a := range agents {
			var mem struct {
				Members []client.Member `json:"members"`
			}
			if err := c.Get(a, "/v1/members", &mem); err != nil {
				last = err.Error()
				break
			}
			st := map[string]string{}
			for _, m := range mem.Members {
				st[m.Name] = m.Status
			}
			for _, b := range agents {
				if st[b.Name] != "alive" {
					last = fmt.Sprintf("%s sees %s %q", a.Name, b.Name, st[b.Name])
					break
				}
			}
			if last != "" {
				break
			}
		}
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every agent sees every member alive after %s: %s", limit, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func detwSection(res []detwTrial, formed, took time.Duration) string {
	var s strings.Builder
	s.WriteString("### 7c. Host-crash detection while the primary takes writes (issue 39)\n\n")
	fmt.Fprintf(&s, "Does failure detection depend on how busy the primary is? Every write moves the primary's GTID position, "+
		"which its agent republishes in its tags (at most every 250 ms; the replicas' agents theirs at most every 1 s, see 7b), "+
		"and every agent relays those updates: broadcasts that share memberlist's queue and packets with the suspicion and dead "+
		"messages of a failure. Measured: an app host's agent killed (`kill -9`, suite 1's crash; never a db host, which would "+
		"disturb the writes) → every survivor's event handler has run for `member-failed` (suite 1's `stamp` program; per trial "+
		"the slowest of the %d survivors counts), in two states: the db servers idle, and one insert every %s on the primary "+
		"(a goroutine on a direct connection to db1's mysqld, as in 7b). Trials alternate idle, writes, idle, writes… so that "+
		"the machine's noise hits both states alike; each pair crashes the same host, pairs rotate over the app hosts. "+
		"The writer starts %s before a write trial's crash and stops once the crashed agent is back (an idle trial also waits "+
		"%s: the positions stand still again), then a random 0–1 s pause puts the crash at a random phase of the probe rounds. "+
		"After each crash the agent is restarted and the next trial waits until every agent sees every member alive. "+
		"The write rate is the rows committed from the kill until the last survivor saw it failed, per second; that the writes "+
		"reach the gossip shows in the member tag updates app1 (never crashed) processed per second over the last %s of the pause and the random wait before each kill "+
		"(`%s` from its `/metrics`). "+
		"The cluster: the e2e harness's 3 db hosts with real MariaDB (db1 the writer, db2 and db3 GTID replicas) and 1 app host "+
		"with HAProxy, plus app agents in network namespaces of their own up to %d; profile `fast`, no consensus; the harness's "+
		"`/v1/pool` observer stopped before the trials. The cluster formed in %s; the trials took %s.\n\n",
		detwN-1, fd(detwWriteEvery), fd(detwSwitch), fd(detwSwitch), fd(detwUpdWindow), freshUpdates, detwN, formed.Round(time.Second), took.Round(time.Second))
	s.WriteString("Command: `sudo go test -tags 'bench e2e' -count=1 -v -timeout 30m -run '^TestDetectionUnderWrites$' ./test/bench/` " +
		"(`BENCH_QUICK=1` for a short run; `BENCH_DETW_TRIALS` sets the trials per state)\n\n")
	if Quick() {
		s.WriteString("**BENCH_QUICK=1 run: too few trials for the percentiles to mean much (p90 and p99 are the maximum).**\n\n")
	}
	det := map[bool][]float64{}
	var rates []float64
	missed, coll := map[bool]int{}, map[bool]int{}
	upd := map[bool][]float64{}
	for _, tr := range res {
		coll[tr.write] += tr.collateral
		upd[tr.write] = append(upd[tr.write], tr.updates)
		if tr.write {
			rates = append(rates, tr.rate)
		}
		if !tr.seen {
			missed[tr.write]++
			continue
		}
		det[tr.write] = append(det[tr.write], tr.last)
	}
	st := map[bool]Stats{false: Summarize(det[false]), true: Summarize(det[true])}
	rs := Summarize(rates)
	var rows [][]string
	for _, write := range []bool{false, true} {
		rate := "– | –"
		if write {
			rate = fmt.Sprintf("%.0f | %.0f", rs.Min, rs.P50)
		}
		rows = append(rows, []string{detwState(write), fmt.Sprint(st[write].N + missed[write]), fmt.Sprint(missed[write]),
			st[write].Cells(), rate, fmt.Sprintf("%.1f", Summarize(upd[write]).P50), fmt.Sprint(coll[write])})
	}
	s.WriteString("Kill → every survivor sees `failed` (seconds, slowest survivor per trial):\n\n")
	s.WriteString(Table([]string{"state", "trials", "not seen by all in " + durText(detwLimit), "p50", "p90", "p99", "max",
		"write rate min (rows/s)", "p50", "tag updates/s at app1, p50", "healthy members reported failed"}, rows))
	idle, wr := st[false], st[true]
	fmt.Fprintf(&s, "\nWrites ÷ idle: p50 %s (%s s vs %s s), p99 %s (%s s vs %s s).\n\n",
		freshRatio(wr.P50, idle.P50), fmtS(wr.P50), fmtS(idle.P50), freshRatio(wr.P99, idle.P99), fmtS(wr.P99), fmtS(idle.P99))
	verdict := "**not held**"
	if idle.N > 0 && wr.N > 0 && wr.P99 <= 1.1*idle.P99 {
		verdict = "held"
	}
	fmt.Fprintf(&s, "Target (issue 39): host-crash detection with writes, p99 within 10 %% of idle, same run: %s.\n\n", verdict)
	s.WriteString("Per trial:\n\n")
	var trows [][]string
	for i, tr := range res {
		first, last, rate := fmtS(tr.first), fmtS(tr.last), "–"
		if !tr.seen {
			last = "not by all in " + durText(detwLimit)
		}
		if tr.first < 0 {
			first = "–" // nobody saw it
		}
		if tr.write {
			rate = fmt.Sprintf("%.0f", tr.rate)
		}
		trows = append(trows, []string{fmt.Sprint(i + 1), detwState(tr.write), tr.victim, first, last, rate,
			fmt.Sprintf("%.1f", tr.updates), fmt.Sprint(tr.collateral)})
	}
	s.WriteString(Table([]string{"trial", "state", "crashed", "first survivor (s)", "last survivor (s)", "write rate (rows/s)",
		"tag updates/s at app1", "healthy members reported failed"}, trows))
	return s.String()
}
