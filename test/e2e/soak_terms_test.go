//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/soakcheck"
	"github.com/shoaldb/shoal/pkg/client"
)

// The soak's writer terms (issue 26): with consensus (the default;
// SOAK_CONSENSUS=0 runs without), the db agents are raft voters and grant
// the cluster's writer term, and every agent routes writes only to its
// holder. termWatch polls the voters' terms and every agent's routing with
// the term it follows; soakcheck judges them.

const (
	soakCluster   = "main"                 // the harness's one cluster
	soakTermTick  = 100 * time.Millisecond // the term poll's pace, per agent
	soakTermGrace = 2 * time.Second        // an agent may route to the previous holder this long after a new term (soakcheck.TermLimits)
	soakTermSkew  = 500 * time.Millisecond // an agent may follow a term this much before the voter poll shows it
)

// termWatch polls, every soakTermTick, each db agent's /v1/agent/self
// (its term of the cluster) and every agent's /v1/pool (its writers and
// the term its pool followed).
type termWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	voters []soakcheck.TermSample
	routes []soakcheck.Route
}

func startTermWatch(c *Cluster) *termWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &termWatch{cancel: cancel}
	voters := map[string]bool{}
	for _, d := range c.DBs {
		voters[d.Name] = true
	}
	for _, a := range c.Agents() {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.poll(ctx, a, voters[a.Name])
		}()
	}
	return w
}

// Stop ends the polling and waits for it; idempotent.
func (w *termWatch) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Samples are the voter and route samples in [from, to].
func (w *termWatch) Samples(from, to time.Time) ([]soakcheck.TermSample, []soakcheck.Route) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := func(t time.Time) bool { return !t.Before(from) && !t.After(to) }
	var vs []soakcheck.TermSample
	for _, s := range w.voters {
		if in(s.At) {
			vs = append(vs, s)
		}
	}
	var rs []soakcheck.Route
	for _, r := range w.routes {
		if in(r.At) {
			rs = append(rs, r)
		}
	}
	return vs, rs
}

// Holder is the term holder most voters showed last ("" for none yet).
func (w *termWatch) Holder() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := map[string]soakcheck.TermSample{}
	for _, s := range w.voters {
		if s.OK && s.Term != 0 {
			last[s.Voter] = s
		}
	}
	var best soakcheck.TermSample
	for _, s := range last {
		if s.Term > best.Term {
			best = s
		}
	}
	return best.Writer
}

func (w *termWatch) poll(ctx context.Context, a *Agent, voter bool) {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: a.Host.dialer.DialContext, MaxIdleConnsPerHost: 2}}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(soakTermTick)
	defer tick.Stop()
	base := "http://" + a.HTTPAddr()
	for {
		r := pollRoute(ctx, hc, base, a.Name)
		var v soakcheck.TermSample
		if voter {
			v = pollVoterTerm(ctx, hc, base, a.Name)
		}
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.routes = append(w.routes, r)
		if voter {
			w.voters = append(w.voters, v)
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pollRoute reads the agent's pool of the soak's cluster with its term.
func pollRoute(ctx context.Context, hc *http.Client, base, name string) soakcheck.Route {
	var pool client.PoolResponse
	err := getJSON(ctx, hc, base+"/v1/pool", &pool)
	r := soakcheck.Route{At: time.Now(), Observer: name, OK: err == nil}
	if err != nil {
		return r
	}
	for _, cp := range pool.Clusters {
		if cp.Name != soakCluster {
			continue
		}
		for _, n := range cp.Writers {
			r.Writers = append(r.Writers, n.Name)
		}
		for _, n := range cp.Out {
			if r.Out == nil {
				r.Out = map[string]string{} // most samples have none: no map
			}
			r.Out[n.Name] = n.Reason
		}
		if cp.Term != nil {
			r.Term, r.Holder = cp.Term.Term, cp.Term.Writer
		}
	}
	sort.Strings(r.Writers)
	return r
}

// pollVoterTerm reads the voter's term of the soak's cluster.
func pollVoterTerm(ctx context.Context, hc *http.Client, base, name string) soakcheck.TermSample {
	var self struct {
		Consensus *ConsensusInfo `json:"consensus"`
	}
	err := getJSON(ctx, hc, base+"/v1/agent/self", &self)
	s := soakcheck.TermSample{At: time.Now(), Voter: name, OK: err == nil && self.Consensus != nil}
	if s.OK {
		tm := self.Consensus.Term(soakCluster)
		s.Term, s.Writer = tm.Term, tm.Writer
	}
	return s
}

// judgeTerms runs the term checks on what the watch saw in [start, end],
// the HAProxy samples among samples and the clients' writes.
func (r *soakRun) judgeTerms(res *soakcheck.Result, samples []soakcheck.Sample, writes []soakcheck.Write, end time.Time) {
	res.Consensus = r.terms != nil
	if r.terms == nil {
		return
	}
	voters, routes := r.terms.Samples(r.start, end)
	var hx []soakcheck.Sample
	for _, s := range samples {
		if strings.HasPrefix(s.Observer, "hx:") {
			hx = append(hx, s)
		}
	}
	res.Terms = soakcheck.CheckTerms(voters, routes, hx, soakcheck.TermLimits{Grace: soakTermGrace, Skew: soakTermSkew})
	res.Terms.CheckTermWrites(writes)
	res.TermFaults = soakcheck.CheckTermFaults(r.faults, voters, routes, hx, soakConvergeWindow)
	res.Unexplained = soakcheck.UnexplainedGrants(res.Terms.Grants, r.faults, soakConvergeWindow)
}

// holder is the writer the faults must keep: the voters' term holder with
// consensus, else the primary.
func (r *soakRun) holder() *DBHost {
	name := r.c.Primary().Name
	if r.terms != nil {
		if h := r.terms.Holder(); h != "" {
			name = h
		}
	}
	for _, d := range r.c.DBs {
		if d.Name == name {
			return d
		}
	}
	r.t.Fatalf("soak: the term holder %q is no db host", name)
	return nil
}

// secondWritable: a replica made writable by mistake (SET GLOBAL
// read_only=0, its configuration untouched) for 5-15 s, then read-only
// again. The holder stays the writer everywhere; the replica is out with
// reason conflict meanwhile (explained), not a writer anywhere.
func (r *soakRun) secondWritable() soakcheck.Fault {
	h := r.holder()
	var others []*DBHost
	for _, d := range r.c.DBs {
		if d != h {
			others = append(others, d)
		}
	}
	d := others[r.rng.IntN(len(others))]
	hold := r.between(5*time.Second, 15*time.Second)
	f := soakcheck.Fault{Target: heldFor(d.Name+" writable beside "+h.Name, hold), Nodes: []string{d.Name}, Holder: h.Name, Other: d.Name}
	return r.hold(f, func() error { return d.Server.Exec("SET GLOBAL read_only=0") }, hold,
		func() error { return d.Server.Exec("SET GLOBAL read_only=1") })
}

// writerAgentKill: the term holder's agent killed (SIGKILL) while its
// mysqld runs on, restarted (with its --join) 5-15 s later. Its member is
// failed meanwhile, so no agent has a writer (explained: the holder out
// everywhere, its own agent's view); the term stays, and after the restart
// the same holder is the writer under the same term.
func (r *soakRun) writerAgentKill() soakcheck.Fault {
	h := r.holder()
	hold := r.between(5*time.Second, 15*time.Second)
	f := soakcheck.Fault{Target: heldFor(h.Name+"'s agent", hold), Nodes: []string{h.Name}, Observers: []string{h.Name}, Holder: h.Name}
	return r.hold(f, func() error { h.Agent.Kill(); return nil }, hold,
		func() error { h.Agent.Start(r.t, true); return nil })
}
