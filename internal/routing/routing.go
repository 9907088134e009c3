// Package routing keeps this agent's routing pool current: on every
// membership or tag change it recomputes the pool (pool.Compute, then flap
// damping), tracks whether this agent looks cut off (isolation), records
// transitions, and hands each new pool to its listeners (sinks, hooks,
// metrics). It is the only place where time enters the pool logic.
package routing

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
)

// Config tunes the router.
type Config struct {
	Policy          pool.Policy
	Damp            pool.DampConfig
	NoDamping       bool // skip flap damping
	IsolationWindow time.Duration
	// Resync recomputes even without a trigger, so that damping holds expire
	// and isolation can clear. Default 1s.
	Resync time.Duration
	// Clock times updates, damping and isolation, and ticks Resync. Default
	// the real clock.
	Clock clockwork.Clock
}

// Update is one new pool with what changed since the previous one.
type Update struct {
	At   time.Time
	Pool *pool.Pool
	// Routed is the pool sinks should apply: Pool, except while isolated,
	// when nodes removed because their agent failed are held in the role
	// they had before the isolation window (pool.HoldFailed).
	Routed   *pool.Pool
	Changes  []pool.Change
	Isolated bool
	// Isolation details, for operators.
	Isolation pool.IsolationState
	// Generation numbers the updates handed to listeners: 1, 2, 3, ...; 0
	// before the first. Sinks report the last they applied (package sink).
	Generation uint64
	// Lags is each replica's lag as of the latest recompute, which may be
	// later than At: lags change without the pool changing.
	Lags pool.Lags
}

// Listener receives updates, in order, from the router goroutine. It must
// not block for long: sinks hand the pool to their own goroutine.
type Listener func(Update)

// Router owns the pool state. Create with New, run with Run.
type Router struct {
	cfg     Config
	members func() []pool.Member
	log     *slog.Logger
	clock   clockwork.Clock

	trigger chan struct{}

	mu        sync.RWMutex
	cur       Update
	listeners []Listener

	damper *pool.Damper
	iso    *pool.IsolationDetector
	hist   *pool.History // the GTID positions seen, for replica freshness
	// recheck is when a replica judged fresh turns stale if nothing is
	// gossiped (pool.Lags.Recheck): Run recomputes then.
	recheck time.Time

	lastIn  map[string]map[string]inRole // cluster → node → when last in a role
	isoBase *pool.Pool                   // while isolated: who was in within the window
}

// inRole is when a node was last seen in the writer or reader role.
type inRole struct {
	writerAt, readerAt time.Time
}

// New returns a router reading the member view from members.
func New(cfg Config, members func() []pool.Member, log *slog.Logger) *Router {
	if cfg.Resync <= 0 {
		cfg.Resync = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &Router{
		cfg:     cfg,
		members: members,
		log:     log,
		clock:   cfg.Clock,
		trigger: make(chan struct{}, 1),
		damper:  pool.NewDamper(cfg.Damp),
		iso:     pool.NewIsolationDetector(cfg.IsolationWindow),
		hist:    pool.NewHistory(0),
		cur:     Update{Pool: &pool.Pool{}, Routed: &pool.Pool{}},
	}
}

// Listen adds a listener; call before Run.
func (r *Router) Listen(l Listener) {
	r.mu.Lock()
	r.listeners = append(r.listeners, l)
	r.mu.Unlock()
}

// Trigger asks for a recompute. It never blocks; triggers coalesce.
func (r *Router) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Current returns the latest update. Its pool must not be modified.
func (r *Router) Current() Update {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cur
}

// Run recomputes on triggers, every Resync, and when a replica is due to
// turn stale, until ctx ends.
func (r *Router) Run(ctx context.Context) {
	t := r.clock.NewTicker(r.cfg.Resync)
	defer t.Stop()
	r.step()
	for {
		var due <-chan time.Time // nil: no replica is due
		if !r.recheck.IsZero() {
			due = r.clock.After(max(r.recheck.Sub(r.clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
		case <-t.Chan():
		case <-due:
		}
		r.step()
	}
}

// step computes one new pool and notifies listeners if anything changed.
func (r *Router) step() {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("pool computation panicked; keeping the previous pool", "panic", fmt.Sprint(p))
		}
	}()
	now := r.clock.Now()
	members := r.members()
	prev := r.Current()
	r.hist.Observe(now, members)
	computed, lags := pool.ComputeFresh(members, r.cfg.Policy, prev.Pool, pool.Freshness{Now: now, History: r.hist})
	r.recheck = lags.Recheck
	next := computed
	if !r.cfg.NoDamping {
		next = r.damper.Apply(now, computed, r.cfg.Policy)
	}
	iso := r.iso.Observe(now, members)
	changes := pool.Diff(prev.Pool, next)
	if len(changes) == 0 && iso.Isolated == prev.Isolated && samePool(prev.Pool, next) {
		r.mu.Lock()
		r.cur.Isolation, r.cur.Lags = iso, lags
		r.mu.Unlock()
		return
	}
	u := Update{At: now, Pool: next, Routed: next, Changes: changes, Isolated: iso.Isolated, Isolation: iso,
		Generation: prev.Generation + 1, Lags: lags}
	// Every node of the previous pool held its role until now, however long
	// ago that pool was computed: a steady pool is recomputed without an
	// update, and a node this step drops was in its role until this step.
	r.remember(now, prev.Pool)
	switch {
	case iso.Isolated && !prev.Isolated:
		r.isoBase = r.inSince(iso.Since.Add(-r.window()))
	case !iso.Isolated:
		r.isoBase = nil
	}
	if iso.Isolated {
		u.Routed = pool.HoldFailed(next, r.isoBase)
	}
	r.remember(now, next)
	if iso.Isolated != prev.Isolated {
		if iso.Isolated {
			r.log.Warn("this agent looks cut off from the cluster: freezing removals in local sinks",
				"failed", iso.Failed, "baseline", iso.Baseline)
		} else {
			r.log.Info("cluster reachable again: removals unfrozen")
		}
	}
	for _, c := range changes {
		r.log.Info("pool change", "cluster", c.Cluster, "node", c.Node, "from", string(c.From), "to", string(c.To),
			"reason", string(c.Reason), "detail", c.Detail)
	}
	r.mu.Lock()
	r.cur = u
	ls := slices.Clone(r.listeners)
	r.mu.Unlock()
	for _, l := range ls {
		r.notify(l, u)
	}
}

// notify calls one listener; a panic in it is logged and does not keep the
// listeners after it from getting the update.
func (r *Router) notify(l Listener, u Update) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("pool listener panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	l(u)
}

// samePool compares everything listeners see, including details and
// conflicts, which Diff does not report.
func samePool(a, b *pool.Pool) bool {
	if len(a.Clusters) != len(b.Clusters) {
		return false
	}
	for i := range a.Clusters {
		x, y := a.Clusters[i], b.Clusters[i]
		if x.Name != y.Name || !slices.Equal(x.Writers, y.Writers) || !slices.Equal(x.Readers, y.Readers) ||
			!slices.Equal(x.Out, y.Out) || !slices.Equal(x.Conflict, y.Conflict) {
			return false
		}
	}
	return true
}

func (r *Router) window() time.Duration {
	if r.cfg.IsolationWindow > 0 {
		return r.cfg.IsolationWindow
	}
	return pool.DefaultIsolationWindow
}

// remember records that each node of p was in its role at time at. The
// router calls it with the previous pool before each update (the nodes it
// held until now) and with the new one, so that a node's last time in a
// role is never older than the update that took it out.
func (r *Router) remember(at time.Time, p *pool.Pool) {
	if p == nil {
		return
	}
	if r.lastIn == nil {
		r.lastIn = map[string]map[string]inRole{}
	}
	for _, c := range p.Clusters {
		m := r.lastIn[c.Name]
		if m == nil {
			m = map[string]inRole{}
			r.lastIn[c.Name] = m
		}
		for _, n := range c.Writers {
			e := m[n.Name]
			e.writerAt = at
			m[n.Name] = e
		}
		for _, n := range c.Readers {
			if n.Reason == pool.ReasonFallback {
				// The writer reads only in place of stale readers: not a
				// reader role an isolated agent should hold.
				continue
			}
			e := m[n.Name]
			e.readerAt = at
			m[n.Name] = e
		}
	}
	// Forget what is too old to matter for any future isolation window.
	cutoff := at.Add(-2 * r.window())
	for _, m := range r.lastIn {
		for n, e := range m {
			if e.writerAt.Before(cutoff) && e.readerAt.Before(cutoff) {
				delete(m, n)
			}
		}
	}
}

// inSince returns, as a pool, the nodes that were in a role at some point
// since t: the routing an isolated agent had before it was cut off. The most
// recent writer of each cluster is its writer.
func (r *Router) inSince(t time.Time) *pool.Pool {
	p := &pool.Pool{}
	for cluster, m := range r.lastIn {
		c := pool.Cluster{Name: cluster}
		var writerAt time.Time
		for name, e := range m {
			if !e.writerAt.Before(t) && e.writerAt.After(writerAt) {
				writerAt = e.writerAt
				c.Writers = []pool.Node{{Name: name}}
			}
			if !e.readerAt.Before(t) {
				c.Readers = append(c.Readers, pool.Node{Name: name})
			}
		}
		p.Clusters = append(p.Clusters, c)
	}
	return p
}
