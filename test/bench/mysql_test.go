//go:build bench

package bench

// Suites 3 and 4 of issue #7: a replica's mysqld fails (kill -9, SIGSTOP);
// how long until shoal takes it out of the pool on every agent and out of
// its HAProxy, against HAProxy's own mysql-check with the default and with
// tuned timings (suite 3, TestMySQLFailure), what that costs each server,
// and what clients going through each of the three HAProxies feel, with
// `balance leastconn` and with `balance roundrobin` on their read listeners,
// one cluster per algorithm (suite 4, TestClientImpact).
//
//	go test -tags 'bench e2e' -count=1 -v -timeout 60m -run TestMySQLFailure ./test/bench/
//	go test -tags 'bench e2e' -count=1 -v -timeout 60m -run TestClientImpact ./test/bench/

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

const (
	myHXPollEvery = 10 * time.Millisecond // runtime-socket polling of the three HAProxies
	myHookScan    = 20 * time.Millisecond // how often a trial re-reads the hook logs (the times come from the logs)
	// myPhaseSpan: each fault waits a uniformly random time in [0, myPhaseSpan)
	// first, so it lands at a random point of HAProxy's longest check
	// interval (2 s) and of shoal's probe cycle (250 ms).
	myPhaseSpan  = 2 * time.Second
	myDefPort    = 3309 // "HAProxy check, defaults" listener (127.0.0.1 in the app host)
	myTunedPort  = 3310 // "HAProxy check, tuned"
	myDefOpts    = "check"
	myTunedOpts  = "check inter 500ms fall 2 rise 2"
	myRecoverMax = 90 * time.Second
)

// myFault is one way a replica's mysqld fails, and how it is undone.
type myFault struct {
	Name    string // table label
	Short   string // plain text
	Slug    string // file names
	Limit   time.Duration
	Inject  func(d *e2e.DBHost)
	Recover func(d *e2e.DBHost)
}

var myFaults = []myFault{
	{Name: "`kill -9`", Short: "kill -9", Slug: "kill9", Limit: 20 * time.Second,
		Inject: func(d *e2e.DBHost) { d.Server.Kill() }, Recover: func(d *e2e.DBHost) { d.Server.Restart() }},
	{Name: "`SIGSTOP` (hung)", Short: "SIGSTOP (hung)", Slug: "sigstop", Limit: 30 * time.Second,
		Inject: func(d *e2e.DBHost) { d.Server.Stop() }, Recover: func(d *e2e.DBHost) { d.Server.Cont() }},
}

// myBench is the shared setup: the e2e cluster (3 db hosts, 1 app host
// with the shoal-driven HAProxy), a pool-change hook on every agent, and two
// more HAProxies on the app host with HAProxy's own mysql-check. All three
// HAProxies' read listeners use the same `balance` algorithm.
type myBench struct {
	balance string
	c       *e2e.Cluster
	app     *e2e.AppHost
	dir     string
	hook    string
	logs    map[string]string // agent name → its hook log
	shoalHX *myHXPoller
	def     *myCheckHX
	tuned   *myCheckHX
	defP    *myHXPoller
	tunedP  *myHXPoller
}

// mySetupBench builds the setup with `balance <balance>` on the three
// HAProxies' read listeners. Everything goes in t's cleanups.
func mySetupBench(t *testing.T, balance string) *myBench {
	t.Helper()
	e2e.Require(t)
	dir, err := os.MkdirTemp("", "shoal-bench-mysql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("hook logs and HAProxy configs kept in %s", dir)
		}
	})
	b := &myBench{balance: balance, dir: dir, logs: map[string]string{}}
	b.hook = myWritePoolHook(t, dir)
	handler := func(name string) string {
		b.logs[name] = filepath.Join(dir, name+".jsonl")
		return "pool-change=" + b.hook + " " + b.logs[name]
	}
	start := time.Now()
	b.c = e2e.NewCluster(t, e2e.Options{AppConfig: "event_handlers:\n  - " + handler("app1") + "\n", ROBalance: balance})
	c := b.c
	b.app = c.Apps[0]
	t.Logf("cluster formed in %s", c.Formed.Round(time.Millisecond))

	// The harness gives db agents no way to add flags, so each db agent is
	// restarted (graceful leave, same name, address, directory and
	// snapshot) with the pool-change hook, one at a time.
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	for _, d := range c.DBs {
		d.Agent.Stop(10 * time.Second)
		var join []string
		for _, s := range seeds {
			if s != d.Host.IP {
				join = append(join, s)
			}
		}
		na := e2e.NewAgent(t, d.Host, c.Dir, e2e.AgentSpec{Name: d.Name, Role: "db", Key: c.Key, Join: join,
			Extra: []string{"--event-handler", handler(d.Name)}})
		na.Start(t, true)
		d.Agent = na
		since := time.Now()
		if r := c.WaitHealthy(since, 60*time.Second); !r.OK {
			t.Fatalf("after restarting %s with the hook, the cluster did not recover:\n%s", d.Name, c.Describe())
		}
	}

	// HAProxy's mysql-check account: passwordless, from the app host,
	// created on the primary and replicated.
	p := c.Primary().Server
	p.MustExec(fmt.Sprintf("CREATE USER '%s'@'%s'", myCheckUser, b.app.Host.IP))
	var pos string
	if err := p.DB().QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas() {
		var res int
		if err := r.Server.DB().QueryRow(fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', 30)", pos)).Scan(&res); err != nil || res != 0 {
			t.Fatalf("%s did not replicate the check user (result %d, err %v)", r.Name, res, err)
		}
	}
	b.def = myNewCheckHX(t, dir, b.app.Host, "HAProxy check, defaults", "ro_defaults", myDefPort, c.Replicas(), myDefOpts, balance)
	b.tuned = myNewCheckHX(t, dir, b.app.Host, "HAProxy check, tuned", "ro_tuned", myTunedPort, c.Replicas(), myTunedOpts, balance)

	ctx, cancel := context.WithCancel(context.Background())
	b.shoalHX = myStartPoller(t, ctx, b.app.HAProxy, myHXPollEvery)
	b.defP = myStartPoller(t, ctx, b.def.HX, myHXPollEvery)
	b.tunedP = myStartPoller(t, ctx, b.tuned.HX, myHXPollEvery)
	t.Cleanup(cancel) // before the pollers' waits: cleanups run last-in first-out

	// Both check HAProxies must pass their mysql-check on both replicas.
	deadline := time.Now().Add(30 * time.Second)
	for _, ch := range []*myCheckHX{b.def, b.tuned} {
		for {
			st, err := myCheckStatuses(ch.HX, ch.Backend)
			ok := err == nil && len(st) == len(c.Replicas())
			for _, s := range st {
				ok = ok && s == "L7OK"
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: mysql-check not passing: %v %v", ch.Label, st, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("setup (cluster, hooks, check HAProxies; balance %s) took %s", balance, time.Since(start).Round(time.Second))
	return b
}

// key is the HAProxy server key of node in the backend of each mechanism.
func (b *myBench) keys(node string) (shoal, def, tuned string) {
	return e2e.ROBackend + "/" + node, b.def.Backend + "/" + node, b.tuned.Backend + "/" + node
}

// waitRecovered waits until every agent shows the healthy pool, the
// shoal-driven HAProxy matches, and both check HAProxies show every replica
// up. A cluster that does not recover is breakage: the test fails.
func (b *myBench) waitRecovered(t *testing.T, since time.Time) time.Duration {
	t.Helper()
	r := b.c.WaitHealthy(since, myRecoverMax)
	if !r.OK {
		t.Fatalf("cluster did not recover within %s:\n%s", myRecoverMax, b.c.Describe())
	}
	for {
		up := true
		for _, d := range b.c.Replicas() {
			_, dk, tk := b.keys(d.Name)
			up = up && b.defP.current(dk) == "up" && b.tunedP.current(tk) == "up"
		}
		if up {
			return time.Since(since)
		}
		if time.Since(since) > myRecoverMax {
			t.Fatalf("check HAProxies did not bring the replicas back up within %s", myRecoverMax)
		}
		time.Sleep(myHXPollEvery)
	}
}

// myRandomPhase sleeps a uniformly random time in [0, myPhaseSpan).
func myRandomPhase() { time.Sleep(rand.N(myPhaseSpan)) }

// myDetection is one trial of suite 3: seconds from the signal until each
// mechanism took the victim out (absent: not within the limit).
type myDetection struct {
	Shoal    time.Duration            // out of the pool on every agent
	PerAgent map[string]time.Duration // each agent
	HookLag  []time.Duration          // handler start − event time, per agent
	ShoalHX  time.Duration            // the shoal-driven HAProxy set maint
	Def      time.Duration
	Tuned    time.Duration
	Found    map[string]bool // shoal, shoalhx, def, tuned
}

// detect waits until every mechanism took victim out, or limit.
func (b *myBench) detect(victim string, t0 time.Time, limit time.Duration, need []string) myDetection {
	d := myDetection{PerAgent: map[string]time.Duration{}, Found: map[string]bool{}}
	sk, dk, tk := b.keys(victim)
	agents := b.c.AgentNames()
	for {
		for _, a := range agents {
			if _, ok := d.PerAgent[a]; ok {
				continue
			}
			recs, _ := myReadHookLog(b.logs[a])
			if r, ok := myFirstOut(recs, victim, t0); ok {
				d.PerAgent[a] = r.Event.Sub(t0)
				d.HookLag = append(d.HookLag, r.Handler.Sub(r.Event))
			}
		}
		if len(d.PerAgent) == len(agents) && !d.Found["shoal"] {
			d.Found["shoal"] = true
			for _, v := range d.PerAgent {
				d.Shoal = max(d.Shoal, v)
			}
		}
		if at, ok := b.shoalHX.first(sk, t0, "maint", "drain"); ok && !d.Found["shoalhx"] {
			d.Found["shoalhx"], d.ShoalHX = true, at.Sub(t0)
		}
		if at, ok := b.defP.first(dk, t0, "down"); ok && !d.Found["def"] {
			d.Found["def"], d.Def = true, at.Sub(t0)
		}
		if at, ok := b.tunedP.first(tk, t0, "down"); ok && !d.Found["tuned"] {
			d.Found["tuned"], d.Tuned = true, at.Sub(t0)
		}
		all := true
		for _, n := range need {
			all = all && d.Found[n]
		}
		if all || time.Since(t0) > limit {
			return d
		}
		time.Sleep(myHookScan)
	}
}

// ---------------------------------------------------------------------------
// Suite 3

func TestMySQLFailure(t *testing.T) {
	b := mySetupBench(t, "leastconn")
	c := b.c
	trials := Pick(20, 2)
	replicas := c.Replicas()
	mechs := []string{"shoal", "shoalhx", "def", "tuned"}
	type acc struct {
		vals    map[string][]float64
		missing map[string]int
		lags    []float64
		agents  map[string][]float64
	}
	res := map[string]*acc{}
	suiteStart := time.Now()
	for _, f := range myFaults {
		a := &acc{vals: map[string][]float64{}, missing: map[string]int{}, agents: map[string][]float64{}}
		res[f.Slug] = a
		for i := range trials {
			victim := replicas[i%len(replicas)]
			myRandomPhase()
			t0 := time.Now()
			f.Inject(victim)
			d := b.detect(victim.Name, t0, f.Limit, mechs)
			t1 := time.Now()
			f.Recover(victim)
			back := b.waitRecovered(t, t1)
			vals := map[string]time.Duration{"shoal": d.Shoal, "shoalhx": d.ShoalHX, "def": d.Def, "tuned": d.Tuned}
			var line []string
			for _, m := range mechs {
				if d.Found[m] {
					a.vals[m] = append(a.vals[m], vals[m].Seconds())
					line = append(line, fmt.Sprintf("%s=%.3fs", m, vals[m].Seconds()))
				} else {
					a.missing[m]++
					line = append(line, m+"=none")
				}
			}
			for ag, v := range d.PerAgent {
				a.agents[ag] = append(a.agents[ag], v.Seconds())
			}
			a.lags = append(a.lags, Secs(d.HookLag)...)
			t.Logf("%s trial %d/%d on %s: %s (back in %.1fs)", f.Slug, i+1, trials, victim.Name, strings.Join(line, " "), back.Seconds())
		}
	}
	trialTime := time.Since(suiteStart)

	load := myMeasureProbeLoad(t, b)

	// Report.
	labels := map[string]string{
		"shoal":   "shoal: out of the pool on every agent (4 agents)",
		"shoalhx": "shoal: its HAProxy server set `maint`",
		"def":     "HAProxy check, defaults (`check`: inter 2s fall 3 rise 2): DOWN",
		"tuned":   "HAProxy check, tuned (`check inter 500ms fall 2 rise 2`): DOWN",
	}
	refs := map[string]map[string]string{
		"kill9":   {"def": "5.05 / 5.65", "tuned": "0.75 / 1.04"},
		"sigstop": {"def": "10.97 / 11.95", "tuned": "1.83 / 1.97"},
	}
	targets := map[string]float64{"kill9": 0.5, "sigstop": 1.0}
	var rows [][]string
	var body strings.Builder
	var plots strings.Builder
	for _, f := range myFaults {
		a := res[f.Slug]
		var series []Series
		for _, m := range mechs {
			s := Summarize(a.vals[m])
			n := fmt.Sprintf("%d", s.N)
			if a.missing[m] > 0 {
				n += fmt.Sprintf(" (+%d not within %s)", a.missing[m], f.Limit)
			}
			ref, target := refs[f.Slug][m], ""
			if ref == "" {
				ref = "–"
			}
			if m == "shoal" {
				target = fmt.Sprintf("p99 ≤ %.1f s: %s", targets[f.Slug], myMet(s.N > 0 && a.missing[m] == 0 && s.P99 <= targets[f.Slug]))
			}
			rows = append(rows, []string{f.Name, labels[m], n, s.Cells(), ref, target})
			series = append(series, Series{Name: myShortLabel(m), Values: a.vals[m]})
		}
		plots.WriteString(WriteCDF(t, "30-mysql-"+f.Slug, "Replica mysqld "+f.Short+": time until out",
			"seconds from the signal", series))
	}

	fmt.Fprintf(&body, "## 3. MySQL failure: out of the pool everywhere\n\n")
	fmt.Fprintf(&body, "A replica's `mysqld` fails, by `kill -9` (crash: connections reset, new ones refused) or by `SIGSTOP` "+
		"(hung: connections accepted into the backlog, never answered). Measured: the time from the signal until shoal "+
		"has the replica out of the pool on **every** agent (3 db agents + 1 app agent, profile `fast`, probe every "+
		"250 ms with a 500 ms timeout, flap damping off as in the e2e harness), until the HAProxy that shoal drives "+
		"through the runtime API has set the server `maint`, and until two more HAProxy instances on the same app host, "+
		"routing to the same two replicas with HAProxy's own `option mysql-check user %s` (`mode tcp`, `option redispatch`, "+
		"`retries 2`, `balance leastconn`), mark it DOWN: one with `check` (inter 2s fall 3 rise 2), one with "+
		"`check inter 500ms fall 2 rise 2`.\n\n", myCheckUser)
	fmt.Fprintf(&body, "**How.** Real MariaDB 10.11 servers (GTID replication), shoal agents and HAProxy 2.6 in network "+
		"namespaces on one 2-core machine (the e2e harness). %d trials per fault, alternating between the two replicas; "+
		"before each fault the suite waits a uniformly random time in [0, %s) so that the fault lands at a random phase of "+
		"the checks and probes; after each trial the server is restarted (`kill -9`) or sent `SIGCONT` (`SIGSTOP`, held "+
		"until all four mechanisms had it out) and the next trial starts only once every agent's pool, the shoal-driven "+
		"HAProxy and both check HAProxies show it back. Clock: the wall clock of the one machine, which every process shares. "+
		"shoal's times come from a `pool-change` event handler on every agent (`--event-handler 'pool-change=pool-hook.sh LOG'`), "+
		"which appends its own start time and the event's JSON to a log (the e2e harness starts db agents with no extra "+
		"flags, so each db agent is restarted once before the trials, with a graceful leave and the same name and snapshot, "+
		"with the handler); the time used is the event's `time` field (when "+
		"the agent computed the new pool), the first event after the signal that has the replica in no role. The handler "+
		"started %s after that time (median; max %s). HAProxy times: each HAProxy's runtime socket polled with "+
		"`show servers state` every %s; a change is stamped when the answer that shows it arrived (so up to about one "+
		"poll interval late; longest gap between two answers seen: %s).\n\n",
		trials, myPhaseSpan, myFmtDur(myMedian(append(res["kill9"].lags, res["sigstop"].lags...))),
		myFmtDur(myMaxF(append(res["kill9"].lags, res["sigstop"].lags...))), myHXPollEvery, b.maxPollGap())
	fmt.Fprintf(&body, "Command: %s\n\n", Command("TestMySQLFailure"))
	if Quick() {
		body.WriteString("**BENCH_QUICK=1 run: too few trials for the percentiles to mean much.**\n\n")
	}
	body.WriteString("Seconds from the signal; the reference column is the issue's measurement (HAProxy 2.6 + MariaDB 10.11, " +
		"3 servers on loopback, 10 trials, time to DOWN, p50 / max).\n\n")
	body.WriteString(Table([]string{"fault", "mechanism", "trials", "p50", "p90", "p99", "max", "reference p50 / max", "target"}, rows))
	body.WriteString("\nPer agent (shoal, p50 / max): ")
	var per []string
	for _, f := range myFaults {
		var ag []string
		for _, n := range c.AgentNames() {
			s := Summarize(res[f.Slug].agents[n])
			ag = append(ag, fmt.Sprintf("%s %s / %s", n, fmtS(s.P50), fmtS(s.Max)))
		}
		per = append(per, fmt.Sprintf("%s: %s", f.Short, strings.Join(ag, ", ")))
	}
	body.WriteString(strings.Join(per, "; ") + ". The victim's own db agent sees the failure first (its probe); " +
		"the others learn it through gossip.\n\n")
	body.WriteString(plots.String())
	body.WriteString("\n")
	body.WriteString(load)
	fmt.Fprintf(&body, "\nTrials took %s in all.\n", trialTime.Round(time.Second))
	WriteSection(t, "30-mysql", body.String())
	t.Logf("section:\n%s", body.String())
}

func myShortLabel(m string) string {
	return map[string]string{"shoal": "shoal pool, every agent", "shoalhx": "shoal → HAProxy maint",
		"def": "HAProxy check, defaults", "tuned": "HAProxy check, tuned"}[m]
}

func myMet(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (b *myBench) maxPollGap() time.Duration {
	var g time.Duration
	for _, p := range []*myHXPoller{b.shoalHX, b.defP, b.tunedP} {
		_, _, mg, _ := p.stats()
		g = max(g, mg)
	}
	return g.Round(time.Millisecond)
}

func myMedian(xs []float64) float64 { return Summarize(xs).P50 }

func myMaxF(xs []float64) float64 { return Summarize(xs).Max }

func myFmtDur(secs float64) string {
	return (time.Duration(secs * float64(time.Second))).Round(100 * time.Microsecond).String()
}

// myCounters is a window of one server's Questions and Connections.
type myCounters struct {
	q0, c0, q1, c1 int64
	t0, t1         time.Time
	sess0, sess1   int // shoal's sessions before and after
}

func (w myCounters) rates(ownQuestions int64) (qps, cps float64) {
	d := w.t1.Sub(w.t0).Seconds()
	return float64(w.q1-w.q0-ownQuestions) / d, float64(w.c1-w.c0) / d
}

// myWindow measures every db server's counters over d, on one held session
// per server (opened before the window: no connection of ours inside it;
// inside it only the second SHOW GLOBAL STATUS, which rates() subtracts).
func myWindow(t *testing.T, c *e2e.Cluster, d time.Duration) map[string]myCounters {
	t.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, len(c.DBs))
	ws := make([]myCounters, len(c.DBs))
	for i, db := range c.DBs {
		conn, err := db.Server.DB().Conn(ctx)
		if err != nil {
			t.Fatalf("%s: %v", db.Name, err)
		}
		defer conn.Close()
		conns[i] = conn
		if ws[i].sess0, err = myUserConnections(ctx, conn, e2e.ProbeUser); err != nil {
			t.Fatalf("%s: %v", db.Name, err)
		}
	}
	for i, db := range c.DBs {
		var err error
		if ws[i].q0, ws[i].c0, err = myServerCounters(ctx, conns[i]); err != nil {
			t.Fatalf("%s: %v", db.Name, err)
		}
		ws[i].t0 = time.Now()
	}
	time.Sleep(d)
	for i, db := range c.DBs {
		var err error
		if ws[i].q1, ws[i].c1, err = myServerCounters(ctx, conns[i]); err != nil {
			t.Fatalf("%s: %v", db.Name, err)
		}
		ws[i].t1 = time.Now()
	}
	out := map[string]myCounters{}
	for i, db := range c.DBs {
		var err error
		if ws[i].sess1, err = myUserConnections(ctx, conns[i], e2e.ProbeUser); err != nil {
			t.Fatalf("%s: %v", db.Name, err)
		}
		out[db.Name] = ws[i]
	}
	return out
}

// myMeasureProbeLoad measures what shoal's probe costs each server with 10 app
// agents in the cluster, and what one HAProxy's mysql-check costs, and
// returns the report's subsection.
func myMeasureProbeLoad(t *testing.T, b *myBench) string {
	t.Helper()
	c := b.c
	win := Pick(60*time.Second, 10*time.Second)
	// Only shoal may talk to the servers in the first window.
	b.def.Stop()
	b.tuned.Stop()
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	names := c.AgentNames()
	for i := 2; i <= 10; i++ {
		h := c.AddHost(t)
		a := c.AddAgent(t, h, e2e.AgentSpec{Name: fmt.Sprintf("app%d", i), Role: "app", Key: c.Key, Join: seeds})
		c.Obs.Watch(a)
		names = append(names, a.Name)
	}
	want := c.HealthyPool()
	r := c.Obs.WaitAgents(names, time.Now(), 90*time.Second, func(s e2e.Snap) bool {
		if !s.OK() || s.Pool() != want {
			return false
		}
		for _, n := range names {
			if s.Members[n] != "alive" {
				return false
			}
		}
		return true
	})
	if !r.OK {
		t.Fatalf("the 9 extra app agents did not join (every agent alive, healthy pool) within 90 s:\n%s", c.Describe())
	}
	time.Sleep(2 * time.Second) // let the joins' gossip settle
	shoalW := myWindow(t, c, win)

	checkW := map[string]map[string]myCounters{}
	for _, ch := range []*myCheckHX{b.def, b.tuned} {
		ch.Start(t)
		time.Sleep(time.Second)
		checkW[ch.Backend] = myWindow(t, c, win)
		ch.Stop()
	}

	var rows [][]string
	var maxQ, maxSess float64
	checkCPS := map[string][]float64{}
	for _, d := range c.DBs {
		role := "replica"
		if d == c.Primary() {
			role = "primary"
		}
		w := shoalW[d.Name]
		q, cps := w.rates(1)
		maxQ = max(maxQ, q)
		maxSess = max(maxSess, float64(max(w.sess0, w.sess1)))
		row := []string{d.Name + " (" + role + ")", fmt.Sprintf("%.2f", q), fmt.Sprintf("%.3f", cps), fmt.Sprintf("%d / %d", w.sess0, w.sess1)}
		for _, ch := range []*myCheckHX{b.def, b.tuned} {
			cw := checkW[ch.Backend][d.Name]
			cq, ccps := cw.rates(1)
			// What the check adds: minus shoal's own rates of the first window.
			ccps -= cps
			cq -= q
			if !slices.ContainsFunc(c.Replicas(), func(x *e2e.DBHost) bool { return x == d }) {
				row = append(row, "not checked (not in its backend)")
				continue
			}
			checkCPS[ch.Backend] = append(checkCPS[ch.Backend], ccps)
			row = append(row, fmt.Sprintf("%.3f conn/s, %.2f queries/s → ×10 LBs: %.2f conn/s", ccps, cq, 10*ccps))
		}
		rows = append(rows, row)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "### Probe load\n\n")
	fmt.Fprintf(&s, "With 10 app hosts' agents in the cluster (9 more app agents joined, without HAProxy; app agents "+
		"probe nothing), each server's `SHOW GLOBAL STATUS` counters `Questions` and `Connections` were read at the "+
		"start and end of a %s window, over one root session over the unix socket that was opened before the window "+
		"(so it adds no connection; the one `SHOW GLOBAL STATUS` inside the window is subtracted from Questions). "+
		"Nothing else talked to the servers: no client ran, both check HAProxies were stopped. shoal's sessions are the "+
		"`information_schema.PROCESSLIST` rows of user `%s` at the start and end. Then each check HAProxy alone was started "+
		"again for its own %s window; its columns are that window's rates minus the first window's (shoal's) rates. "+
		"The ×10 figures are **computed** (10 × one HAProxy's rate), not measured: every load balancer checks every server "+
		"on its own, while shoal probes each server once whatever the number of app hosts.\n\n",
		win, e2e.ProbeUser, win)
	s.WriteString(Table([]string{"server", "shoal queries/s", "shoal new connections/s", "shoal sessions (start / end)",
		"one HAProxy, `" + myDefOpts + "`", "one HAProxy, `" + myTunedOpts + "`"}, rows))
	fmt.Fprintf(&s, "\nTarget: ≤ 10 queries/s per server from shoal, ≤ 1 persistent connection: %s (highest %.2f queries/s, "+
		"at most %.0f shoal session(s) on a server).",
		myMet(maxQ <= 10 && maxSess <= 1), maxQ, maxSess)
	for _, ch := range []*myCheckHX{b.def, b.tuned} {
		if v := checkCPS[ch.Backend]; len(v) > 0 {
			fmt.Fprintf(&s, " %s: %.2f check connections/s per server from one HAProxy, so %.1f/s from 10 (computed).",
				ch.Label, myMedian(v), 10*myMedian(v))
		}
	}
	s.WriteString("\n")
	return s.String()
}

// ---------------------------------------------------------------------------
// Suite 4

// myClientRate is each client's pace: 100 new connections and queries per second.
const myClientRate = 10 * time.Millisecond

// myImpact is what one client saw in one trial.
type myImpact struct {
	Ops, Failed, Stalled int
	Window               time.Duration // last bad op's end − fault; 0 without bad ops
	Recovery             int           // bad ops started after the resume/restart
	Errs                 map[string]int
}

func (i myImpact) Bad() int { return i.Failed + i.Stalled }

func myMeasureImpact(cl *myLoadClient, t0, resume, end time.Time) myImpact {
	im := myImpact{Errs: map[string]int{}}
	bad := func(o myOp) bool { return o.Err != "" || o.Dur > time.Second }
	for _, o := range cl.Ops(func(o myOp) bool { return o.Start.Before(end) && o.End().After(t0) }) {
		if !o.Start.Before(resume) {
			if bad(o) {
				im.Recovery++
			}
			continue
		}
		im.Ops++
		switch {
		case o.Err != "":
			im.Failed++
			im.Errs[myErrClass(o.Err)]++
		case o.Dur > time.Second:
			im.Stalled++
		}
		if bad(o) {
			im.Window = max(im.Window, o.End().Sub(t0))
		}
	}
	return im
}

// myErrClass shortens a driver error for the report.
func myErrClass(e string) string {
	switch {
	case strings.Contains(e, "invalid connection"):
		return "invalid connection"
	case strings.Contains(e, "deadline exceeded"):
		return "timeout (3 s)"
	case strings.Contains(e, "i/o timeout"):
		return "i/o timeout"
	case strings.Contains(e, "connection refused"):
		return "connection refused"
	case strings.Contains(e, "bad connection"), strings.Contains(e, "EOF"):
		return "connection closed"
	}
	if len(e) > 60 {
		return e[:60]
	}
	return e
}

// myBalances are the `balance` algorithms of the three read listeners that
// suite 4 measures, in this order, each on its own cluster: leastconn (the
// e2e harness's default, and suite 3's) and roundrobin (HAProxy's default).
var myBalances = []string{"leastconn", "roundrobin"}

// myImpactTarget is one HAProxy read listener that a suite 4 client uses.
type myImpactTarget struct {
	key, label string
	port       int
}

var myImpactTargets = []myImpactTarget{
	{"shoal", "shoal-driven HAProxy (no checks)", e2e.ROPort},
	{"def", "HAProxy check, defaults", myDefPort},
	{"tuned", "HAProxy check, tuned", myTunedPort},
}

// myImpactRun is what suite 4 measured with one balance algorithm.
type myImpactRun struct {
	Balance string
	Res     map[string]map[string][]myImpact // fault slug → target key → one per trial
	DownAt  map[string][]float64             // fault slug → seconds until all three HAProxies had the victim out
	Trials  time.Duration                    // time spent in the trials
}

func TestClientImpact(t *testing.T) {
	e2e.Require(t)
	trials := Pick(10, 1)
	var runs []*myImpactRun
	for _, bal := range myBalances {
		run := &myImpactRun{Balance: bal, Res: map[string]map[string][]myImpact{}, DownAt: map[string][]float64{}}
		// One subtest per algorithm: its cleanups tear its cluster down
		// before the next algorithm's cluster is built.
		if !t.Run(bal, func(t *testing.T) { myImpactTrials(t, bal, trials, run) }) {
			t.FailNow()
		}
		runs = append(runs, run)
	}
	body := myImpactSection(runs, trials)
	WriteSection(t, "40-client", body)
	t.Logf("section:\n%s", body)
}

// myImpactTrials builds the setup with `balance <balance>` on all three read
// listeners, runs the trials of every fault into run, and (through t's
// cleanups) tears the setup down.
func myImpactTrials(t *testing.T, balance string, trials int, run *myImpactRun) {
	b := mySetupBench(t, balance)
	c := b.c
	// Several workers: three open-loop clients each dial 100 times a second
	// through this one namespace, and one worker would serialize them.
	dialer, err := e2e.NewNSDialer("/run/netns/"+b.app.Host.NS, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dialer.Close)
	clients := map[string]*myLoadClient{}
	for _, tg := range myImpactTargets {
		cl, err := myStartLoadClient(dialer, tg.port, myClientRate)
		if err != nil {
			t.Fatal(err)
		}
		clients[tg.key] = cl
		t.Cleanup(cl.Stop) // before the cluster goes (last-in first-out)
	}
	time.Sleep(3 * time.Second)
	// A client that cannot even get through a healthy HAProxy is breakage.
	for _, tg := range myImpactTargets {
		now := time.Now()
		ops := clients[tg.key].Ops(func(o myOp) bool { return o.Start.After(now.Add(-2 * time.Second)) })
		okOps := 0
		for _, o := range ops {
			if o.Err == "" {
				okOps++
			}
		}
		if okOps < len(ops)/2 || len(ops) < 50 {
			t.Fatalf("client of %s (balance %s): %d of %d operations succeeded in the warm-up", tg.label, balance, okOps, len(ops))
		}
	}

	replicas := c.Replicas()
	suiteStart := time.Now()
	for _, f := range myFaults {
		run.Res[f.Slug] = map[string][]myImpact{}
		for i := range trials {
			victim := replicas[i%len(replicas)]
			myRandomPhase()
			t0 := time.Now()
			f.Inject(victim)
			// Held (SIGSTOP) or left dead (kill -9) until all three HAProxies
			// have taken it out, or 20 s.
			d := b.detect(victim.Name, t0, 20*time.Second, []string{"shoalhx", "def", "tuned"})
			resume := time.Now()
			run.DownAt[f.Slug] = append(run.DownAt[f.Slug], resume.Sub(t0).Seconds())
			f.Recover(victim)
			b.waitRecovered(t, resume)
			// Every operation started before the resume has ended by now.
			if w := myClientOpTimeout + 500*time.Millisecond - time.Since(resume); w > 0 {
				time.Sleep(w)
			}
			end := time.Now()
			var line []string
			for _, tg := range myImpactTargets {
				im := myMeasureImpact(clients[tg.key], t0, resume, end)
				run.Res[f.Slug][tg.key] = append(run.Res[f.Slug][tg.key], im)
				line = append(line, fmt.Sprintf("%s: %d ops %d failed %d stalled window %.2fs recovery-bad %d %v",
					tg.key, im.Ops, im.Failed, im.Stalled, im.Window.Seconds(), im.Recovery, im.Errs))
			}
			t.Logf("%s %s trial %d/%d on %s (out everywhere after %.2fs; found %v): %s", balance, f.Slug, i+1, trials,
				victim.Name, resume.Sub(t0).Seconds(), d.Found, strings.Join(line, "; "))
		}
	}
	run.Trials = time.Since(suiteStart)
}

// myImpactTable renders one algorithm's table rows, its verdict lines and
// the failed+stalled totals (fault slug → target key → count).
func myImpactTable(run *myImpactRun) (rows [][]string, verdicts []string, totals map[string]map[string]int) {
	totals = map[string]map[string]int{}
	for _, f := range myFaults {
		tot := map[string]int{}
		totals[f.Slug] = tot
		for _, tg := range myImpactTargets {
			ims := run.Res[f.Slug][tg.key]
			var ops, failed, stalled, rec int
			var bads, wins []float64
			errs := map[string]int{}
			for _, im := range ims {
				ops += im.Ops
				failed += im.Failed
				stalled += im.Stalled
				rec += im.Recovery
				bads = append(bads, float64(im.Bad()))
				wins = append(wins, im.Window.Seconds())
				for k, v := range im.Errs {
					errs[k] += v
				}
			}
			tot[tg.key] = failed + stalled
			bs, ws := Summarize(bads), Summarize(wins)
			var ek []string
			for k, v := range errs {
				ek = append(ek, fmt.Sprintf("%s ×%d", k, v))
			}
			slices.Sort(ek)
			errStr := strings.Join(ek, ", ")
			if errStr == "" {
				errStr = "–"
			}
			rows = append(rows, []string{f.Name, tg.label, fmt.Sprint(ops), fmt.Sprint(failed), fmt.Sprint(stalled),
				fmt.Sprint(failed + stalled), fmt.Sprintf("%.0f / %.0f", bs.P50, bs.Max),
				fmt.Sprintf("%s / %s", fmtS(ws.P50), fmtS(ws.Max)), fmt.Sprint(rec), errStr})
		}
		ratio := func(a, b int) string {
			if b == 0 {
				if a == 0 {
					return "0 / 0"
				}
				return fmt.Sprintf("%d / 0 (∞)", a)
			}
			return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
		}
		var verdict string
		if f.Slug == "sigstop" {
			ok := float64(tot["shoal"]) <= 0.10*float64(tot["def"]) && float64(tot["shoal"]) <= 0.50*float64(tot["tuned"])
			verdict = fmt.Sprintf("target ≤ 10 %% of defaults and ≤ 50 %% of tuned: %s", myMet(ok))
		} else {
			ok := tot["shoal"] <= tot["def"] && tot["shoal"] <= tot["tuned"]
			verdict = fmt.Sprintf("target no worse than either: %s", myMet(ok))
		}
		verdicts = append(verdicts, fmt.Sprintf("- `balance %s`, %s: shoal's failed+stalled operations are %s of defaults' (%d vs %d) and %s of tuned's (%d vs %d); %s.",
			run.Balance, f.Name, ratio(tot["shoal"], tot["def"]), tot["shoal"], tot["def"], ratio(tot["shoal"], tot["tuned"]), tot["shoal"], tot["tuned"], verdict))
	}
	return rows, verdicts, totals
}

// myImpactSection renders the 40-client section from the runs (one per
// balance algorithm, in myBalances' order).
func myImpactSection(runs []*myImpactRun, trials int) string {
	var balances, downs []string
	for _, r := range runs {
		balances = append(balances, "`balance "+r.Balance+"`")
		downs = append(downs, fmt.Sprintf("`balance %s`: `kill -9` p50 %s s, `SIGSTOP` p50 %s s", r.Balance,
			fmtS(myMedian(r.DownAt["kill9"])), fmtS(myMedian(r.DownAt["sigstop"]))))
	}
	var body strings.Builder
	body.WriteString("## 4. Client impact\n\n")
	fmt.Fprintf(&body, "What applications feel while a replica's `mysqld` fails. Three clients run at the same time in the app "+
		"host's namespace, one per HAProxy read listener of suite 3's setup: the one shoal drives (no health checks, "+
		"servers set `ready`/`maint` by the shoal agent), the one with `%s` and the one with `%s` (both `option mysql-check`; "+
		"all three `mode tcp`, `option redispatch`, `retries 2`, the same `balance` algorithm, routing to the same two replicas). "+
		"Each client starts one operation every %s (100/s) on a schedule that does not wait for earlier operations (open "+
		"loop, like many application threads): a new connection, `SELECT @@server_id`, close; the driver's connect, read "+
		"and write timeouts are %s and each operation is cut at %s (the e2e client's settings). The suite runs once per "+
		"balance algorithm of the three read listeners, %s, each on a freshly built cluster (built, measured, torn down "+
		"before the next).\n\n",
		myDefOpts, myTunedOpts, myClientRate, myClientIOTimeout, myClientOpTimeout, strings.Join(balances, " then "))
	fmt.Fprintf(&body, "**How.** %d trials per fault and algorithm, alternating between the two replicas, each after a uniformly random "+
		"wait in [0, %s). `kill -9`: the server stays dead until all three HAProxies have taken it out (or 20 s), then "+
		"restarts; `SIGSTOP`: held until all three have taken it out (or 20 s), then `SIGCONT`. The next trial starts "+
		"once every agent's pool and all three HAProxies show the replica back. Counted per trial and client: the "+
		"operations that were running at the fault or started between the fault and the restart/`SIGCONT` (\"ops\"); "+
		"**failed** (an error) and **stalled** (succeeded but took more than 1 s; a failure that took long counts as "+
		"failed only, so failed+stalled counts each bad operation once); the **window**, from the fault to the end of "+
		"the last failed or stalled operation (0 without any); and, separately, bad operations started after the "+
		"restart/`SIGCONT` until the trial ended (\"after resume\"). Clock: the machine's wall clock. Time from the "+
		"fault until all three HAProxies had it out (when the fault was lifted): %s.\n\n",
		trials, myPhaseSpan, strings.Join(downs, "; "))
	fmt.Fprintf(&body, "Command: %s\n\n", Command("TestClientImpact"))
	if Quick() {
		body.WriteString("**BENCH_QUICK=1 run: too few trials for the figures to mean much.**\n\n")
	}
	body.WriteString("Why the algorithm matters: with `leastconn` a server whose connections are stuck keeps them counted " +
		"as active, so HAProxy sends nearly every new connection to the other replica until the stuck ones end, whether " +
		"or not anything has taken the server out; that, more than the health check, is what keeps the check HAProxies' " +
		"counts low under `leastconn`. With `roundrobin` (HAProxy's default) HAProxy keeps sending every other new " +
		"connection to the failed server, however many are stuck there, until the server is taken out (set `maint` by " +
		"shoal, marked DOWN by a check), so the cost grows with the time to take it out, which is what the health " +
		"mechanism decides. During a hang HAProxy's own connect to the stopped server still succeeds (the kernel accepts " +
		"into the listen backlog), so `option redispatch` does not move those connections: the client's 2 s read timeout " +
		"ends them. After `kill -9` the connect is refused at once; HAProxy retries after a turn-around of min(`timeout " +
		"connect`, 1 s) and `option redispatch` moves only the last of the `retries 2` to the other server, so an " +
		"operation routed to the dead server before it is taken out can succeed about 2 s late (stalled) instead of " +
		"failing; under `leastconn` the connections waiting out the turn-around count as active too.\n\n")

	sum := map[string]map[string]map[string]int{} // balance → fault → target → failed+stalled
	for _, r := range runs {
		rows, verdicts, totals := myImpactTable(r)
		sum[r.Balance] = totals
		fmt.Fprintf(&body, "### `balance %s`\n\n", r.Balance)
		body.WriteString(Table([]string{"fault", "HAProxy", "ops", "failed", "stalled (> 1 s)", "failed+stalled",
			"per trial p50 / max", "window p50 / max (s)", "bad after resume", "errors"}, rows))
		body.WriteString("\n" + strings.Join(verdicts, "\n") + "\n")
		fmt.Fprintf(&body, "\nTrials took %s.\n\n", r.Trials.Round(time.Second))
	}

	// Side by side: failed+stalled per algorithm.
	head := []string{"fault", "HAProxy"}
	for _, r := range runs {
		head = append(head, "failed+stalled, `"+r.Balance+"`")
	}
	var rows [][]string
	for _, f := range myFaults {
		for _, tg := range myImpactTargets {
			row := []string{f.Name, tg.label}
			for _, r := range runs {
				row = append(row, fmt.Sprint(sum[r.Balance][f.Slug][tg.key]))
			}
			rows = append(rows, row)
		}
	}
	body.WriteString("### Side by side\n\n")
	body.WriteString(Table(head, rows))
	var total time.Duration
	for _, r := range runs {
		total += r.Trials
	}
	fmt.Fprintf(&body, "\nTrials took %s in all (cluster setups not counted).\n", total.Round(time.Second))
	return body.String()
}
