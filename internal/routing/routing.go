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
	"slices"
	"sync"
	"time"

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
}

// Update is one new pool with what changed since the previous one.
type Update struct {
	At       time.Time
	Pool     *pool.Pool
	Changes  []pool.Change
	Isolated bool
	// Isolation details, for operators.
	Isolation pool.IsolationState
}

// Listener receives updates, in order, from the router goroutine. It must
// not block for long: sinks hand the pool to their own goroutine.
type Listener func(Update)

// Router owns the pool state. Create with New, run with Run.
type Router struct {
	cfg     Config
	members func() []pool.Member
	log     *slog.Logger
	now     func() time.Time

	trigger chan struct{}

	mu        sync.RWMutex
	cur       Update
	listeners []Listener

	damper *pool.Damper
	iso    *pool.IsolationDetector
}

// New returns a router reading the member view from members.
func New(cfg Config, members func() []pool.Member, log *slog.Logger) *Router {
	if cfg.Resync <= 0 {
		cfg.Resync = time.Second
	}
	return &Router{
		cfg:     cfg,
		members: members,
		log:     log,
		now:     time.Now,
		trigger: make(chan struct{}, 1),
		damper:  pool.NewDamper(cfg.Damp),
		iso:     pool.NewIsolationDetector(cfg.IsolationWindow),
		cur:     Update{Pool: &pool.Pool{}},
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

// Run recomputes on triggers and every Resync until ctx ends.
func (r *Router) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Resync)
	defer t.Stop()
	r.step()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
		case <-t.C:
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
	now := r.now()
	members := r.members()
	prev := r.Current()
	computed := pool.Compute(members, r.cfg.Policy, prev.Pool)
	next := computed
	if !r.cfg.NoDamping {
		next = r.damper.Apply(now, computed, r.cfg.Policy)
	}
	iso := r.iso.Observe(now, members)
	changes := pool.Diff(prev.Pool, next)
	if len(changes) == 0 && iso.Isolated == prev.Isolated && samePool(prev.Pool, next) {
		r.mu.Lock()
		r.cur.Isolation = iso
		r.mu.Unlock()
		return
	}
	u := Update{At: now, Pool: next, Changes: changes, Isolated: iso.Isolated, Isolation: iso}
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
		l(u)
	}
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
