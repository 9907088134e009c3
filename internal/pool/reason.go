package pool

// Reason says why a node is out of the pool, or why it is in against the
// normal rules (floor). The set is closed; see the package doc for the table.
type Reason string

// Reasons.
const (
	ReasonNone               Reason = ""
	ReasonFloor              Reason = "floor"
	ReasonFallback           Reason = "fallback"
	ReasonBadName            Reason = "bad-name"
	ReasonBadTags            Reason = "bad-tags"
	ReasonMaintenance        Reason = "maintenance"
	ReasonLeaving            Reason = "leaving"
	ReasonLeft               Reason = "left"
	ReasonAgentFailed        Reason = "agent-failed"
	ReasonNoHealth           Reason = "no-health"
	ReasonBadHealthTag       Reason = "bad-health-tag"
	ReasonCritical           Reason = "critical"
	ReasonGaleraNotSynced    Reason = "galera-not-synced"
	ReasonWarning            Reason = "warning"
	ReasonReplicationStopped Reason = "replication-stopped"
	ReasonLag                Reason = "lag"
	ReasonStale              Reason = "stale"
	ReasonWrongSource        Reason = "wrong-source"
	ReasonConflict           Reason = "conflict"
	ReasonNoTerm             Reason = "no-term"
	ReasonDamped             Reason = "damped"
)

// Reasons returns every non-empty reason, in the order of the package doc
// table (for example to pre-create metric series).
func Reasons() []Reason {
	return []Reason{
		ReasonFloor, ReasonFallback, ReasonBadName, ReasonBadTags, ReasonMaintenance, ReasonLeaving, ReasonLeft, ReasonAgentFailed,
		ReasonNoHealth, ReasonBadHealthTag, ReasonCritical, ReasonGaleraNotSynced,
		ReasonWarning, ReasonReplicationStopped, ReasonLag, ReasonStale, ReasonWrongSource, ReasonConflict, ReasonNoTerm,
		ReasonDamped,
	}
}

// Soft reports whether r is a soft reason: one the floor may override.
func (r Reason) Soft() bool {
	switch r {
	case ReasonWarning, ReasonReplicationStopped, ReasonLag, ReasonStale:
		return true
	}
	return false
}

// stale reports whether r says a replica's data may be old: the soft
// reasons pool.read_fallback decides about.
func (r Reason) stale() bool {
	return r == ReasonLag || r == ReasonReplicationStopped || r == ReasonStale
}

// Reported reports whether r rests on what the node itself published and
// this agent received: its health (critical, warning, Galera, a bad health
// tag), its replication (stopped, lag, its position against its writer's:
// stale; a re-pointed source), maintenance, a leave, bad names or tags. The
// other reasons rest on what this agent did not hear (agent-failed,
// no-health) or on its own view and history of the cluster (conflict,
// no-term, damped). A sink frozen because this agent is isolated still
// applies a removal for a reported reason (package sink, "Frozen"): a view
// cut off from part of the fleet can miss news, but what did arrive is true,
// and a replica that says it is stale must not serve reads until the
// isolation ends.
func (r Reason) Reported() bool {
	switch r {
	case ReasonBadName, ReasonBadTags, ReasonMaintenance, ReasonLeaving, ReasonLeft, ReasonBadHealthTag,
		ReasonCritical, ReasonGaleraNotSynced, ReasonWarning, ReasonReplicationStopped, ReasonLag,
		ReasonStale, ReasonWrongSource:
		return true
	}
	return false
}

// Health reports whether r is a health reason: the node's agent or database
// is failing by itself (the agent failed, the health tag is missing or bad,
// the probe says critical or warning, Galera is not synced, replication is
// stopped, lags or is stale). Only removals for a health reason count as flaps
// (Damper); maintenance, a graceful leave, bad names or tags, writer
// conflicts and a replica re-pointed at another source (wrong-source) are
// what an operator or a failover tool did, not what the node suffered.
func (r Reason) Health() bool {
	switch r {
	case ReasonAgentFailed, ReasonNoHealth, ReasonBadHealthTag, ReasonCritical, ReasonGaleraNotSynced,
		ReasonWarning, ReasonReplicationStopped, ReasonLag, ReasonStale:
		return true
	}
	return false
}
