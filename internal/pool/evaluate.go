package pool

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// kind is what a db member can be before the cluster-wide rules apply.
type kind uint8

const (
	kindOut        kind = iota // out for a hard reason
	kindWriter                 // passing, writable
	kindSoftWriter             // warning, writable: writer only by the floor
	kindReader                 // passing, read-only, replicating within max lag
	kindSoftReader             // read-only but out for a soft reason: reader only by the floor
)

// eval is one db member judged on its own.
type eval struct {
	node     Node // Reason and Detail say why when not in normally
	kind     kind
	galera   bool // synced Galera node (all of them are writable)
	lagKnown bool
	lag      uint32
	// serverID is the server's @@server_id; sourceID, for a read-only
	// replica, the server_id of its replication source (0: unknown, an
	// older agent, or not a replica): see dropWrongSource.
	serverID, sourceID uint32
	// replica is a read-only, non-Galera server with a replication source:
	// its freshness is judged against the writer (judgeFreshness).
	replica bool
	pos     tags.Position // its GTID position, unknown without GTID
	// voter: the member advertises a valid voter tag (tags.Voter), so its
	// cluster's writer follows the writer term (requiresTerm).
	voter bool
	// wsrep: the member's health says Galera (wsrep_on), synced or not
	// (noWriterTerm).
	wsrep bool
}

// wsrepReason is the probe's reason code (probe.ReasonWsrep) for a Galera
// node not synced or not in the primary component, as the health tag
// carries it.
const wsrepReason = "wsrep"

// evaluate judges a db member on its own tags and status.
func evaluate(m Member, p Policy) eval {
	e := eval{node: Node{Name: m.Name, Addr: m.Addr}}
	out := func(r Reason, detail string) eval {
		e.kind, e.node.Reason, e.node.Detail = kindOut, r, detail
		return e
	}
	if m.Bad != ReasonNone {
		return out(m.Bad, m.BadDetail)
	}
	_, e.voter = tags.Voter(m.Tags)
	if reason, ok := tags.Maint(m.Tags); ok {
		return out(ReasonMaintenance, reason)
	}
	switch m.Status {
	case StatusAlive:
	case StatusLeaving:
		return out(ReasonLeaving, "")
	case StatusLeft:
		return out(ReasonLeft, "")
	default:
		return out(ReasonAgentFailed, "serf status "+m.Status.String())
	}
	switch {
	case m.HealthErr != "":
		return out(ReasonBadHealthTag, m.HealthErr)
	case m.Health == nil:
		return out(ReasonNoHealth, "")
	}
	h := *m.Health
	e.wsrep = h.Galera
	// A Galera node whose probe read wsrep status saying not synced (Galera
	// set, GaleraSynced clear: the facts of a check that failed any other
	// way carry no Galera status), or still critical from such checks while
	// it resyncs, is out for that reason, not "critical": the probe's
	// hysteresis turns it critical after fall checks, and the reason must
	// not change under the operator's eyes while the node is desynced.
	if h.Galera && (!h.GaleraSynced || (h.State == tags.Critical && h.Reason == wsrepReason)) {
		return out(ReasonGaleraNotSynced, h.Reason)
	}
	if h.State != tags.Passing && h.State != tags.Warning {
		return out(ReasonCritical, h.Reason)
	}
	e.galera = h.Galera
	e.lagKnown, e.lag = h.LagKnown, h.LagSeconds
	e.serverID = h.ServerID
	e.pos = h.Position
	if h.ReadOnly && h.Replica && !h.Galera {
		e.sourceID = h.SourceServerID
		e.replica = true
	}
	soft := func(k kind, r Reason, detail string) eval {
		e.kind, e.node.Reason, e.node.Detail = k, r, detail
		return e
	}

	if !h.ReadOnly {
		if h.State == tags.Warning {
			return soft(kindSoftWriter, ReasonWarning, h.Reason)
		}
		e.kind = kindWriter
		return e
	}
	switch {
	case h.State == tags.Warning:
		return soft(kindSoftReader, ReasonWarning, h.Reason)
	case h.Galera:
		// Synchronous replication: no threads or lag to check.
	case !h.Replica:
		return soft(kindSoftReader, ReasonReplicationStopped, "no replication source configured")
	case !h.IORunning || !h.SQLRunning:
		return soft(kindSoftReader, ReasonReplicationStopped,
			fmt.Sprintf("io thread %s, sql thread %s", running(h.IORunning), running(h.SQLRunning)))
	case !h.LagKnown:
		return soft(kindSoftReader, ReasonLag, "lag unknown")
	case time.Duration(h.LagSeconds)*time.Second > p.maxLag():
		return soft(kindSoftReader, ReasonLag, fmt.Sprintf("lag %ds > max %s", h.LagSeconds, p.maxLag()))
	}
	e.kind = kindReader
	return e
}

func running(b bool) string {
	if b {
		return "running"
	}
	return "stopped"
}
