//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/soakcheck"
)

// The soak test (issue 17): 3 db hosts (MariaDB with GTID replication and a
// shoal agent each) and 2 app hosts (shoal driving HAProxy, and a client
// writing through it), one random fault every 20-40 s for SOAK (a Go
// duration), the invariants checked on every sample of every agent and
// HAProxy (package soakcheck), the agents' resources sampled each minute.
// The report goes to build/soak/; a run of an hour or more also writes
// docs/soak.md and docs/soak/soak.svg.
//
//	make soak                  # one hour
//	SOAK=3m make soak          # what CI runs
//	SOAK=1h SOAK_SEED=42 make soak
//	SOAK=4m SOAK_FAULTS=silent-cut make soak   # only these fault kinds
//	SOAK=3m SOAK_CONSENSUS=0 make soak         # without writer terms
//
// By default the agents run with writer terms (issue 26): the db agents
// are raft voters and every agent routes writes only to the term holder;
// the soak then also checks the terms (soak_terms_test.go, soakcheck's
// terms.go). SOAK_CONSENSUS=0 runs them the old way, without terms.
const (
	soakConverge = 3 * time.Second // every pool healthy again within this of a heal
	// The agents' consensus.lease and consensus.fence_after (the defaults):
	// a writer cut off from the voters' majority for about its lease fences
	// itself, and takes writes again fence_after after contact is back
	// (soakcheck.Fault.Unfence).
	soakLease      = 5 * time.Second
	soakFenceAfter = 3 * time.Second
	// soakFenceMargin: a primary cut off for longer than soakLease minus
	// this may fence. Its lease counts from its last contact with a raft
	// leader, a heartbeat before the cut, to the leader's first heartbeat
	// after the heal, which raft sends after the backoff its failed ones
	// grew: 1.36 s after a 3.5 s cut of db1 (seed 1796473891175907393,
	// replayed on ae3bcb4 too), so the lease ran out 5.07 s after the last
	// contact and the writer fenced after a cut shorter than it.
	soakFenceMargin = 2 * time.Second
	soakAllowance   = 10 * time.Second // a faulted node may stay out this long after its heal
	soakWriteTick   = 200 * time.Millisecond
	soakFreshTick   = 100 * time.Millisecond // the freshness clients' write and read pace
	// soakMaxLag is the agents' pool.max_lag (the default: the harness
	// sets none); a read staler than it plus a second is a stale read.
	soakMaxLag  = 10 * time.Second
	soakFullRun = time.Hour // runs at least this long write docs/soak.md
)

// soakRun is one run's state: the cluster, the random source and what it
// recorded.
type soakRun struct {
	t     *testing.T
	c     *Cluster
	rng   *rand.Rand
	start time.Time

	kinds     []soakFault // the fault kinds drawn from
	terms     *termWatch  // nil without consensus
	faults    []soakcheck.Fault
	primaries []soakcheck.Primary
	readOnly  []soakcheck.Window // switchovers and lease fences: see soakcheck.CheckWrites
	cutOff    []soakCut          // app hosts cut off from the primary: see cutOffWindows
}

// soakCut is an app host cut off from the primary until a heal.
type soakCut struct {
	client, primary string
	from, heal      time.Time
}

// cutOffWindows are the spans in which each app host could not know the
// primary's position (soakcheck.CheckReads): from the cut until its agent
// saw the primary alive again after the heal, its first news of the
// writes its side missed (the observer's samples, 50 ms apart; at most
// soakConverge after the heal: a router slower than that fails the
// convergence check, and its later reads count).
func (r *soakRun) cutOffWindows() []soakcheck.CutOff {
	var out []soakcheck.CutOff
	for _, c := range r.cutOff {
		to := c.heal.Add(soakConverge)
		for _, sn := range r.c.Obs.Snaps(c.client, c.heal, to) {
			if sn.OK() && sn.Members[c.primary] == "alive" {
				to = sn.At
				break
			}
		}
		out = append(out, soakcheck.CutOff{Client: c.client, Window: soakcheck.Window{From: c.from, To: to}})
	}
	return out
}

func TestSoak(t *testing.T) {
	spec := os.Getenv("SOAK")
	if spec == "" {
		t.Skip("TestSoak runs only with SOAK set to a duration: run it with `make soak` (one hour) or `SOAK=3m make soak`")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < time.Minute {
		t.Fatalf("SOAK=%q: want a Go duration of at least 1m (e.g. 3m, 1h)", spec)
	}
	Require(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", s, err)
		}
	}
	kinds, err := soakKinds(os.Getenv("SOAK_FAULTS"))
	if err != nil {
		t.Fatal(err)
	}
	consensus := os.Getenv("SOAK_CONSENSUS") != "0"
	replay := fmt.Sprintf("SOAK=%s SOAK_SEED=%d", spec, seed)
	if s := os.Getenv("SOAK_FAULTS"); s != "" {
		replay += " SOAK_FAULTS=" + s
	}
	if !consensus {
		replay += " SOAK_CONSENSUS=0"
	}
	replay += " make soak"
	t.Logf("soak: %s, seed %d (replay: %s)", dur, seed, replay)

	opts := Options{AppHosts: 2}
	if consensus {
		ckey := Keygen(t)
		opts.DBFlags, opts.AppFlags = ConsensusFlags(ckey, 3), ConsensusAppFlags(ckey)
	}
	c := NewCluster(t, opts)
	r := &soakRun{t: t, c: c, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), start: time.Now(), kinds: kinds}
	r.primaries = []soakcheck.Primary{{At: r.start, Name: c.Primary().Name}}
	if consensus {
		r.terms = startTermWatch(c)
		defer r.terms.Stop()
	}
	t.Logf("soak: cluster formed in %s; faults start in 10 s", c.Formed.Round(time.Millisecond))

	var clients []*Client
	for _, a := range c.Apps {
		// RETURNING v: the server_id of the server that took the write.
		cl, err := StartClient(a.Host, RWPort, "INSERT INTO e2e.t (v) VALUES (@@server_id) RETURNING v", soakWriteTick)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Stop()
		clients = append(clients, cl)
	}
	// The freshness clients: each app host writes numbered rows through its
	// write port and reads the newest back through its read port.
	c.Primary().Server.MustExec(FreshSchema)
	pos := gtidPos(t, c.Primary().Server)
	for _, d := range c.Replicas() {
		waitGTID(t, d.Server, pos, 30*time.Second)
	}
	var fresh []*FreshClient
	for i, a := range c.Apps {
		fc, err := StartFreshClient(a.Host, RWPort, ROPort, seed, int64(i+1), soakFreshTick)
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Stop()
		fresh = append(fresh, fc)
	}
	res := startResources(t, c, resourceEvery(dur))
	end := r.start.Add(dur)
	// The report is written even when a fault's harness call ends the test
	// early (t.Fatal): what was observed until then is judged.
	completed := false
	defer func() {
		res.Stop()
		if r.terms != nil {
			r.terms.Stop()
		}
		stop := end
		if !completed {
			stop = time.Now()
		}
		result := r.judge(stop, clients, fresh, res)
		result.Seed, result.Replay, result.Duration = seed, replay, stop.Sub(r.start)
		if !completed {
			result.Notes = append(result.Notes, fmt.Sprintf("**The run stopped early**, after %s of %s: see the test log.", stop.Sub(r.start).Round(time.Second), dur))
		}
		r.write(result, completed && dur >= soakFullRun)
		for _, x := range result.Reads.Stale[:min(len(result.Reads.Stale), 20)] {
			t.Logf("soak: stale read at +%s by %s's client, served by %s: %s stale", x.Start.Sub(r.start).Round(100*time.Millisecond), x.Client, x.Node, x.Stale.Round(10*time.Millisecond))
		}
		for _, f := range result.Failures() {
			t.Errorf("soak: %s", f)
		}
	}()
	r.faultLoop(end)
	// A fault that started before the end may heal after it (packet loss
	// lasts 30 s): watch its convergence window to the full, too.
	if n := len(r.faults); n > 0 {
		if last := r.faults[n-1].Heal.Add(soakConvergeWindow); last.After(end) {
			end = last
		}
	}
	time.Sleep(time.Until(end))
	completed = true
}

// soakConvergeWindow is the least time after a fault heals before the next
// fault or the end of the run: the window in which convergence is measured.
const soakConvergeWindow = 8 * time.Second

// resourceEvery is the resource sampling interval: each minute, or a
// twelfth of a shorter run.
func resourceEvery(dur time.Duration) time.Duration { return min(time.Minute, dur/12) }

// faultLoop injects one fault at a time until end: the next one 20-40 s
// after the previous one started, and at least 8 s after it healed (the
// window in which convergence is measured), none starting within 20 s of
// the end.
func (r *soakRun) faultLoop(end time.Time) {
	next := r.start.Add(10 * time.Second)
	for next.Add(20 * time.Second).Before(end) {
		time.Sleep(time.Until(next))
		kind := r.kinds[r.rng.IntN(len(r.kinds))]
		f := kind.run(r)
		f.Kind = kind.name
		r.faults = append(r.faults, f)
		r.t.Logf("soak: +%s %s %s, healed after %s", f.Start.Sub(r.start).Round(time.Second), f.Kind, f.Target, f.Heal.Sub(f.Start).Round(time.Millisecond))
		next = f.Start.Add(r.between(20*time.Second, 40*time.Second))
		if earliest := f.Heal.Add(soakConvergeWindow); next.Before(earliest) {
			next = earliest
		}
	}
}

// between is a random duration in [lo, hi].
func (r *soakRun) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

// judge collects every sample taken since the start and runs the checks.
func (r *soakRun) judge(end time.Time, clients []*Client, fresh []*FreshClient, res *resources) soakcheck.Result {
	c := r.c
	var samples []soakcheck.Sample
	var observers []string
	for _, a := range c.Agents() {
		observers = append(observers, a.Name)
		for _, s := range c.Obs.Snaps(a.Name, r.start, end) {
			samples = append(samples, soakcheck.Sample{At: s.At, Observer: a.Name, OK: s.OK(), Writers: s.Writers, Readers: s.Readers})
		}
	}
	for _, a := range c.Apps {
		name := "hx:" + a.Name
		observers = append(observers, name)
		for _, h := range c.Obs.HXSnaps(a.Name, r.start, end) {
			samples = append(samples, soakcheck.Sample{At: h.At, Observer: name, OK: h.Err == "", Writers: h.Ready(RWBackend), Readers: h.Ready(ROBackend)})
		}
	}
	slices.SortStableFunc(samples, func(a, b soakcheck.Sample) int { return a.At.Compare(b.At) })
	var dbs []string
	byID := map[int64]string{}
	for _, d := range c.DBs {
		dbs = append(dbs, d.Name)
		byID[int64(d.Server.ServerID())] = d.Name
	}
	expect := soakcheck.Expect{DBs: dbs, Primaries: r.primaries}
	var writes []soakcheck.Write
	for i, cl := range clients {
		for _, op := range cl.Ops(r.start, end) {
			w := soakcheck.Write{Client: c.Apps[i].Name, Start: op.Start, End: op.Start.Add(op.Dur), Err: op.Err}
			if op.Err == "" {
				w.Node = byID[op.ServerID]
				if w.Node == "" {
					w.Node = fmt.Sprintf("server_id %d", op.ServerID)
				}
			}
			writes = append(writes, w)
		}
	}
	var reads []soakcheck.Read
	acks := map[string][]soakcheck.Ack{}
	for i, fc := range fresh {
		name := c.Apps[i].Name
		acks[name] = fc.Acks()
		for _, x := range fc.Reads(r.start, end) {
			rd := soakcheck.Read{Client: name, Start: x.Start, End: x.End, MaxSeq: x.MaxSeq, Err: x.Err}
			if x.Err == "" {
				rd.Node = byID[x.ServerID]
				if rd.Node == "" {
					rd.Node = fmt.Sprintf("server_id %d", x.ServerID)
				}
			}
			reads = append(reads, rd)
		}
	}
	lim := soakcheck.Limits{Warmup: min(5*time.Minute, (end.Sub(r.start))/4), MaxRSSGrowth: 0.10, MaxGoroutineRise: 5, MaxFDRise: 3, MinSamples: 6}
	if r.terms != nil {
		// The db agents are raft voters: 2 peers x 3 pooled connections
		// each way (package soakcheck, Limits.Voters).
		lim.Voters, lim.VoterRise, lim.VoterRSSGrowth = map[string]bool{}, 12, 0.25
		for _, d := range r.c.DBs {
			lim.Voters[d.Agent.Name] = true
		}
	}
	out := soakcheck.Result{
		Start:       r.start,
		Hosts:       "Hosts: db1-db3 (MariaDB 10.11, GTID replication, a shoal agent each, profile fast), app1 and app2 (a shoal agent driving HAProxy, and a client writing through HAProxy's write port every 200 ms, a new connection each; a freshness client writing a numbered row through the write port and reading the newest back through the read port, each every 100 ms).",
		Samples:     len(samples),
		Faults:      r.faults,
		TwoWriters:  soakcheck.TwoWriters(samples),
		Allowance:   soakAllowance,
		Removals:    soakcheck.FalseRemovals(samples, dbs, r.faults, soakAllowance),
		Bound:       soakConverge,
		Convergence: soakcheck.Converge(samples, observers, r.faults, expect, end),
		Writes:      soakcheck.CheckWrites(writes, expect, r.readOnly),
		Reads:       soakcheck.CheckReads(reads, acks, soakMaxLag+time.Second, r.cutOffWindows()),
		Limits:      lim,
		Lifetimes:   soakcheck.Lifetimes(res.Samples(), lim),
		Load:        res.Load(),
	}
	r.judgeTerms(&out, samples, writes, end)
	for _, f := range r.faults {
		if f.Kind == "agent-kill" && len(f.OutOn) > 0 {
			gap := soakcheck.WriterGap(samples, "hx:"+f.Target, f.Start, f.Heal.Add(soakConvergeWindow))
			out.Notes = append(out.Notes, fmt.Sprintf("agent-kill %s at +%s: its HAProxy had no writer for %s after the restart, until the agent learnt the term (explained, see Writer terms).",
				f.Target, f.Start.Sub(r.start).Round(100*time.Millisecond), gap.Round(10*time.Millisecond)))
		}
	}
	return out
}

// write puts the report in build/soak/ and, for a full run, in docs/.
func (r *soakRun) write(res soakcheck.Result, full bool) {
	root, err := RepoRoot()
	if err != nil {
		r.t.Fatal(err)
	}
	svg := res.SVG()
	put := func(dir, md, svgRel, svgPath string) {
		if err := os.MkdirAll(filepath.Dir(svgPath), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(svgPath, []byte(svg), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, md), []byte(res.Markdown(svgRel)), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.t.Logf("soak: report in %s", filepath.Join(dir, md))
	}
	build := filepath.Join(root, "build", "soak")
	put(build, "soak.md", "soak.svg", filepath.Join(build, "soak.svg"))
	if full {
		docs := filepath.Join(root, "docs")
		put(docs, "soak.md", "soak/soak.svg", filepath.Join(docs, "soak", "soak.svg"))
	} else {
		r.t.Logf("soak: a run shorter than %s leaves docs/soak.md alone", soakFullRun)
	}
}
