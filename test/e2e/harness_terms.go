//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// ConsensusAppFlags are an app agent's flags for the consensus layer: the
// key it verifies the writer terms with, in a keyring file in its
// directory. No bootstrap-expect: an app agent is no voter.
func ConsensusAppFlags(key string) []string {
	return []string{"--consensus-key", key, "--consensus-keyring-file", "{dir}/consensus.keyring"}
}

// RouteSample is one sample of an agent's routing: its /v1/pool and, when
// asked for, the db members' published health from /v1/members.
type RouteSample struct {
	At      time.Time
	Agent   string
	Err     string            // the agent did not answer
	Writers []string          // sorted names
	Reasons map[string]string // writer → its reason in the pool ("" or floor)
	Out     map[string]string // name → reason
	Health  map[string]string // db member → health state (when asked for)
}

// OK reports whether the agent answered.
func (s RouteSample) OK() bool { return s.Err == "" }

// Writer is the writer's name, "" for none, names joined by "," for
// several.
func (s RouteSample) Writer() string { return strings.Join(s.Writers, ",") }

// String is a compact form for messages: "writer db1(floor) out
// db2(conflict) health db1=warning".
func (s RouteSample) String() string {
	if !s.OK() {
		return "no answer: " + s.Err
	}
	var w, out, health []string
	for _, n := range s.Writers {
		if r := s.Reasons[n]; r != "" {
			n += "(" + r + ")"
		}
		w = append(w, n)
	}
	for n, r := range s.Out {
		out = append(out, n+"("+r+")")
	}
	for n, st := range s.Health {
		health = append(health, n+"="+st)
	}
	sort.Strings(out)
	sort.Strings(health)
	writer := strings.Join(w, ",")
	if writer == "" {
		writer = "none"
	}
	str := "writer " + writer + " out " + strings.Join(out, ",")
	if len(health) > 0 {
		str += " health " + strings.Join(health, ",")
	}
	return str
}

// sampleRoutes reads one RouteSample of a (with the members' health when
// health is set).
func sampleRoutes(ctx context.Context, hc *http.Client, a *Agent, health bool) RouteSample {
	base := "http://" + a.HTTPAddr()
	var pool client.PoolResponse
	err := getJSON(ctx, hc, base+"/v1/pool", &pool)
	var mem struct {
		Members []client.Member `json:"members"`
	}
	if err == nil && health {
		err = getJSON(ctx, hc, base+"/v1/members", &mem)
	}
	s := RouteSample{At: time.Now(), Agent: a.Name}
	if err != nil {
		s.Err = err.Error()
		return s
	}
	s.Reasons, s.Out = map[string]string{}, map[string]string{}
	for _, n := range pool.Writers {
		s.Writers = append(s.Writers, n.Name)
		s.Reasons[n.Name] = n.Reason
	}
	sort.Strings(s.Writers)
	for _, n := range pool.Out {
		s.Out[n.Name] = n.Reason
	}
	if health {
		s.Health = map[string]string{}
		for _, m := range mem.Members {
			if m.Health != nil {
				s.Health[m.Name] = m.Health.State
			}
		}
	}
	return s
}

// PollRoutes samples a's routing every `every` until ctx ends or stop
// (when not nil) holds for an answered sample, and returns the samples.
func PollRoutes(ctx context.Context, a *Agent, every time.Duration, health bool, stop func(RouteSample) bool) []RouteSample {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: a.Host.dialer.DialContext, MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var out []RouteSample
	for {
		s := sampleRoutes(ctx, hc, a, health)
		if ctx.Err() != nil {
			return out
		}
		out = append(out, s)
		if stop != nil && s.OK() && stop(s) {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// RouteRecorder polls several agents at once (PollRoutes) until Stop.
type RouteRecorder struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	got    map[string][]RouteSample
}

// RecordRoutes starts polling every agent in agents every `every`.
func RecordRoutes(agents []*Agent, every time.Duration, health bool) *RouteRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &RouteRecorder{cancel: cancel, got: map[string][]RouteSample{}}
	for _, a := range agents {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			s := PollRoutes(ctx, a, every, health, nil)
			r.mu.Lock()
			r.got[a.Name] = s
			r.mu.Unlock()
		}()
	}
	return r
}

// Stop ends the polling and returns the samples, by agent name.
func (r *RouteRecorder) Stop() map[string][]RouteSample {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// Watched is an agent started by StartWatched and the samples of its
// routing from its start.
type Watched struct {
	Agent   *Agent
	Started time.Time
	done    chan struct{}
	samples []RouteSample
}

// Wait waits for the polling to end and returns the samples.
func (w *Watched) Wait() []RouteSample {
	<-w.done
	return w.samples
}

// StartWatched starts n app agents named prefix1..prefixN on new hosts,
// one right after the other, joining through the db hosts, each with the
// extra flags; each one's routing is polled every `every` from its start
// until final holds or window passes (samples from before its API
// answered are kept, as errors). They are killed at cleanup; stop them
// earlier with StopAgents.
func (c *Cluster) StartWatched(t testing.TB, prefix string, n int, extra []string, every, window time.Duration, final func(RouteSample) bool) []*Watched {
	t.Helper()
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	var hosts []*Host
	for range n {
		hosts = append(hosts, c.AddHost(t)) // first, so that the starts follow each other closely
	}
	var out []*Watched
	for i, h := range hosts {
		a := c.AddAgent(t, h, AgentSpec{Name: fmt.Sprintf("%s%d", prefix, i+1), Role: "app", Key: c.Key, Join: seeds, Extra: extra})
		w := &Watched{Agent: a, Started: time.Now(), done: make(chan struct{})}
		go func() {
			defer close(w.done)
			ctx, cancel := context.WithTimeout(context.Background(), window)
			defer cancel()
			w.samples = PollRoutes(ctx, a, every, false, final)
		}()
		out = append(out, w)
	}
	return out
}

// StopAgents stops agents gracefully (they leave), all at once, each
// within timeout.
func StopAgents(agents []*Agent, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.Stop(timeout)
		}()
	}
	wg.Wait()
}
