//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/pkg/client"
	"github.com/shoaldb/shoal/test/e2e"
)

// ---------------------------------------------------------------------------
// Gossip byte counters: memberlist v0.7.0 and serf v0.11.0 emit their
// telemetry through github.com/hashicorp/go-metrics (the process-wide global
// instance), without per-node labels (shoal sets no MetricLabels). An
// in-memory sink installed as the global counts what all in-process agents
// send, so per-member figures are totals divided by the live members.

// gossipCounters are the go-metrics counters the scale suite reads.
type gossipCounters struct {
	udpSent, tcpSent, udpRecv   atomic.Uint64 // bytes (after encryption)
	suspect, dead               atomic.Uint64 // suspect/dead messages handled
	degradedProbe, degradedTime atomic.Uint64 // Lifeguard: slow probes, refuted suspicions
	serfFlap                    atomic.Uint64 // serf: member rejoined within its flap timeout
}

type counterSnap struct {
	udpSent, tcpSent, udpRecv, suspect, dead, degradedProbe, degradedTime, serfFlap uint64
}

func (c *gossipCounters) snap() counterSnap {
	return counterSnap{c.udpSent.Load(), c.tcpSent.Load(), c.udpRecv.Load(), c.suspect.Load(), c.dead.Load(),
		c.degradedProbe.Load(), c.degradedTime.Load(), c.serfFlap.Load()}
}

func (s counterSnap) sub(o counterSnap) counterSnap {
	return counterSnap{s.udpSent - o.udpSent, s.tcpSent - o.tcpSent, s.udpRecv - o.udpRecv, s.suspect - o.suspect,
		s.dead - o.dead, s.degradedProbe - o.degradedProbe, s.degradedTime - o.degradedTime, s.serfFlap - o.serfFlap}
}

// countingSink is a go-metrics sink that keeps only the counters above,
// without allocating on the hot path.
type countingSink struct{ c *gossipCounters }

func (s countingSink) count(k []string, v float32) {
	if len(k) != 3 {
		return
	}
	var dst *atomic.Uint64
	switch k[0] {
	case "memberlist":
		switch k[1] {
		case "udp":
			switch k[2] {
			case "sent":
				dst = &s.c.udpSent
			case "received":
				dst = &s.c.udpRecv
			}
		case "tcp":
			if k[2] == "sent" {
				dst = &s.c.tcpSent
			}
		case "msg":
			switch k[2] {
			case "suspect":
				dst = &s.c.suspect
			case "dead":
				dst = &s.c.dead
			}
		case "degraded":
			switch k[2] {
			case "probe":
				dst = &s.c.degradedProbe
			case "timeout":
				dst = &s.c.degradedTime
			}
		}
	case "serf":
		if k[1] == "member" && k[2] == "flap" {
			dst = &s.c.serfFlap
		}
	}
	if dst != nil && v > 0 {
		dst.Add(uint64(v))
	}
}

func (s countingSink) IncrCounter(k []string, v float32) { s.count(k, v) }
func (s countingSink) IncrCounterWithLabels(k []string, v float32, _ []gometrics.Label) {
	s.count(k, v)
}
func (countingSink) SetGauge([]string, float32)                                       {}
func (countingSink) SetGaugeWithLabels([]string, float32, []gometrics.Label)          {}
func (countingSink) EmitKey([]string, float32)                                        {}
func (countingSink) AddSample([]string, float32)                                      {}
func (countingSink) AddSampleWithLabels([]string, float32, []gometrics.Label)         {}
func (countingSink) SetPrecisionGauge([]string, float64)                              {}
func (countingSink) SetPrecisionGaugeWithLabels([]string, float64, []gometrics.Label) {}

func metricsConfig() *gometrics.Config {
	cfg := gometrics.DefaultConfig("") // no service prefix: keys stay memberlist.udp.sent ...
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false
	return cfg
}

// installGossipCounters makes the counting sink go-metrics' global for the
// rest of the test and puts a blackhole back at cleanup.
func installGossipCounters(t testing.TB) *gossipCounters {
	t.Helper()
	c := &gossipCounters{}
	if _, err := gometrics.NewGlobal(metricsConfig(), countingSink{c}); err != nil {
		t.Fatalf("go-metrics sink: %v", err)
	}
	t.Cleanup(func() { _, _ = gometrics.NewGlobal(metricsConfig(), &gometrics.BlackholeSink{}) })
	return c
}

// ---------------------------------------------------------------------------
// CPU accounting.

type cpuSnap struct {
	at         time.Time
	proc       time.Duration // this process: user + system
	busy, tot  uint64        // /proc/stat, all CPUs, in USER_HZ ticks
	procStatOK bool
}

func takeCPU() cpuSnap {
	s := cpuSnap{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.proc = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) > 5 && f[0] == "cpu" {
			var vals []uint64
			for _, x := range f[1:] {
				v, _ := strconv.ParseUint(x, 10, 64)
				vals = append(vals, v)
			}
			// user nice system idle iowait irq softirq steal (guest is in user)
			for i, v := range vals {
				if i >= 8 {
					break
				}
				s.tot += v
				if i != 3 && i != 4 {
					s.busy += v
				}
			}
			s.procStatOK = true
		}
	}
	return s
}

// cpuUse is the CPU used between two snapshots, in cores.
type cpuUse struct {
	procCores, machineCores float64
	machineOK               bool
}

func cpuBetween(a, b cpuSnap) cpuUse {
	wall := b.at.Sub(a.at).Seconds()
	u := cpuUse{}
	if wall > 0 {
		u.procCores = (b.proc - a.proc).Seconds() / wall
	}
	if a.procStatOK && b.procStatOK && b.tot > a.tot {
		u.machineCores = float64(b.busy-a.busy) / float64(b.tot-a.tot) * float64(runtime.NumCPU())
		u.machineOK = true
	}
	return u
}

// cpuSampler records the process's CPU use over successive intervals, for
// the peak.
type cpuSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak cpuUse
}

func startCPUSampler(every time.Duration) *cpuSampler {
	s := &cpuSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		prev := takeCPU()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
			cur := takeCPU()
			u := cpuBetween(prev, cur)
			prev = cur
			s.mu.Lock()
			s.peak.procCores = max(s.peak.procCores, u.procCores)
			s.peak.machineCores = max(s.peak.machineCores, u.machineCores)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *cpuSampler) Stop() cpuUse {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// memLimitMiB bounds the test process's resident memory: past it the
// current run stops observing (and says so), to protect the shared machine.
const memLimitMiB = 8192

// memWatch sets hit when RSS passes memLimitMiB, until stop is closed.
func memWatch(hit *atomic.Bool, stop <-chan struct{}) {
	tk := time.NewTicker(2 * time.Second)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			if rssMiB() > memLimitMiB {
				hit.Store(true)
			}
		}
	}
}

// rssMiB is the process's resident set (VmRSS) in MiB, or 0.
func rssMiB() float64 {
	b, err := e2e.VmRSS(os.Getpid())
	if err != nil {
		return 0
	}
	return float64(b) / (1 << 20)
}

// ---------------------------------------------------------------------------
// In-process cluster.

// scaleNode is one in-process agent.
type scaleNode struct {
	idx  int
	name string
	addr string
	a    *agent.Agent
	sub  *agent.Subscription
	stop chan struct{}
	dead atomic.Bool
}

// scaleCluster is a cluster of in-process agents in this process.
type scaleCluster struct {
	profile string
	key     string
	nodes   []*scaleNode
	ev      *scaleEvents
	started time.Time

	formedIn    time.Duration // first start → every agent sees every other alive
	joinedIn    time.Duration // first start → every agent started and joined
	formed      bool
	bestSeen    float64 // when not formed: the lowest fraction of the cluster any agent saw, at the deadline
	batches     int
	startFails  int    // gossip port bind failures retried with another port
	startedOnly int    // when formation stopped starting agents at the limit: how many ran
	note        string // why it did not form, when it did not
	formCPU     cpuUse // CPU during formation
	formSusp    uint64 // suspect messages handled during formation (needs the counting sink)
	lateJoin    int    // agents not joined 30 s after their batch started
	hung        bool   // member lists locked or memory runaway: shutdown may hang
}

// hardMemLimitMiB: past it the whole test process exits (after saying
// why), because the agents can no longer be shut down in an orderly way
// and the machine is shared.
const hardMemLimitMiB = 12288

// startMemGuard exits the process when its memory passes hardMemLimitMiB.
func startMemGuard(what string) (stop func()) {
	done := make(chan struct{})
	go func() {
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			if rss := rssMiB(); rss > hardMemLimitMiB {
				fmt.Fprintf(os.Stderr, "FAIL: %s: test process memory %.0f MiB passed %d MiB (runaway goroutines in the agents under load); exiting to protect the shared machine\n", what, rss, hardMemLimitMiB)
				os.Exit(3)
			}
		}
	}()
	return func() { close(done) }
}

// freeAddr is ports.Free without testing.TB, so that agents can start on
// goroutines: a 127.0.0.1 address whose port is free for TCP and UDP.
func freeAddr() (string, error) {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		l.Close()
		if u, err := net.ListenPacket("udp", addr); err == nil {
			u.Close()
			return addr, nil
		}
	}
	return "", errors.New("no free port on 127.0.0.1 for both TCP and UDP")
}

// startScaleAgent starts one app-role agent on a free loopback port, with
// encryption, logs at warn level thrown away, no HTTP API and no RPC. It
// retries on another port when the chosen one was taken meanwhile.
func startScaleAgent(name, profile, key string, join []string) (*agent.Agent, string, int, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		c := config.Default()
		c.Node = name
		bind, err := freeAddr()
		if err != nil {
			return nil, "", attempt, err
		}
		c.Bind = bind
		c.Profile = profile
		c.HTTPAddr = ""
		c.RPCAddr = ""
		c.Join = join
		c.RetryInterval = 250 * time.Millisecond
		c.RetryMaxWait = 2 * time.Second
		c.LogLevel = "warn"
		c.Encrypt = key
		if err := c.Validate(); err != nil {
			return nil, "", attempt, fmt.Errorf("config %s: %w", name, err)
		}
		logs := logging.New(io.Discard, "text", slog.LevelWarn)
		a, err := agent.New(c, logs)
		if err != nil {
			return nil, "", attempt, err
		}
		if err := a.Start(context.Background()); err != nil {
			a.Shutdown()
			lastErr = err
			continue
		}
		return a, c.Bind, attempt, nil
	}
	return nil, "", 5, fmt.Errorf("start %s: %w", name, lastErr)
}

// formScaleCluster starts n agents in growing batches (1, 2, 4, ... up to
// 50 at a time); each new agent joins 3 random agents of earlier batches.
// It waits until every agent sees all n alive, up to limit. An agent that
// cannot start is an error; a cluster that does not converge is reported
// (formed false, with a note), not an error; only an agent that cannot
// start is.
func formScaleCluster(t testing.TB, n int, profile, key string, limit time.Duration, counters *gossipCounters) (*scaleCluster, error) {
	c := &scaleCluster{profile: profile, key: key, ev: newScaleEvents()}
	cpu0 := takeCPU()
	var susp0 uint64
	if counters != nil {
		susp0 = counters.suspect.Load()
	}
	defer func() {
		c.formCPU = cpuBetween(cpu0, takeCPU())
		if counters != nil {
			c.formSusp = counters.suspect.Load() - susp0
		}
	}()
	c.started = time.Now()
	var joined []*scaleNode // agents that have joined: the join addresses of later batches
	for len(c.nodes) < n {
		if len(c.nodes) > 0 && time.Since(c.started) > limit {
			// Starting agents slows down as the machine saturates: stop
			// at limit rather than start the rest into a cluster that
			// has already failed to form.
			c.startedOnly = len(c.nodes)
			break
		}
		size := min(50, n-len(c.nodes), max(1, len(c.nodes)))
		batch := make([]*scaleNode, size)
		errs := make([]error, size)
		fails := make([]int, size)
		var wg sync.WaitGroup
		for i := range batch {
			idx := len(c.nodes) + i
			var join []string
			if len(joined) > 0 {
				for _, j := range rand.Perm(len(joined))[:min(3, len(joined))] {
					join = append(join, joined[j].addr)
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("%s-%04d", profile, idx)
				a, addr, f, err := startScaleAgent(name, profile, key, join)
				fails[i] = f
				if err != nil {
					errs[i] = err
					return
				}
				batch[i] = &scaleNode{idx: idx, name: name, addr: addr, a: a, stop: make(chan struct{})}
			}()
		}
		wg.Wait()
		for i, nd := range batch {
			c.startFails += fails[i]
			if nd != nil {
				c.nodes = append(c.nodes, nd)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return c, err
		}
		c.batches++
		if len(c.nodes) == 1 {
			joined = append(joined, c.nodes[0])
			continue
		}
		// The next batch starts once the agents of this one have joined
		// (know someone), or after 30 s (or at limit); an agent still not joined keeps
		// retrying on its own, is not given as a join address, and counts
		// against convergence.
		deadline := time.Now().Add(30 * time.Second)
		if end := c.started.Add(limit); end.Before(deadline) {
			deadline = end // the whole formation keeps to limit
		}
		for _, nd := range batch {
			for nd.a.Serf().Memberlist().NumMembers() < 2 && time.Now().Before(deadline) && rssMiB() < memLimitMiB {
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, nd := range batch {
			if nd.a.Serf().Memberlist().NumMembers() >= 2 {
				joined = append(joined, nd)
			} else {
				c.lateJoin++
			}
		}
	}
	c.joinedIn = time.Since(c.started)
	// The check runs on its own goroutine: under a goroutine pile-up a
	// member list's lock can be unavailable for minutes, and the suite must
	// still give up at limit (or when memory runs away) and report.
	deadline := c.started.Add(limit)
	worstCh := make(chan int, 1)
	check := func() {
		worst := n
		for _, nd := range c.nodes {
			worst = min(worst, nd.a.Serf().Memberlist().NumMembers())
		}
		worstCh <- worst
	}
	go check()
	worst := -1
	for done := false; !done; {
		select {
		case worst = <-worstCh:
			if worst == n {
				c.formed = true
				c.formedIn = time.Since(c.started)
				done = true
			} else if time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				go check()
			}
		case <-time.After(time.Second):
		}
		if done {
			break
		}
		if rss := rssMiB(); rss > memLimitMiB {
			c.note = fmt.Sprintf("formation abandoned: the test process's memory passed %d MiB (%.0f MiB)", memLimitMiB, rss)
			c.hung = true
			return c, nil
		}
		if time.Now().After(deadline) {
			c.bestSeen = float64(worst) / float64(n)
			if worst < 0 {
				c.note = fmt.Sprintf("not converged within %s, and the agents' member lists stayed locked (no count could be read)", limit)
				c.hung = true
				return c, nil
			}
			c.note = fmt.Sprintf("not every agent saw all %d alive within %s (the worst saw %d; %d agents had not joined 30 s after their batch started)", n, limit, worst, c.lateJoin)
			if c.startedOnly > 0 {
				c.note += fmt.Sprintf("; only %d of the %d agents had been started by then", c.startedOnly, n)
			}
			break
		}
	}
	if c.formed {
		// serf's own view (what `shoal members` shows) must agree.
		for _, nd := range c.nodes {
			alive := 0
			for _, m := range nd.a.Members() {
				if m.Status == serf.StatusAlive {
					alive++
				}
			}
			if alive != n {
				c.formed = false
				c.formedIn = 0
				c.bestSeen = float64(alive) / float64(n)
				c.note = fmt.Sprintf("memberlist converged but serf on %s lists %d of %d alive", nd.name, alive, n)
				break
			}
		}
	}
	return c, nil
}

// live returns the agents not killed.
func (c *scaleCluster) live() []*scaleNode {
	out := make([]*scaleNode, 0, len(c.nodes))
	for _, nd := range c.nodes {
		if !nd.dead.Load() {
			out = append(out, nd)
		}
	}
	return out
}

// subscribe starts recording member events on every agent.
func (c *scaleCluster) subscribe() {
	for _, nd := range c.nodes {
		nd.sub = nd.a.Subscribe(1024)
		go func(nd *scaleNode) {
			for {
				select {
				case <-nd.stop:
					return
				case e := <-nd.sub.C:
					if me, ok := e.(serf.MemberEvent); ok {
						c.ev.record(nd.idx, me, time.Now())
					}
				}
			}
		}(nd)
	}
}

// dropped is the number of events the bounded subscriptions dropped.
func (c *scaleCluster) dropped() uint64 {
	var d uint64
	for _, nd := range c.nodes {
		if nd.sub != nil {
			d += nd.sub.Dropped.Load()
		}
	}
	return d
}

func (nd *scaleNode) shutdown() {
	if nd.sub != nil {
		nd.sub.Close()
	}
	select {
	case <-nd.stop:
	default:
		close(nd.stop)
	}
	nd.a.Shutdown()
}

// shutdown stops every agent, 64 at a time.
func (c *scaleCluster) shutdown() {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		if nd.dead.Swap(true) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nd.shutdown()
		}()
	}
	wg.Wait()
	runtime.GC()
}

// ---------------------------------------------------------------------------
// Member events.

type obsMember struct {
	obs    int
	member string
}

// scaleEvents records member-failed and member-join events from every agent.
type scaleEvents struct {
	mu       sync.Mutex
	killedAt map[string]time.Time
	victims  map[string]map[int]time.Time // victim → observer → member-failed arrival
	failed   map[obsMember]bool           // healthy members an observer currently holds failed
	falseEv  []obsMember                  // member-failed for a member not killed (yet)
	flaps    int                          // member-join after such a member-failed, same observer
}

func newScaleEvents() *scaleEvents {
	return &scaleEvents{killedAt: map[string]time.Time{}, victims: map[string]map[int]time.Time{}, failed: map[obsMember]bool{}}
}

func (e *scaleEvents) record(obs int, me serf.MemberEvent, at time.Time) {
	if me.Type != serf.EventMemberFailed && me.Type != serf.EventMemberJoin {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range me.Members {
		k := obsMember{obs, m.Name}
		killed, isVictim := e.killedAt[m.Name]
		switch me.Type {
		case serf.EventMemberFailed:
			if isVictim && !at.Before(killed) {
				if e.victims[m.Name] == nil {
					e.victims[m.Name] = map[int]time.Time{}
				}
				if _, seen := e.victims[m.Name][obs]; !seen {
					e.victims[m.Name][obs] = at
				}
				continue
			}
			e.falseEv = append(e.falseEv, k)
			e.failed[k] = true
		case serf.EventMemberJoin:
			if e.failed[k] {
				delete(e.failed, k)
				e.flaps++
			}
		}
	}
}

func (e *scaleEvents) kill(name string, at time.Time) {
	e.mu.Lock()
	e.killedAt[name] = at
	e.mu.Unlock()
}

// knownBy returns how many of the observers have received member-failed
// for victim, and the first and last arrival.
func (e *scaleEvents) knownBy(victim string, observers map[int]bool) (n int, first, last time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for obs, at := range e.victims[victim] {
		if !observers[obs] {
			continue
		}
		n++
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return n, first, last
}

// falseFailures summarizes the false member-failed events: events, distinct
// members accused, failed→join flaps.
func (e *scaleEvents) falseFailures() (events, members, flaps int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	distinct := map[string]bool{}
	for _, k := range e.falseEv {
		distinct[k.member] = true
	}
	return len(e.falseEv), len(distinct), e.flaps
}

// ---------------------------------------------------------------------------
// Detection trials.

type detectTrial struct {
	victim      string
	first, all  time.Duration
	observers   int
	knew        int
	complete    bool
	killedAfter time.Duration // since the window started
}

// killAndWait stops a random live agent (not index 0, which may serve the
// API) without a leave and waits until every other live agent has received
// member-failed for it, or limit.
func (c *scaleCluster) killAndWait(limit time.Duration, abort *atomic.Bool) (detectTrial, error) {
	live := c.live()
	var cand []*scaleNode
	for _, nd := range live {
		if nd.idx != 0 {
			cand = append(cand, nd)
		}
	}
	if len(cand) == 0 {
		return detectTrial{}, errors.New("no agent left to kill")
	}
	victim := cand[rand.N(len(cand))]
	observers := map[int]bool{}
	for _, nd := range live {
		if nd != victim {
			observers[nd.idx] = true
		}
	}
	start := time.Now()
	c.ev.kill(victim.name, start)
	victim.dead.Store(true)
	victim.shutdown()
	tr := detectTrial{victim: victim.name, observers: len(observers)}
	deadline := start.Add(limit)
	for {
		n, first, last := c.ev.knownBy(victim.name, observers)
		tr.knew = n
		if n > 0 {
			tr.first = first.Sub(start)
		}
		if n == len(observers) {
			tr.all = last.Sub(start)
			tr.complete = true
			return tr, nil
		}
		if time.Now().After(deadline) || abort.Load() {
			tr.all = time.Since(start)
			return tr, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// `shoal members` latency.

type membersResult struct {
	size, listed                   int
	profile                        string
	formed                         bool
	err                            error // the measurement broke off
	api, cliTable, cliJSON         []float64
	apiBytes, tableBytes, jsonByte int
	cpu                            cpuUse
}

// serveAPI serves the real HTTP API of a on a free loopback port.
func serveAPI(t testing.TB, a *agent.Agent) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	srv := &http.Server{Handler: api.New(a, slog.New(slog.DiscardHandler), addr, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return addr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}

// measureMembers times GET /v1/members (keep-alive client, one untimed
// warm-up call) and the shoal CLI (a fresh process per run) against the
// API served by agent a.
func measureMembers(t testing.TB, bin string, a *agent.Agent, size int, profile string, calls, runs int) membersResult {
	t.Helper()
	addr, stop := serveAPI(t, a)
	defer stop()
	r := membersResult{size: size, profile: profile}
	cl := &http.Client{Timeout: 30 * time.Second}
	get := func() ([]byte, error) {
		resp, err := cl.Get("http://" + addr + "/v1/members")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET /v1/members: %s: %s", resp.Status, b)
		}
		return b, nil
	}
	b, err := get() // warm-up, untimed
	if err != nil {
		r.err = fmt.Errorf("members API: %w", err)
		return r
	}
	var mr client.MembersResponse
	if err := json.Unmarshal(b, &mr); err != nil {
		r.err = fmt.Errorf("members API: %w", err)
		return r
	}
	r.listed = len(mr.Members)
	c0 := takeCPU()
	for i := 0; i < calls; i++ {
		st := time.Now()
		b, err := get()
		if err != nil {
			r.err = fmt.Errorf("members API: %w", err)
			return r
		}
		r.api = append(r.api, time.Since(st).Seconds())
		r.apiBytes = len(b)
	}
	cli := func(args ...string) (float64, int, error) {
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, append([]string{"--http-addr", addr}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		st := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("shoal %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return time.Since(st).Seconds(), out.Len(), nil
	}
	for i := 0; i < runs; i++ {
		d, n, err := cli("members")
		if err != nil {
			r.err = err
			return r
		}
		r.cliTable, r.tableBytes = append(r.cliTable, d), n
		if d, n, err = cli("members", "--format", "json"); err != nil {
			r.err = err
			return r
		}
		r.cliJSON, r.jsonByte = append(r.cliJSON, d), n
	}
	r.cpu = cpuBetween(c0, takeCPU())
	return r
}
