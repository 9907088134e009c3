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
	Policy    pool.Policy
	Damp      pool.DampConfig
	NoDamping bool // skip flap damping
	// IsolationWindow: members that failed within it still count in the
	// fleet when this agent judges whether it can reach it
	// (pool.FleetTracker). IsolationMax bounds how long a node whose
	// failure could not be verified is held (pool.DefaultIsolationMax).
	IsolationWindow, IsolationMax time.Duration
	// WriterLease bounds how long the writer of a cluster that follows a
	// writer term is held while its failure is unverified (the writer's
	// lease, consensus.lease); 0: IsolationMax alone.
	WriterLease time.Duration
	// Self is this agent's member name; Reach checks whether it can reach
	// the fleet. With a nil Reach every failure is acted on at once.
	Self  string
	Reach Reacher
	// Resync recomputes even without a trigger, so that damping holds expire
	// and isolation can clear. Default 1s.
	Resync time.Duration
	// Clock times updates, damping and isolation, and ticks Resync. Default
	// the real clock.
	Clock clockwork.Clock
	// Terms returns the writer terms this agent knows, read at every
	// recompute: the clusters that require a term route writes to its
	// holder only (pool.ComputeFresh). nil: no term is known.
	Terms func() pool.TermView
}

// Reacher checks whether this agent can reach the fleet, with pings of its
// own (package gossip).
type Reacher interface {
	// Probe starts a round that pings the named members and reports true,
	// unless a round is running (false); it never blocks. The round's end
	// triggers the router.
	Probe(names []string) bool
	// Latest returns the latest finished round (zero before the first).
	Latest() pool.ReachRound
}

// Update is one new pool with what changed since the previous one.
type Update struct {
	At   time.Time
	Pool *pool.Pool
	// Routed is the pool sinks should apply: Pool, with the nodes whose
	// failure this agent could not verify held in the role they had
	// (pool.Hold).
	Routed   *pool.Pool
	Changes  []pool.Change
	Isolated bool // this agent cannot reach the fleet and holds what it had
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
	hist   *pool.History // the GTID positions seen, for replica freshness
	// recheck is when a replica judged fresh turns stale if nothing is
	// gossiped (pool.Lags.Recheck): Run recomputes then.
	recheck time.Time

	fleet *pool.FleetTracker
	iso   isolation
}

// New returns a router reading the member view from members.
func New(cfg Config, members func() []pool.Member, log *slog.Logger) *Router {
	if cfg.Resync <= 0 {
		cfg.Resync = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.IsolationMax <= 0 {
		cfg.IsolationMax = pool.DefaultIsolationMax
	}
	return &Router{
		cfg:     cfg,
		members: members,
		log:     log,
		clock:   cfg.Clock,
		trigger: make(chan struct{}, 1),
		damper:  pool.NewDamper(cfg.Damp),
		hist:    pool.NewHistory(0),
		fleet:   pool.NewFleetTracker(cfg.IsolationWindow),
		iso:     isolation{holds: map[holdKey]*hold{}},
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
	computed, lags := pool.ComputeFresh(members, r.cfg.Policy, prev.Pool, pool.Freshness{Now: now, History: r.hist}, r.terms())
	r.recheck = lags.Recheck
	next := computed
	if !r.cfg.NoDamping {
		next = r.damper.Apply(now, computed, r.cfg.Policy)
	}
	fleet := r.fleet.Observe(now, members)
	held, iso := r.holdUnverified(now, prev.Routed, next, fleet)
	routed := pool.Hold(next, held)
	changes := pool.Diff(prev.Pool, next)
	if len(changes) == 0 && iso.Isolated == prev.Isolated && samePool(prev.Pool, next) && samePool(prev.Routed, routed) {
		r.mu.Lock()
		r.cur.Isolation, r.cur.Lags = iso, lags
		r.mu.Unlock()
		return
	}
	u := Update{At: now, Pool: next, Routed: routed, Changes: changes, Isolated: iso.Isolated, Isolation: iso,
		Generation: prev.Generation + 1, Lags: lags}
	if iso.Isolated != prev.Isolated {
		if iso.Isolated {
			r.log.Warn("this agent cannot reach the fleet: holding the nodes whose failure it cannot verify",
				"reached", iso.Reach.Reached, "fleet", iso.Reach.Fleet, "reached_db", iso.Reach.ReachedDB, "fleet_db", iso.Reach.FleetDB)
		} else if iso.Expired {
			r.log.Warn("isolation ended by its bound, not by reaching the fleet: held nodes are released",
				"reached", iso.Reach.Reached, "fleet", iso.Reach.Fleet, "reached_db", iso.Reach.ReachedDB, "fleet_db", iso.Reach.FleetDB)
		} else {
			r.log.Info("this agent reaches the fleet again: held nodes are verified one by one",
				"reached", iso.Reach.Reached, "fleet", iso.Reach.Fleet, "reached_db", iso.Reach.ReachedDB, "fleet_db", iso.Reach.FleetDB)
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

// terms returns the writer terms to compute with.
func (r *Router) terms() pool.TermView {
	if r.cfg.Terms == nil {
		return pool.TermView{}
	}
	return r.cfg.Terms()
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

// samePool compares everything listeners see, including details,
// conflicts and writer terms, which Diff does not report.
func samePool(a, b *pool.Pool) bool {
	if len(a.Clusters) != len(b.Clusters) {
		return false
	}
	for i := range a.Clusters {
		x, y := a.Clusters[i], b.Clusters[i]
		if x.Name != y.Name || !slices.Equal(x.Writers, y.Writers) || !slices.Equal(x.Readers, y.Readers) ||
			!slices.Equal(x.Out, y.Out) || !slices.Equal(x.Conflict, y.Conflict) ||
			!sameTerm(x.Term, y.Term) || x.AskTerm != y.AskTerm || x.Unsafe != y.Unsafe {
			return false
		}
	}
	return true
}

// sameTerm compares two clusters' writer terms; nil is no term required.
func sameTerm(a, b *pool.Term) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cluster == b.Cluster && a.Number == b.Number && a.Writer == b.Writer && a.Addr == b.Addr &&
		a.Granted.Equal(b.Granted) && a.Why == b.Why
}
