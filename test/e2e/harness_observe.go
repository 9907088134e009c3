//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// PollInterval is how often the observer samples every agent and HAProxy.
const PollInterval = 50 * time.Millisecond

// Snap is one sample of one agent's /v1/pool and /v1/members, stamped with
// the time the answers arrived.
type Snap struct {
	At       time.Time
	Agent    string
	Err      string            // the agent did not answer
	Writers  []string          // sorted names
	Readers  []string          // sorted names
	Floor    []string          // readers kept in with reason floor
	Fallback []string          // readers with reason fallback (the writer serving reads)
	Out      map[string]string // name → reason
	Isolated bool
	Members  map[string]string // name → status
}

// OK reports whether the agent answered.
func (s Snap) OK() bool { return s.Err == "" && s.Members != nil }

// Pool is a compact form: "writers|readers|out(reason),...".
func (s Snap) Pool() string {
	var out []string
	for n, r := range s.Out {
		out = append(out, n+"("+r+")")
	}
	sort.Strings(out)
	iso := ""
	if s.Isolated {
		iso = " ISOLATED"
	}
	return strings.Join(s.Writers, ",") + "|" + strings.Join(s.Readers, ",") + "|" + strings.Join(out, ",") + iso
}

// MembersString is "name=status ..." sorted by name.
func (s Snap) MembersString() string {
	var out []string
	for n, st := range s.Members {
		out = append(out, n+"="+st)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// Role is the node's role in this sample: writer, reader or out.
func (s Snap) Role(node string) string {
	switch {
	case slices.Contains(s.Writers, node):
		return "writer"
	case slices.Contains(s.Readers, node):
		return "reader"
	default:
		return "out"
	}
}

// HXSnap is one sample of HAProxy's server states.
type HXSnap struct {
	At     time.Time
	Err    string
	States map[string]string // backend/server → ready, drain, maint
}

// Ready lists the ready servers of a backend, sorted.
func (h HXSnap) Ready(backend string) []string {
	var out []string
	for k, st := range h.States {
		if b, srv, _ := strings.Cut(k, "/"); b == backend && st == "ready" {
			out = append(out, srv)
		}
	}
	sort.Strings(out)
	return out
}

// Violation is a breach of a safety invariant seen in a sample.
type Violation struct {
	At   time.Time
	What string
}

// Observer samples every agent's API and every HAProxy's states every
// PollInterval, keeps the samples, and checks the invariants on each one:
// no agent ever routes writes to two nodes, no HAProxy ever has two ready
// servers in its write backend.
type Observer struct {
	start time.Time

	mu         sync.Mutex
	snaps      map[string][]Snap // per agent, in time order
	hx         map[string][]HXSnap
	violations []Violation
	changes    []string // timeline of pool/member/state changes, for failure reports

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewObserver starts polling; t.Cleanup stops it.
func NewObserver(t testing.TB) *Observer {
	ctx, cancel := context.WithCancel(context.Background())
	o := &Observer{start: time.Now(), snaps: map[string][]Snap{}, hx: map[string][]HXSnap{}, ctx: ctx, cancel: cancel}
	t.Cleanup(o.Stop)
	return o
}

// Stop ends the polling and waits for the pollers.
func (o *Observer) Stop() {
	o.cancel()
	o.wg.Wait()
}

// Watch starts sampling an agent.
func (o *Observer) Watch(a *Agent) {
	hc := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{DialContext: a.Host.dialer.DialContext, MaxIdleConnsPerHost: 2},
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer hc.CloseIdleConnections()
		o.loop(func() { o.add(pollAgent(o.ctx, hc, a)) })
	}()
}

// WatchHAProxy starts sampling an HAProxy.
func (o *Observer) WatchHAProxy(name string, hx *HAProxy) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.loop(func() {
			st, err := hx.States()
			s := HXSnap{At: time.Now(), States: st}
			if err != nil {
				s.Err = err.Error()
			}
			o.addHX(name, s)
		})
	}()
}

func (o *Observer) loop(poll func()) {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		poll()
		select {
		case <-o.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func getJSON(ctx context.Context, hc *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

func pollAgent(ctx context.Context, hc *http.Client, a *Agent) Snap {
	base := "http://" + a.HTTPAddr()
	var pool client.PoolResponse
	var mem struct {
		Members []client.Member `json:"members"`
	}
	err := getJSON(ctx, hc, base+"/v1/pool", &pool)
	if err == nil {
		err = getJSON(ctx, hc, base+"/v1/members", &mem)
	}
	s := Snap{At: time.Now(), Agent: a.Name}
	if err != nil {
		s.Err = err.Error()
		return s
	}
	s.Isolated = pool.Isolated
	s.Out = map[string]string{}
	for _, n := range pool.Writers {
		s.Writers = append(s.Writers, n.Name)
	}
	for _, n := range pool.Readers {
		s.Readers = append(s.Readers, n.Name)
		switch n.Reason {
		case "floor":
			s.Floor = append(s.Floor, n.Name)
		case "fallback":
			s.Fallback = append(s.Fallback, n.Name)
		}
	}
	for _, n := range pool.Out {
		s.Out[n.Name] = n.Reason
	}
	sort.Strings(s.Writers)
	sort.Strings(s.Readers)
	s.Members = map[string]string{}
	for _, m := range mem.Members {
		s.Members[m.Name] = m.Status
	}
	return s
}

func (o *Observer) add(s Snap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx.Err() != nil {
		return
	}
	prev := o.snaps[s.Agent]
	if len(s.Writers) > 1 {
		o.violations = append(o.violations, Violation{s.At, fmt.Sprintf("agent %s routes writes to %v", s.Agent, s.Writers)})
	}
	var last Snap
	if len(prev) > 0 {
		last = prev[len(prev)-1]
	}
	if len(prev) == 0 || last.Pool() != s.Pool() || last.MembersString() != s.MembersString() || (last.Err == "") != (s.Err == "") {
		desc := s.Pool() + " members: " + s.MembersString()
		if s.Err != "" {
			desc = "no answer: " + s.Err
		}
		o.changes = append(o.changes, fmt.Sprintf("%8.3fs %-6s %s", s.At.Sub(o.start).Seconds(), s.Agent, desc))
	}
	o.snaps[s.Agent] = append(prev, s)
}

func (o *Observer) addHX(name string, s HXSnap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx.Err() != nil {
		return
	}
	prev := o.hx[name]
	if r := s.Ready(RWBackend); len(r) > 1 {
		o.violations = append(o.violations, Violation{s.At, fmt.Sprintf("haproxy %s: %d ready write servers %v", name, len(r), r)})
	}
	if len(prev) == 0 || hxString(prev[len(prev)-1]) != hxString(s) {
		o.changes = append(o.changes, fmt.Sprintf("%8.3fs %-6s %s", s.At.Sub(o.start).Seconds(), "hx:"+name, hxString(s)))
	}
	o.hx[name] = append(prev, s)
}

func hxString(s HXSnap) string {
	if s.Err != "" {
		return "no answer: " + s.Err
	}
	var out []string
	for k, v := range s.States {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// Violations returns the invariant breaches seen since from.
func (o *Observer) Violations(from time.Time) []Violation {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Violation
	for _, v := range o.violations {
		if !v.At.Before(from) {
			out = append(out, v)
		}
	}
	return out
}

// Timeline is the list of changes seen, for failure reports.
func (o *Observer) Timeline() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.changes, "\n")
}

// Latest returns each agent's latest sample.
func (o *Observer) Latest() map[string]Snap {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]Snap{}
	for n, s := range o.snaps {
		if len(s) > 0 {
			out[n] = s[len(s)-1]
		}
	}
	return out
}

// Snaps returns an agent's samples taken in [from, to].
func (o *Observer) Snaps(agent string, from, to time.Time) []Snap {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Snap
	for _, s := range o.snaps[agent] {
		if !s.At.Before(from) && !s.At.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// HXSnaps returns an HAProxy's samples taken in [from, to].
func (o *Observer) HXSnaps(name string, from, to time.Time) []HXSnap {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []HXSnap
	for _, s := range o.hx[name] {
		if !s.At.Before(from) && !s.At.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// WaitResult is when a condition came true.
type WaitResult struct {
	OK bool
	// Took is from the reference time to the sample after which the
	// condition held on every watched agent (the latest of their first
	// samples of the final run of samples satisfying it).
	Took time.Duration
	// Per agent: the same, per agent.
	Per map[string]time.Duration
}

// WaitAgents waits until cond holds on every named agent's samples taken
// after since, and stays true until it holds on all of them. It waits up to
// limit (which may exceed the scenario's bound, to measure a slow
// outcome); on timeout Took is the time waited and OK false.
func (o *Observer) WaitAgents(agents []string, since time.Time, limit time.Duration, cond func(Snap) bool) WaitResult {
	okSince := map[string]time.Time{}
	seen := map[string]int{}
	deadline := since.Add(limit)
	for {
		o.mu.Lock()
		for _, a := range agents {
			snaps := o.snaps[a]
			for i := seen[a]; i < len(snaps); i++ {
				s := snaps[i]
				if s.At.Before(since) {
					continue
				}
				if cond(s) {
					if okSince[a].IsZero() {
						okSince[a] = s.At
					}
				} else {
					delete(okSince, a)
				}
			}
			seen[a] = len(snaps)
		}
		o.mu.Unlock()
		if len(okSince) == len(agents) {
			r := WaitResult{OK: true, Per: map[string]time.Duration{}}
			for a, at := range okSince {
				d := at.Sub(since)
				r.Per[a] = d
				r.Took = max(r.Took, d)
			}
			return r
		}
		if time.Now().After(deadline) {
			return WaitResult{Took: time.Since(since)}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitHAProxy is WaitAgents for an HAProxy's samples.
func (o *Observer) WaitHAProxy(name string, since time.Time, limit time.Duration, cond func(HXSnap) bool) WaitResult {
	var okAt time.Time
	seen := 0
	deadline := since.Add(limit)
	for {
		o.mu.Lock()
		snaps := o.hx[name]
		for ; seen < len(snaps); seen++ {
			s := snaps[seen]
			if s.At.Before(since) {
				continue
			}
			if s.Err == "" && cond(s) {
				if okAt.IsZero() {
					okAt = s.At
				}
			} else {
				okAt = time.Time{}
			}
		}
		o.mu.Unlock()
		if !okAt.IsZero() {
			return WaitResult{OK: true, Took: okAt.Sub(since)}
		}
		if time.Now().After(deadline) {
			return WaitResult{Took: time.Since(since)}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
