package fencing

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/view"
)

// Actuator is what the Fencer does to its server (a *fence.Actuator).
type Actuator interface {
	Fence(ctx context.Context) (fence.Result, error)
	Unfence(ctx context.Context) error
}

// Config is the Fencer's ports. Only Actuator and Pool are required.
type Config struct {
	Node  string        // the local node's name
	After time.Duration // consensus.fence_after
	// Lease is the writer's lease (consensus.lease) on a voter; 0 on a db
	// agent that does not vote, which holds no term: no lease watch.
	Lease    time.Duration
	Target   string // the server's address, for the log
	Actuator Actuator
	// Pool returns the agent's current pool and whether it is isolated.
	Pool func() (p *pool.Pool, isolated bool)
	// Terms returns the writer terms this agent knows.
	Terms func() pool.TermView
	// Contact returns whether this voter leads and raft's last contact
	// with a leader; ok is false when this agent is no voter.
	Contact func() (leader bool, last time.Time, ok bool)
	// WasDemoted reports whether a switchover demoted the server in
	// cluster at term or later: a lease fence is then never undone.
	WasDemoted func(cluster string, term uint64) bool
	Record     func(history.Entry) // the history; may be nil
	ReadOnly   func()              // a fence set the server read-only; may be nil
	Clock      clockwork.Clock     // nil: the real clock
	Log        *slog.Logger        // nil: discarded
}

// Fencer fences the agent's own server. Its Status and Collectors are safe
// for concurrent use, and on a nil Fencer (fencing off).
type Fencer struct {
	cfg Config

	ok, failed, killed atomic.Uint64

	mu   sync.Mutex // guards: last
	last *view.Fence
}

// tick is how often the fencing loop looks at the pool: a fence starts at
// most this much after fence_after.
const tick = 250 * time.Millisecond

// New returns the fencer of cfg's server; Run runs it.
func New(cfg Config) *Fencer {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Fencer{cfg: cfg}
}

// loop is the fencing loop's memory.
type loop struct {
	conflict, lease episode
	watch           leaseWatch
	back            leaseReturn
	// fresh: the server has not been in the pool since this agent saw it
	// down (critical). A conflict then is a server that started writable
	// while another holds the term (a dead writer replaced by a failover,
	// a demoted one restarted with read_only=OFF in its file), not an
	// operator promoting in the wrong order: it is fenced at once, not
	// after fence_after. Not at the agent's own start: its terms may be
	// older than the fleet's until it hears the newer ones.
	fresh bool
}

// Run fences the server, until ctx ends, when Conflict has held for
// fence_after (another node holds the term), or when this voter holds a
// term and its lease ran out.
func (f *Fencer) Run(ctx context.Context) {
	t := f.cfg.Clock.NewTicker(tick)
	defer t.Stop()
	// At start, raft needs an election (or the leader's next heartbeat)
	// before the first contact: a lease of grace, so that a fleet
	// restarted at once does not fence its writers.
	l := loop{watch: leaseWatch{grace: f.cfg.Clock.Now().Add(f.cfg.Lease)}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		f.look(ctx, &l)
	}
}

// look is one look of the loop at the pool and the lease.
func (f *Fencer) look(ctx context.Context, l *loop) {
	p, isolated := f.cfg.Pool()
	cluster, why, on := Conflict(p, f.cfg.Node, isolated)
	after := f.cfg.After
	if on && l.fresh {
		after, why = 0, why+"; it came back writable: fenced at once"
	}
	f.fenceIf(ctx, &l.conflict, on, after, cluster, why)
	switch down, in := selfState(p, f.cfg.Node); {
	case down:
		l.fresh = true
	case in:
		l.fresh = false
	}
	if f.cfg.Lease <= 0 || f.cfg.Contact == nil || f.cfg.Terms == nil {
		return
	}
	leader, last, ok := f.cfg.Contact()
	if !ok {
		return
	}
	now := f.cfg.Clock.Now()
	l.watch.observe(leader, last, now)
	tv := f.cfg.Terms()
	held := heldTerms(tv, f.cfg.Node)
	if why, on := l.watch.lost(held, now, f.cfg.Lease); on {
		f.fenceIf(ctx, &l.lease, true, 0, held[0].Cluster, why)
		if l.lease.done && l.back.fenced == nil {
			l.back = leaseReturn{fenced: held}
		}
		l.back.since = time.Time{}
		return
	}
	if l.back.fenced == nil {
		f.fenceIf(ctx, &l.lease, false, 0, "", "")
		return
	}
	// Contact is back after a lease fence: undo it once the contact has
	// lasted fence_after and the terms are still this node's (no one was
	// granted one meanwhile).
	if l.back.step(now, f.cfg.After) {
		f.unfenceIf(ctx, &l.back, tv, isolated)
	}
	if l.back.fenced == nil {
		l.lease = episode{}
	}
}

// fenceIf steps the episode ep and fences when it is due.
func (f *Fencer) fenceIf(ctx context.Context, ep *episode, on bool, after time.Duration, cluster, why string) {
	var due bool
	if *ep, due = ep.step(on, f.cfg.Clock.Now(), after); due {
		err := f.fenceSafely(ctx, cluster, why, ep.attempts+1)
		ep.record(err, f.cfg.Clock.Now())
		f.setRetry(ep.next)
	}
}

// unfenceIf undoes a lease fence when this node still holds every term it
// held then: contact with the quorum is back and no other server was
// granted a term meanwhile, so no other server took writes; the writes
// stop only for the outage. When a term moved, the server stays read-only
// for good (an operator or a new term decides).
func (f *Fencer) unfenceIf(ctx context.Context, b *leaseReturn, tv pool.TermView, isolated bool) {
	if isolated {
		return
	}
	cluster := b.fenced[0].Cluster
	moved, ok := b.stillHeld(tv, f.cfg.Node)
	now := f.cfg.Clock.Now()
	e := history.Entry{Time: now, Kind: history.KindFence, Cluster: cluster, Node: f.cfg.Node, From: "read-only", To: "writable", Reason: "ok"}
	switch {
	case !ok:
		f.cfg.Log.Warn("fencing: contact is back but a term moved: this server stays read-only", "why", moved)
		e.To, e.Reason, e.Detail = "read-only", "kept", "contact back, stays read-only: "+moved
		b.fenced = nil
	case f.cfg.WasDemoted != nil && f.cfg.WasDemoted(cluster, b.fenced[0].Number):
		f.cfg.Log.Warn("fencing: contact is back, but a switchover demoted this server meanwhile: it stays read-only", "cluster", cluster)
		e.To, e.Reason, e.Detail = "read-only", "kept", "contact back, stays read-only: a switchover demoted it"
		b.fenced = nil
	default:
		err := f.cfg.Actuator.Unfence(ctx)
		if err != nil {
			f.cfg.Log.Error("fencing: undoing the lease fence failed", "error", err)
			e.To, e.Reason, e.Detail = "read-only", "error", "undo the lease fence: "+err.Error()
			b.next = now.Add(retry.Delay(1))
			break
		}
		f.cfg.Log.Warn("fencing: contact is back and this node still holds its terms: the server is writable again", "cluster", cluster)
		e.Detail = fmt.Sprintf("lease regained after a fence, still holds term %d of %s: read_only=OFF", b.fenced[0].Number, cluster)
		b.fenced = nil
	}
	f.record(e)
}

func (f *Fencer) record(e history.Entry) {
	if f.cfg.Record != nil {
		f.cfg.Record(e)
	}
}

// fenceSafely fences once and publishes the outcome; a panic is a failed
// attempt.
func (f *Fencer) fenceSafely(ctx context.Context, cluster, why string, attempt int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f.cfg.Log.Error("fencing: recovered from a panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
			f.publish(cluster, why, attempt, fence.Result{}, err)
		}
	}()
	f.cfg.Log.Warn("fencing this server: setting it read-only and killing its client connections",
		"cluster", cluster, "why", why, "attempt", attempt, "target", f.cfg.Target)
	res, err := f.cfg.Actuator.Fence(ctx)
	if res.ReadOnly && f.cfg.ReadOnly != nil {
		f.cfg.ReadOnly() // every agent sees the server read-only at once
	}
	f.publish(cluster, why, attempt, res, err)
	return err
}

// publish tells of a fencing attempt: the log, the history, the metrics
// and `shoal health`.
func (f *Fencer) publish(cluster, why string, attempt int, res fence.Result, err error) {
	now := f.cfg.Clock.Now()
	st := &view.Fence{Time: now, Why: why, Result: "ok", Killed: res.Killed, Attempt: attempt}
	e := history.Entry{Time: now, Kind: history.KindFence, Cluster: cluster, Node: f.cfg.Node, From: "writable", To: "read-only", Reason: "ok",
		Detail: fmt.Sprintf("%s; %d client connections killed", why, res.Killed)}
	f.killed.Add(uint64(res.Killed))
	if err != nil {
		f.failed.Add(1)
		st.Result, st.Error = "error", err.Error()
		e.Reason, e.Detail = "error", why+"; "+err.Error()
		if !res.ReadOnly {
			e.To = "writable"
		}
		f.cfg.Log.Error("fencing failed", "cluster", cluster, "why", why, "attempt", attempt, "read_only", res.ReadOnly, "killed", res.Killed, "error", err)
	} else {
		f.ok.Add(1)
		f.cfg.Log.Warn("fenced this server", "cluster", cluster, "why", why, "attempt", attempt, "flavor", res.Flavor, "killed", res.Killed, "kept", res.Kept)
	}
	f.record(e)
	f.mu.Lock()
	f.last = st
	f.mu.Unlock()
}

// setRetry notes when a failed attempt is retried (zero after a success).
func (f *Fencer) setRetry(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last != nil {
		f.last.Retry = at
	}
}

// Status is the last fencing, for `shoal health`; nil when none (or f is
// nil).
func (f *Fencer) Status() *view.Fence {
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

// Collectors are the fencing metrics, zero when f is nil (fencing off).
func (f *Fencer) Collectors() []prometheus.Collector {
	if f == nil {
		f = &Fencer{}
	}
	return metrics.NewFenceCollectors(metrics.FenceCounts{OK: f.ok.Load, Error: f.failed.Load, Killed: f.killed.Load})
}
