package probe

import "github.com/shoaldb/shoal/internal/tags"

// Facts is what one check learned about the server. Facts is comparable with
// ==, which is how the probe decides that facts changed. When Reachable is
// false every other field is zero and means nothing: a dead server has no
// read_only.
type Facts struct {
	Reachable bool `json:"reachable"`

	// Read once per connection.
	Flavor  Flavor `json:"flavor"`
	Version string `json:"version"` // @@version, e.g. "10.11.19-MariaDB-0+deb12u1-log"

	// Read at every check.
	ServerID         uint32 `json:"server_id"`
	ReadOnly         bool   `json:"read_only"`
	HasSuperReadOnly bool   `json:"has_super_read_only"` // the variable exists (MySQL ≥ 5.7)
	SuperReadOnly    bool   `json:"super_read_only"`
	// Position is the server's GTID position (MariaDB's gtid_current_pos;
	// on MySQL the highest transaction of the writer's UUID), unknown when
	// PositionNote says why: no GTID support, none yet, more than
	// tags.MaxDomains domains, an unreadable value.
	Position     tags.Position `json:"-"`
	PositionNote string        `json:"gtid_position_note,omitempty"`
	// gtid holds the raw GTID columns between the SELECT and readPosition
	// (which needs the replication status too); always zero after.
	gtid [3]string

	Replication Replication `json:"replication"`
	Galera      Galera      `json:"galera"`
}

// Replication aggregates the server's replication channels (one row of
// SHOW ALL SLAVES STATUS / SHOW REPLICA STATUS each). A channel counts as a
// replica channel as long as it is configured, running or not.
type Replication struct {
	// Known is false when the status statement failed (e.g. missing
	// grant); the other fields are then zero.
	Known bool `json:"known"`
	// Channels is the number of configured channels; 0 on a primary.
	Channels int `json:"channels"`
	// IORunning / SQLRunning: every channel's thread reports Yes.
	IORunning  bool `json:"io_running"`
	SQLRunning bool `json:"sql_running"`
	// IOConnecting: some IO thread reports Connecting (source unreachable).
	IOConnecting bool `json:"io_connecting"`
	// NotReceiving: the IO threads report running, but nothing (no event,
	// no heartbeat) arrived for ReceiveSilence of the heartbeat period: a
	// source that froze or whose link was cut silently, long before the IO
	// thread notices (slave_net_timeout, 60 s by default). Judged only
	// where the server shows its heartbeats (MariaDB) and every channel has
	// a heartbeat period.
	NotReceiving bool `json:"not_receiving,omitempty"`
	// SourceServerID is the server_id of the server the first channel
	// replicates from (Master_Server_Id / Source_Server_Id); 0 when unknown
	// (the IO thread never connected) or not a replica.
	SourceServerID uint32 `json:"source_server_id,omitempty"`
	// SourceUUID is the first channel's Source_UUID / Master_UUID (MySQL;
	// MariaDB has no such column): whose transactions a MySQL replica's
	// position counts.
	SourceUUID string `json:"source_uuid,omitempty"`
	// LagKnown is false when any channel's Seconds_Behind_Master/Source is
	// NULL (SQL thread stopped, IO thread reconnecting); LagSeconds is then 0.
	LagKnown   bool  `json:"lag_known"`
	LagSeconds int64 `json:"lag_seconds"` // worst channel
	// The first non-empty errors, prefixed with the channel name when the
	// channel has one.
	LastIOErrno  int    `json:"last_io_errno,omitempty"`
	LastIOError  string `json:"last_io_error,omitempty"`
	LastSQLErrno int    `json:"last_sql_errno,omitempty"`
	LastSQLError string `json:"last_sql_error,omitempty"`
}

// IsReplica reports whether at least one replication channel is configured.
func (r Replication) IsReplica() bool { return r.Channels > 0 }

// Galera holds wsrep status, read only when wsrep_on is ON.
type Galera struct {
	Enabled bool `json:"enabled"`
	// LocalState is wsrep_local_state: 4 is Synced, 2 Donor/Desynced,
	// 1 Joining, 3 Joined.
	LocalState int `json:"local_state"`
	// ClusterStatus is wsrep_cluster_status: Primary, Non-Primary, Disconnected.
	ClusterStatus string `json:"cluster_status"`
}

// GaleraSynced is wsrep_local_state for a synced node.
const GaleraSynced = 4

// Healthy reports whether a Galera node may serve traffic: synced and in
// the Primary component. Always true when Galera is off.
func (g Galera) Healthy() bool {
	return !g.Enabled || (g.LocalState == GaleraSynced && g.ClusterStatus == "Primary")
}

// Health is what this status publishes in the fact schema (tags.Facts):
// the state, the reason of a state that is not passing, and the facts of
// Known, the latest ones read (a check that failed before reading any,
// while the state has not yet moved, publishes the server as it was). It is
// the one mapping from what the probe reads to what every agent sees: the
// tag, the API, the CLI, the status page and the metrics all read its result.
// port is the MySQL port routers send clients to (0: none published).
func (s Status) Health(port uint16) tags.Health {
	f := s.Known
	r := f.Replication
	h := tags.Health{
		ReadOnly:       f.ReadOnly,
		SuperReadOnly:  f.SuperReadOnly,
		Replica:        r.IsReplica(),
		IORunning:      r.IORunning,
		SQLRunning:     r.SQLRunning,
		NotReceiving:   r.NotReceiving,
		LagKnown:       r.LagKnown,
		LagSeconds:     uint32(min(max(r.LagSeconds, 0), tags.MaxLagSeconds)),
		ServerID:       f.ServerID,
		SourceServerID: r.SourceServerID,
		Position:       f.Position,
		Galera:         f.Galera.Enabled,
		GaleraSynced:   f.Galera.Enabled && f.Galera.Healthy(),
		Port:           port,
	}
	switch s.State {
	case StatePassing:
		h.State = tags.Passing
	case StateWarning:
		h.State, h.Reason = tags.Warning, string(s.Reason)
	default:
		h.State, h.Reason = tags.Critical, string(s.Reason)
	}
	return h
}
