//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// The shape of issue 36's finding 6: 160 held streams declaring ~4 MB from
// 4 IPs plus ~620 connects a second against the writer's gossip port. Half
// the streams send their 4 MB as fast as the writer reads; the other half
// send 1 KiB, then trickle.
const (
	gossipFloodIPs      = 4
	gossipFloodStreams  = 80                  // of each kind
	gossipFloodDeclared = 4_000_000           // under the 4 MiB per-stream limit
	gossipFloodBurst    = gossipFloodDeclared // sent as fast as the writer reads it
	gossipFloodSlow     = 1 << 10             // what a trickling stream sends at once
	gossipFloodTrickle  = 512                 // then this much
	gossipFloodEvery    = 200 * time.Millisecond
	gossipFloodRate     = 620 // connect-and-close a second
	gossipFloodDuration = 40 * time.Second
	// gossipFloodRSSLimit is the most the writer's RSS may grow over its
	// value before the flood (see docs/security.md, "Streams").
	gossipFloodRSSLimit = 120 << 20
)

// TestGossipFloodWriter: a stranger with no key floods the writer's gossip
// TCP port (held streams that declare ~4 MB and trickle, from 4 IPs, plus
// a high connect rate) for gossipFloodDuration. Every agent's view of the
// writer is sampled every PollInterval: no agent may see the writer
// failed, or out of its pool, during the flood; the writer's RSS stays
// within gossipFloodRSSLimit of its start; and a new member joins through
// the writer while the flood runs.
func TestGossipFloodWriter(t *testing.T) {
	Require(t)
	c := NewCluster(t, Options{DBHosts: 3, AppHosts: 1})
	w := c.Primary()
	writer := w.Agent.Name
	stranger := c.AddHost(t)
	ips, err := stranger.AddIPs(200, gossipFloodIPs)
	if err != nil {
		t.Fatal(err)
	}
	pid := w.Agent.Proc().PID()
	base, err := VmRSS(pid)
	if err != nil {
		t.Fatal(err)
	}

	// The writer's RSS every 100 ms until the flood is over.
	var (
		rssMu   sync.Mutex
		peak    int64
		samples int
	)
	rssStop := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-rssStop:
				return
			case <-tick.C:
			}
			if r, err := VmRSS(pid); err == nil {
				rssMu.Lock()
				peak, samples = max(peak, r), samples+1
				rssMu.Unlock()
			}
		}
	}()

	f := &StreamFlood{Streams: gossipFloodStreams, Declared: gossipFloodDeclared, Burst: gossipFloodBurst,
		Trickle: gossipFloodTrickle, Every: gossipFloodEvery, ConnectRate: gossipFloodRate}
	slow := &StreamFlood{Streams: gossipFloodStreams, Declared: gossipFloodDeclared, Burst: gossipFloodSlow,
		Trickle: gossipFloodTrickle, Every: gossipFloodEvery}
	from := time.Now()
	f.Start(stranger, ips, w.Agent.GossipAddr(), gossipFloodDuration)
	slow.Start(stranger, ips, w.Agent.GossipAddr(), gossipFloodDuration)
	stopped := false
	var slowStats StreamFloodStats
	stop := func() StreamFloodStats {
		st := f.Stop()
		slowStats = slow.Stop()
		if !stopped {
			stopped = true
			close(rssStop)
			<-rssDone
		}
		return st
	}
	defer stop()

	// A new member joins through the writer alone, during the flood.
	time.Sleep(10 * time.Second)
	t.Logf("flood: %d fast and %d trickling streams held after 10s", f.Held(), slow.Held())
	late := c.AddAgent(t, c.AddHost(t), AgentSpec{Name: "late", Role: "app", Key: c.Key, Join: []string{w.Host.IP}})
	joinAt := time.Now()
	c.Obs.Watch(late)
	joined := c.Obs.WaitAgents([]string{writer, "late"}, joinAt, 25*time.Second, func(s Snap) bool {
		return s.Members["late"] == "alive" && s.Members[writer] == "alive"
	})

	time.Sleep(time.Until(from.Add(gossipFloodDuration)))
	st := stop()
	to := time.Now()
	// The last samples: a flap at the very end shows within a second.
	time.Sleep(2 * time.Second)
	end := time.Now()

	rssMu.Lock()
	t.Logf("flood from %d IPs for %s: fast: %s; trickling: %s", len(ips), to.Sub(from).Round(time.Second), st, slowStats)
	t.Logf("writer %s: RSS %d MB before, peak %d MB during the flood (%d samples), %d MB over",
		writer, base>>20, peak>>20, samples, (peak-base)>>20)
	rssMu.Unlock()
	if txt := metricsTextOK(w.Agent); txt != "" {
		t.Logf("writer's rejected streams:\n%s", grepLines(txt, "shoal_memberlist_stream_rejected_total{"))
	}

	// Every agent's view of the writer.
	failed, out := 0, 0
	var unanswered []string
	for _, a := range c.Agents() {
		if a.Name == "late" {
			continue
		}
		fl, ou, outFor, na := writerFlaps(c.Obs.Snaps(a.Name, from, end), writer)
		failed += fl
		out += ou
		t.Logf("%s: the writer not alive %d times, out of the pool %d times (%s in all); %d samples unanswered",
			a.Name, fl, ou, outFor.Round(time.Millisecond), na)
		if na > 0 {
			unanswered = append(unanswered, fmt.Sprintf("%s %d", a.Name, na))
		}
	}
	if failed > 0 || out > 0 {
		t.Errorf("during the flood the writer was seen not alive %d times and out of the pool %d times (want 0)", failed, out)
	}
	if !joined.OK {
		t.Errorf("late did not join through the writer within 25s during the flood")
	} else {
		t.Logf("late joined through the writer %.2fs after its start, during the flood", joined.Took.Seconds())
	}
	rssMu.Lock()
	defer rssMu.Unlock()
	if peak-base > gossipFloodRSSLimit {
		t.Errorf("the writer's RSS grew %d MB during the flood (from %d MB), want at most %d MB",
			(peak-base)>>20, base>>20, gossipFloodRSSLimit>>20)
	}
	if len(unanswered) > 0 {
		t.Logf("samples the agents did not answer (1 s timeout): %s", strings.Join(unanswered, ", "))
	}
}

// writerFlaps counts, in one agent's samples, the times the writer went
// from alive to any other status, the times it left the pool's writers,
// how long it was out in all, and the samples the agent did not answer.
func writerFlaps(snaps []Snap, writer string) (failed, out int, outFor time.Duration, unanswered int) {
	wasAlive, wasWriter := true, true
	var outAt time.Time
	for _, s := range snaps {
		if !s.OK() {
			unanswered++
			continue
		}
		alive := s.Members[writer] == "alive"
		if wasAlive && !alive {
			failed++
		}
		isWriter := s.Role(writer) == "writer"
		if wasWriter && !isWriter {
			out++
			outAt = s.At
		}
		if !wasWriter && isWriter {
			outFor += s.At.Sub(outAt)
		}
		wasAlive, wasWriter = alive, isWriter
	}
	if !wasWriter && len(snaps) > 0 {
		outFor += snaps[len(snaps)-1].At.Sub(outAt)
	}
	return failed, out, outFor, unanswered
}

// metricsTextOK is an agent's /metrics, or "" when it does not answer.
func metricsTextOK(a *Agent) string {
	hc := a.Host.HTTPClient(5 * time.Second)
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(fmt.Sprintf("http://%s/metrics", a.HTTPAddr()))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
