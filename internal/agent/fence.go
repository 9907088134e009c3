package agent

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/backoff"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/view"
)

// fencer is a db agent's fencing of its own server (docs/consensus.md,
// "Fencing"): when its server is writable while another node holds the
// cluster's writer term and is the writer in this agent's pool, for
// consensus.fence_after without a break, the agent sets its server
// read-only and kills its client connections (package fence). Once per
// conflict episode; a failure is retried with backoff.
type fencer struct {
	cfg   fence.Config
	after time.Duration
	// run fences; fence.Fence, which tests replace.
	run func(context.Context, fence.Config) (fence.Result, error)

	ok, failed, killed atomic.Uint64

	// mu guards: last
	mu   sync.Mutex
	last *view.Fence
}

// fenceTick is how often the fencing loop looks at the pool: a fence
// starts at most this much after fence_after.
const fenceTick = 250 * time.Millisecond

// fenceRetry spaces the attempts that failed within one conflict.
var fenceRetry = backoff.Policy{Initial: time.Second, Max: 30 * time.Second}

// newFencer is the fencing of the probe's server, nil when fencing is off
// (consensus off, or consensus.fence false).
func (a *Agent) newFencer(pc probe.Config) *fencer {
	if !a.cfg.Consensus.FenceEnabled() {
		return nil
	}
	return &fencer{cfg: fence.FromProbe(pc, fence.DefaultTimeout), after: a.cfg.Consensus.FenceAfter, run: fence.Fence}
}

// fenceEpisode is the fencing loop's memory of the current conflict.
type fenceEpisode struct {
	since    time.Time // when the conflict began; zero when there is none
	done     bool      // this episode's fence succeeded: never again in it
	attempts int
	next     time.Time // no attempt before this (after a failure)
}

// step returns the episode after a look at the pool at now, and whether
// to fence now: the conflict has lasted after, continuously, and this
// episode has not fenced yet (nor is it waiting to retry). A look without
// the conflict ends the episode.
func (e fenceEpisode) step(conflict bool, now time.Time, after time.Duration) (fenceEpisode, bool) {
	if !conflict {
		return fenceEpisode{}, false
	}
	if e.since.IsZero() {
		e.since = now
	}
	return e, !e.done && now.Sub(e.since) >= after && !now.Before(e.next)
}

// record notes an attempt's outcome.
func (e *fenceEpisode) record(err error, now time.Time) {
	e.attempts++
	if err == nil {
		e.done, e.next = true, time.Time{}
		return
	}
	e.next = now.Add(fenceRetry.Delay(e.attempts))
}

// fenceConflict reports whether self, a db node, must be fenced by the
// pool p of its own agent, and why: in a cluster that requires a writer
// term, a term is known, its holder is another node and is the writer in
// p, and self is out with reason conflict (its server is writable). Never
// when this agent is isolated: its view of the fleet may be old.
func fenceConflict(p *pool.Pool, self string, isolated bool) (cluster, why string, ok bool) {
	if p == nil || isolated {
		return "", "", false
	}
	for _, c := range p.Clusters {
		t := c.Term
		if t == nil || t.Number == 0 || t.Writer == self {
			continue
		}
		if len(c.Writers) != 1 || c.Writers[0].Name != t.Writer || c.Writers[0].Addr != t.Addr {
			continue
		}
		for _, n := range c.Out {
			if n.Name == self && n.Reason == pool.ReasonConflict {
				return c.Name, fmt.Sprintf("writable, but term %d belongs to %s (%s)", t.Number, t.Writer, t.Addr), true
			}
		}
	}
	return "", "", false
}

// runFence watches the pool and fences this agent's own server when
// fenceConflict has held for fence_after, until ctx ends.
func (a *Agent) runFence(ctx context.Context) {
	f := a.cons.fence
	if f == nil {
		return
	}
	t := a.clock.NewTicker(fenceTick)
	defer t.Stop()
	var ep fenceEpisode
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		u := a.pool.router.Current()
		cluster, why, conflict := fenceConflict(u.Pool, a.cfg.Node, u.Isolated)
		var now bool
		if ep, now = ep.step(conflict, a.clock.Now(), f.after); now {
			err := a.fenceSafely(ctx, f, cluster, why, ep.attempts+1)
			ep.record(err, a.clock.Now())
			f.setRetry(ep.next)
		}
	}
}

// fenceSafely fences once and publishes the outcome; a panic is a failed
// attempt.
func (a *Agent) fenceSafely(ctx context.Context, f *fencer, cluster, why string, attempt int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("fencing: recovered from a panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
			a.publishFence(f, cluster, why, attempt, fence.Result{}, err)
		}
	}()
	a.log.Warn("fencing this server: setting it read-only and killing its client connections",
		"cluster", cluster, "why", why, "attempt", attempt, "target", f.cfg.Addr)
	res, err := f.run(ctx, f.cfg)
	a.publishFence(f, cluster, why, attempt, res, err)
	return err
}

// publishFence tells of a fencing attempt: the log, the history, the
// metrics and `shoal health`.
func (a *Agent) publishFence(f *fencer, cluster, why string, attempt int, res fence.Result, err error) {
	now := a.clock.Now()
	st := &view.Fence{Time: now, Why: why, Result: "ok", Killed: res.Killed, Attempt: attempt}
	e := history.Entry{Time: now, Kind: history.KindFence, Cluster: cluster, Node: a.cfg.Node, From: "writable", To: "read-only", Reason: "ok",
		Detail: fmt.Sprintf("%s; %d client connections killed", why, res.Killed)}
	f.killed.Add(uint64(res.Killed))
	if err != nil {
		f.failed.Add(1)
		st.Result, st.Error = "error", err.Error()
		e.Reason, e.Detail = "error", why+"; "+err.Error()
		if !res.ReadOnly {
			e.To = "writable"
		}
		a.log.Error("fencing failed", "cluster", cluster, "why", why, "attempt", attempt, "read_only", res.ReadOnly, "killed", res.Killed, "error", err)
	} else {
		f.ok.Add(1)
		a.log.Warn("fenced this server", "cluster", cluster, "why", why, "attempt", attempt, "flavor", res.Flavor, "killed", res.Killed, "kept", res.Kept)
	}
	if a.rep.hist != nil {
		a.rep.hist.Add(e)
	}
	f.mu.Lock()
	f.last = st
	f.mu.Unlock()
}

// setRetry notes when a failed attempt is retried (zero after a success).
func (f *fencer) setRetry(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last != nil {
		f.last.Retry = at
	}
}

// status is the last fencing, for `shoal health`; nil when none.
func (f *fencer) status() *view.Fence {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		return nil
	}
	out := *f.last
	return &out
}

// fenceCollectors are the fencing metrics, zero when fencing is off.
func (a *Agent) fenceCollectors() []prometheus.Collector {
	f := a.cons.fence
	if f == nil {
		f = &fencer{}
	}
	return metrics.NewFenceCollectors(metrics.FenceCounts{OK: f.ok.Load, Error: f.failed.Load, Killed: f.killed.Load})
}
