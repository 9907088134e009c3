// Package sink is the contract between the agent and its pool sinks, the
// local routers (HAProxy, a pool file) that follow the routing pool, and
// what every sink shares: the Update it applies, its Options, and the
// Recorder that keeps its status.
//
// # The contract
//
// A sink implements [Sink]. The agent hands it every new routed pool with
// [Sink.Update], from the router's goroutine: Update must not block, so a
// sink applies on a goroutine of its own (package driver runs one: an apply
// at once after each Update, updates coalesced, and one every interval).
//
// # Frozen
//
// [Update.Frozen] is set while this agent thinks it is the one cut off from
// the cluster (routing's isolation). Every sink follows the same rule while
// frozen ([Withholds]): it still adds nodes (a node new to a role is put
// in) but withholds removals it cannot verify: a node it routed to stays
// routed to, even when the pool says it is out or has moved to another role
// (so a writer role can hold two nodes), except in
// the writer role of a cluster that follows a writer term (pool.Cluster.Term),
// which follows the pool exactly even while frozen: the term is the
// quorum's signed decision, and a second writer next to its holder would
// take writes that diverge. Nor does it withhold the removal of a node out
// for a reason the node reported itself (pool.Reason.Reported: critical,
// stale, lagging, in maintenance, ...): an isolated view can miss news but
// not invent it, and a replica judged stale must not serve reads until the
// isolation ends. It reports what it withholds in its status notes and sets
// view.SinkStatus.Frozen. The first apply after Frozen clears follows the
// pool exactly again, removals included. The pool a sink gets while frozen
// already holds the nodes removed because their agent failed during the
// isolation window (pool.HoldFailed); the rule covers every other removal.
//
// # Applied generation
//
// Each routed pool carries a [Update.Generation] that increases by one with
// every pool the router hands out (routing.Update.Generation, from 1). A
// sink reports in view.SinkStatus.AppliedGeneration the generation of the
// last pool it has fully applied: the apply succeeded (no error) and was
// not frozen. A failed apply, or one while frozen (which withholds
// removals, so the routing it leaves is not the pool's), does not advance
// it; the next successful unfrozen apply does. Notes (say, a node with no
// HAProxy server) do not stop it, as they do not make the sink fail. The
// generation never goes back, and 0 means nothing applied yet. A
// switchover waits on it: once every router reports a generation at or
// after the pool that carries the new writer, none routes to the old one.
//
// # A new sink
//
// A sink is one package with a New that validates its config and does no
// I/O, keeps its status in a [Recorder], and runs its applies with a
// driver.Driver; see packages file and haproxy. Wiring it is one line in
// the agent's list of sinks (internal/agent/sinks.go), for example:
//
//	{"sinks.proxysql", c.ProxySQLEnabled(), func() (sink.Sink, error) { return proxysql.New(c.ProxySQL, opts) }},
package sink

import (
	"context"
	"log/slog"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/view"
)

// Sink is a local router the agent drives from the pool. Its methods are
// safe for concurrent use.
type Sink interface {
	// Start runs the sink's loop until ctx ends or Close is called. Calls
	// after the first, or after Close, do nothing.
	Start(ctx context.Context)
	// Update hands the sink a new pool and asks for an apply without
	// waiting for it; the sink copies the pool. Updates that arrive during
	// an apply coalesce into one more apply with the newest.
	Update(u Update)
	// Close stops the loop and waits for it. It is safe to call more than
	// once.
	Close() error
	// Status is what the sink has done so far, as the API shows it.
	Status() view.SinkStatus
}

// Update is one routed pool for a sink to apply.
type Update struct {
	Pool       *pool.Pool // the routed pool; nil means no clusters
	Frozen     bool       // withhold removals (see the package doc)
	Generation uint64     // the router's generation of this pool; 0 for none
}

// Withholds reports whether a sink withholds taking node name out of a role
// of cluster c in an update frozen or not: only while frozen, never from the
// writer role of a cluster that follows a writer term, and never when c has
// the node out for a reason it reported itself (pool.Reason.Reported; see
// the package doc, "Frozen"). c may be nil.
func Withholds(frozen bool, c *pool.Cluster, writerRole bool, name string) bool {
	if !frozen || c == nil {
		return frozen
	}
	if writerRole && c.Term != nil {
		return false
	}
	for _, n := range c.Out {
		if n.Name == name {
			return !n.Reason.Reported()
		}
	}
	return true
}

// Options are a sink's collaborators. Zero fields take the defaults.
type Options struct {
	Logger *slog.Logger    // default slog.Default()
	Clock  clockwork.Clock // default the real clock; the driver's timer too
}

// WithDefaults returns o with its zero fields set.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	return o
}
