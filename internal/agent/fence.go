package agent

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
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
	// lease is the writer's lease (consensus.lease) on a voter; 0 on a db
	// agent that does not vote, which holds no term.
	lease time.Duration
	// run fences; fence.Fence, which tests replace. unfence undoes a
	// lease fence; fence.Unfence, which tests replace.
	run     func(context.Context, fence.Config) (fence.Result, error)
	unfence func(context.Context, fence.Config) error

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
	f := &fencer{cfg: fence.FromProbe(pc, fence.DefaultTimeout), after: a.cfg.Consensus.FenceAfter, run: fence.Fence, unfence: fence.Unfence}
	if a.cfg.ConsensusVoter() {
		f.lease = a.cfg.Consensus.LeaseDuration()
	}
	return f
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

// runFence fences this agent's own server, until ctx ends, when
// fenceConflict has held for fence_after (another node holds the term),
// or when this voter holds a term and its lease ran out (leaseLost).
func (a *Agent) runFence(ctx context.Context) {
	f := a.cons.fence
	if f == nil {
		return
	}
	t := a.clock.NewTicker(fenceTick)
	defer t.Stop()
	var conflict, lease fenceEpisode
	// At start, raft needs an election (or the leader's next heartbeat)
	// before the first contact: a second lease of grace, so that a fleet
	// restarted at once does not fence its writers.
	watch := leaseWatch{grace: a.clock.Now().Add(f.lease)}
	var back leaseReturn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		u := a.pool.router.Current()
		cluster, why, on := fenceConflict(u.Pool, a.cfg.Node, u.Isolated)
		a.fenceIf(ctx, f, &conflict, on, f.after, cluster, why)
		if n := a.cons.node; n != nil && f.lease > 0 {
			st := n.Status()
			watch.observe(st.State == "leader", st.LastContact, a.clock.Now())
			tv := a.cons.terms.View()
			held := heldTerms(tv, a.cfg.Node)
			if why, on := watch.lost(held, a.clock.Now(), f.lease); on {
				a.fenceIf(ctx, f, &lease, true, 0, held[0].Cluster, why)
				if lease.done && back.fenced == nil {
					back = leaseReturn{fenced: held}
				}
				back.since = time.Time{}
			} else if back.fenced != nil {
				// Contact is back after a lease fence: undo it once the
				// contact has lasted fence_after and the terms are still
				// this node's (no one was granted one meanwhile).
				if back.step(a.clock.Now(), f.after) {
					a.unfenceIf(ctx, f, &back, tv, u.Isolated)
				}
				if back.fenced == nil {
					lease = fenceEpisode{}
				}
			} else {
				a.fenceIf(ctx, f, &lease, false, 0, "", "")
			}
		}
	}
}

// leaseReturn is the fencing loop's memory of a fence for a lost lease:
// the terms held then, and since when contact is back.
type leaseReturn struct {
	fenced []pool.Term // nil: no lease fence to undo
	since  time.Time   // contact back since; zero while it is not
	next   time.Time   // no attempt before this (after a failure)
}

// step notes that contact is back at now and reports whether the fence
// may be undone: contact has lasted after, and no failed attempt waits.
func (b *leaseReturn) step(now time.Time, after time.Duration) bool {
	if b.since.IsZero() {
		b.since = now
	}
	return now.Sub(b.since) >= after && !now.Before(b.next)
}

// stillHeld reports whether every term fenced is still this node's, by
// tv, and if not, which moved.
func (b *leaseReturn) stillHeld(tv pool.TermView, self string) (string, bool) {
	for _, t := range b.fenced {
		cur := tv.Terms[t.Cluster]
		if cur.Number != t.Number || cur.Writer != self {
			return fmt.Sprintf("term %d of %s is now %d, held by %s", t.Number, t.Cluster, cur.Number, cur.Writer), false
		}
	}
	return "", true
}

// unfenceIf undoes a lease fence when this node still holds every term it
// held then: contact with the quorum is back and no other server was
// granted a term meanwhile, so no other server took writes; the writes
// stop only for the outage. When a term moved, the server stays read-only
// for good (an operator or a new term decides).
func (a *Agent) unfenceIf(ctx context.Context, f *fencer, b *leaseReturn, tv pool.TermView, isolated bool) {
	if isolated {
		return
	}
	cluster := b.fenced[0].Cluster
	moved, ok := b.stillHeld(tv, a.cfg.Node)
	now := a.clock.Now()
	e := history.Entry{Time: now, Kind: history.KindFence, Cluster: cluster, Node: a.cfg.Node, From: "read-only", To: "writable", Reason: "ok"}
	switch {
	case !ok:
		a.log.Warn("fencing: contact is back but a term moved: this server stays read-only", "why", moved)
		e.To, e.Reason, e.Detail = "read-only", "kept", "contact back, stays read-only: "+moved
		b.fenced = nil
	case a.cons.sw.wasDemoted(cluster, b.fenced[0].Number):
		a.log.Warn("fencing: contact is back, but a switchover demoted this server meanwhile: it stays read-only", "cluster", cluster)
		e.To, e.Reason, e.Detail = "read-only", "kept", "contact back, stays read-only: a switchover demoted it"
		b.fenced = nil
	default:
		err := f.unfence(ctx, f.cfg)
		if err != nil {
			a.log.Error("fencing: undoing the lease fence failed", "error", err)
			e.To, e.Reason, e.Detail = "read-only", "error", "undo the lease fence: "+err.Error()
			b.next = now.Add(fenceRetry.Delay(1))
			break
		}
		a.log.Warn("fencing: contact is back and this node still holds its terms: the server is writable again", "cluster", cluster)
		e.Detail = fmt.Sprintf("lease regained after a fence, still holds term %d of %s: read_only=OFF", b.fenced[0].Number, cluster)
		b.fenced = nil
	}
	if a.rep.hist != nil {
		a.rep.hist.Add(e)
	}
}

// fenceIf steps the episode ep and fences when it is due.
func (a *Agent) fenceIf(ctx context.Context, f *fencer, ep *fenceEpisode, on bool, after time.Duration, cluster, why string) {
	var due bool
	if *ep, due = ep.step(on, a.clock.Now(), after); due {
		err := a.fenceSafely(ctx, f, cluster, why, ep.attempts+1)
		ep.record(err, a.clock.Now())
		f.setRetry(ep.next)
	}
}

// leaseWatch follows a voter's last contact with a raft leader: itself
// while it leads (hashicorp/raft's leader steps down when it has not heard
// from a quorum for leader_lease_timeout), else raft's last contact.
//
// Before the first contact the lease counts from grace (the agent's start
// plus a lease: raft needs an election first); from the first contact on,
// from the last contact only, so a cut soon after the start fences a lease
// after the last contact, not a lease after the grace.
type leaseWatch struct{ contact, grace time.Time }

// observe notes the raft state seen at now.
func (w *leaseWatch) observe(leader bool, lastContact, now time.Time) {
	switch {
	case leader:
		w.contact = now
	case lastContact.After(w.contact):
		w.contact = lastContact
	}
}

// since is what the lease counts from: the last contact, or the grace
// before any.
func (w *leaseWatch) since() time.Time {
	if w.contact.IsZero() {
		return w.grace
	}
	return w.contact
}

// lost reports whether the lease of a voter holding the terms held ran
// out at now: no contact with a leader for lease. A voter that holds no
// term has no lease.
func (w *leaseWatch) lost(held []pool.Term, now time.Time, lease time.Duration) (why string, lost bool) {
	if len(held) == 0 || now.Sub(w.since()) < lease {
		return "", false
	}
	var ts []string
	for _, t := range held {
		ts = append(ts, fmt.Sprintf("term %d of %s", t.Number, t.Cluster))
	}
	return fmt.Sprintf("lease lost: holds %s, no contact with a raft leader for %s (lease %s)",
		strings.Join(ts, ", "), now.Sub(w.since()).Round(time.Millisecond), lease), true
}

// heldTerms are the terms of tv that self holds, by cluster name.
func heldTerms(tv pool.TermView, self string) []pool.Term {
	var out []pool.Term
	for _, c := range slices.Sorted(maps.Keys(tv.Terms)) {
		if t := tv.Terms[c]; t.Number > 0 && t.Writer == self {
			out = append(out, t)
		}
	}
	return out
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
	if a.probe != nil && res.ReadOnly {
		a.probe.CheckNow() // every agent sees the server read-only at once
	}
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
