package client

import "time"

// Member is one gossip member as the agent sees it.
type Member struct {
	Name   string            `json:"name"`
	Addr   string            `json:"addr"`
	Port   uint16            `json:"port"`
	Status string            `json:"status"` // alive, leaving, left, failed
	Tags   map[string]string `json:"tags"`
	// Protocol versions, as serf reports them.
	Protocol [3]uint8 `json:"protocol"`
	Delegate [3]uint8 `json:"delegate"`
	// Invalid is set when the member's gossiped name or tags break shoal's
	// rules: it is never routed to, and Name and Tags are escaped display
	// forms (Name is what force-leave accepts).
	Invalid *MemberProblem `json:"invalid,omitempty"`
	// RTTSeconds is the round trip to the member that serf's network
	// coordinates estimate, from the agent answering; absent for the agent
	// itself and for a member with no coordinate yet.
	RTTSeconds *float64 `json:"rtt_seconds,omitempty"`
	// Health is a valid db member's health tag, decoded: what its own
	// agent's probe found and published (every agent sees the same).
	Health *MemberHealth `json:"health,omitempty"`
	// Lag is a replica's replication lag as the answering agent judges it
	// (as in GET /v1/pool); absent for members without one.
	Lag *Lag `json:"lag,omitempty"`
}

// MemberHealth is a db member's published health tag, decoded.
type MemberHealth struct {
	State         string `json:"state,omitempty"` // passing, warning, critical; empty when Error is set
	Reason        string `json:"reason,omitempty"`
	ReadOnly      bool   `json:"read_only"`
	SuperReadOnly bool   `json:"super_read_only"`
	Replica       bool   `json:"replica"`
	IORunning     bool   `json:"io_running"`
	SQLRunning    bool   `json:"sql_running"`
	// NotReceiving: the IO thread runs but nothing, not even a heartbeat,
	// arrived from the source for 3 heartbeat periods.
	NotReceiving bool   `json:"not_receiving,omitempty"`
	LagSeconds   *int64 `json:"lag_seconds,omitempty"` // absent when unknown (NULL)
	ServerID     uint32 `json:"server_id"`
	// SourceServerID is the server_id of the server it replicates from;
	// absent when unknown or not a replica.
	SourceServerID uint32 `json:"source_server_id,omitempty"`
	// GTIDPosition is the server's GTID position, "domain:seq" per domain
	// (at most two), comma separated; absent when unknown (no GTID yet,
	// more than two domains, no GTID support): its freshness is then
	// judged by Seconds_Behind_Master.
	GTIDPosition string `json:"gtid_position,omitempty"`
	Galera       bool   `json:"galera,omitempty"`
	GaleraSynced bool   `json:"galera_synced,omitempty"`
	Port         uint16 `json:"port,omitempty"` // the MySQL port; 0: not published
	// Error says why the tag does not decode (the pool has the member out
	// with reason no-health or bad-health-tag).
	Error string `json:"error,omitempty"`
}

// MemberProblem says which rule a member's name or tags break.
type MemberProblem struct {
	Reason string `json:"reason"` // bad-name or bad-tags, as in the pool
	Detail string `json:"detail"`
}

// MembersResponse is GET /v1/members.
type MembersResponse struct {
	Members []Member `json:"members"`
}

// MemberFilter selects members. Empty fields match everything. Name and tag
// values are regular expressions anchored at both ends, like serf's.
type MemberFilter struct {
	Status string
	Name   string
	Tags   map[string]string
}

// JoinStatus reports the start-up join.
type JoinStatus struct {
	Addrs       []string  `json:"addrs"`
	Joined      bool      `json:"joined"`
	JoinedNodes int       `json:"joined_nodes"`
	Attempts    int       `json:"attempts"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

// Timings are the gossip timings in force.
type Timings struct {
	ProbeInterval     string `json:"probe_interval"`
	ProbeTimeout      string `json:"probe_timeout"`
	SuspicionMult     int    `json:"suspicion_mult"`
	SuspicionMaxMult  int    `json:"suspicion_max_timeout_mult"`
	GossipInterval    string `json:"gossip_interval"`
	GossipNodes       int    `json:"gossip_nodes"`
	RetransmitMult    int    `json:"retransmit_mult"`
	IndirectChecks    int    `json:"indirect_checks"`
	PushPullInterval  string `json:"push_pull_interval"`
	ReconnectInterval string `json:"reconnect_interval"`
}

// Info describes the running agent (GET /v1/agent/self).
type Info struct {
	Node        string            `json:"node"`
	Addr        string            `json:"addr"`
	Tags        map[string]string `json:"tags"`
	Status      string            `json:"status"`
	Version     string            `json:"version"`
	GoVersion   string            `json:"go_version"`
	Started     time.Time         `json:"started"`
	Uptime      string            `json:"uptime"`
	Profile     string            `json:"profile"`
	Timings     Timings           `json:"timings"`
	Encrypted   bool              `json:"encrypted"`
	KeyringFile string            `json:"keyring_file,omitempty"`
	KeyWarning  string            `json:"key_warning,omitempty"`
	Snapshot    string            `json:"snapshot,omitempty"`
	HTTPAddr    string            `json:"http_addr,omitempty"`
	RPCAddr     string            `json:"rpc_addr,omitempty"`
	// APITokenFile is where the agent keeps its API token (the path only):
	// the CLI reads it there when it runs as root or the agent's user.
	APITokenFile string     `json:"api_token_file,omitempty"`
	Join         JoinStatus `json:"join"`
	HealthScore  int        `json:"health_score"`
	EventsDrop   uint64     `json:"events_dropped"`
	// Publish is the state of this agent's tag publishing (its health
	// above all).
	Publish PublishStatus `json:"publish"`
	// Serf is serf's own counters on this agent.
	Serf SerfStats `json:"serf"`
	// Consensus is the consensus layer on this agent (the raft voters and
	// the writer terms); nil (absent) when it has no consensus key, and
	// the writer terms are then not used.
	Consensus *Consensus `json:"consensus,omitempty"`
}

// Consensus is the consensus layer as the answering agent sees it. The
// raft fields are those of its own voter: zero when it is no voter.
type Consensus struct {
	Voter           bool   `json:"voter"` // this agent is a raft voter (a db agent, or a witness)
	ID              string `json:"id"`    // its raft server ID: the node name
	Addr            string `json:"addr"`  // its raft address
	BootstrapExpect int    `json:"bootstrap_expect"`
	State           string `json:"state"` // leader, follower, candidate, shutdown; "" for no voter
	Leader          string `json:"leader"`
	LeaderAddr      string `json:"leader_addr"`
	Bootstrapped    bool   `json:"bootstrapped"` // in a raft configuration
	RaftTerm        uint64 `json:"raft_term"`
	LastIndex       uint64 `json:"last_index"`
	AppliedIndex    uint64 `json:"applied_index"`
	// LastContact is a follower's last contact with the leader.
	LastContact time.Time `json:"last_contact,omitzero"`
	// Voters is the raft configuration as this voter knows it; never null.
	Voters []ConsensusVoter `json:"voters"`
	// Refused counts the raft connections refused, by reason (a peer
	// without the consensus key, a handshake that timed out, overload);
	// never null.
	Refused map[string]uint64 `json:"refused"`
	// Group is the raft group this agent follows ("" when none is known).
	Group string `json:"group"`
	// Groups lists every raft group the alive voters' tags name, with
	// those voters; never null. More than one: no writes are routed where
	// a writer term is required, until one group is left.
	Groups []ConsensusGroup `json:"groups"`
	// Terms are the writer terms this agent knows, by cluster; never null.
	Terms []Term `json:"terms"`
	// TermKeys are the public keys this agent verifies writer terms with
	// (base64; public, not secret); never null. Empty: it cannot verify
	// terms, so it routes no writes to a cluster that requires one.
	TermKeys []string `json:"term_keys"`
	// Failover is true when consensus.failover is on at this agent (the
	// raft leader replaces a dead writer by itself).
	Failover bool `json:"failover"`
	// Failovers is the last failover decision of each cluster this agent
	// made as the raft leader ("failed over to db3 (term 4): ..." or "not
	// failed over: ..."); never null.
	Failovers map[string]string `json:"failovers"`
	// Returned is what became of this agent's server, by cluster, when it
	// came back after a failover replaced it as the writer: "returned
	// after the failover of term 2: replica of db3", or "... diverged: 3
	// transactions (0-1-13..0-1-15) beyond the promotion position ...".
	Returned map[string]string `json:"returned,omitempty"`
}

// ConsensusGroup is one raft group as the gossip shows it.
type ConsensusGroup struct {
	ID     string   `json:"id"`
	Voters []string `json:"voters"`
}

// ConsensusVoter is one voter of the raft configuration.
type ConsensusVoter struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Leader bool   `json:"leader"`
	// Failing (reported by the leader only): its heartbeats fail since
	// LastContact.
	Failing     bool      `json:"failing"`
	LastContact time.Time `json:"last_contact,omitzero"`
}

// Term is a cluster's writer term: the writer the voters granted it to.
type Term struct {
	Cluster string    `json:"cluster"`
	Term    uint64    `json:"term"`
	Writer  string    `json:"writer"`
	Addr    string    `json:"addr"`
	Granted time.Time `json:"granted,omitzero"`
	Why     string    `json:"why"`
}

// SerfStats are serf's own counters on the answering agent. In JSON each
// value is a string ("3", "true"), as serf's Stats reports them.
type SerfStats struct {
	Members     int `json:"members,string"`      // members serf knows, left ones included until reaped
	Failed      int `json:"failed,string"`       // of them, failed and not yet reaped
	Left        int `json:"left,string"`         // of them, left and not yet reaped
	HealthScore int `json:"health_score,string"` // memberlist's awareness: 0 is healthy, higher is worse
	// Lamport clocks of member changes, user events and queries.
	MemberTime uint64 `json:"member_time,string"`
	EventTime  uint64 `json:"event_time,string"`
	QueryTime  uint64 `json:"query_time,string"`
	// Messages queued for gossip: member intents, user events, queries.
	IntentQueue int  `json:"intent_queue,string"`
	EventQueue  int  `json:"event_queue,string"`
	QueryQueue  int  `json:"query_queue,string"`
	Encrypted   bool `json:"encrypted,string"` // gossip is encrypted
	// CoordinateResets counts resets of this agent's network coordinate.
	CoordinateResets uint64 `json:"coordinate_resets,string"`
}

// JoinRequest is POST /v1/agent/join.
type JoinRequest struct {
	Addrs  []string `json:"addrs"`
	Replay bool     `json:"replay,omitempty"`
}

// JoinResponse reports how many nodes were contacted.
type JoinResponse struct {
	Joined int `json:"joined"`
}

// ForceLeaveRequest is POST /v1/agent/force-leave.
type ForceLeaveRequest struct {
	Node  string `json:"node"`
	Prune bool   `json:"prune,omitempty"`
}

// ForceLeaveResponse is the answer to POST /v1/agent/force-leave.
type ForceLeaveResponse struct {
	Node string `json:"node"`
	// Before is the member's status when the request came: alive,
	// leaving, left or failed.
	Before string `json:"before"`
	// Result is what was done: "left" (a failed member marked left),
	// "pruned" (removed from the member list), or "unchanged" (an alive
	// member is never touched; a left or leaving one without prune).
	Result string `json:"result"`
}

// Force-leave results.
const (
	ForceLeaveLeft      = "left"
	ForceLeavePruned    = "pruned"
	ForceLeaveUnchanged = "unchanged"
)

// EventRequest is POST /v1/event. Payload is raw bytes (base64 in JSON).
type EventRequest struct {
	Name     string `json:"name"`
	Payload  []byte `json:"payload,omitempty"`
	Coalesce bool   `json:"coalesce,omitempty"`
}

// QueryRequest is POST /v1/query.
type QueryRequest struct {
	Name       string            `json:"name"`
	Payload    []byte            `json:"payload,omitempty"`
	FilterNode []string          `json:"filter_nodes,omitempty"`
	FilterTags map[string]string `json:"filter_tags,omitempty"`
	RequestAck bool              `json:"request_ack,omitempty"`
	Timeout    string            `json:"timeout,omitempty"` // Go duration; default serf's
}

// QueryResponse is the collected outcome of a query.
type QueryResponse struct {
	Acks      []string          `json:"acks"`
	Responses map[string][]byte `json:"responses"`
	Duration  string            `json:"duration"`
}

// TagsRequest is PUT /v1/agent/tags.
type TagsRequest struct {
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// TagsResponse is the agent's tag set after an update.
type TagsResponse struct {
	Tags map[string]string `json:"tags"`
}

// KeyRequest is POST /v1/keys/{install,use,remove}.
type KeyRequest struct {
	Key string `json:"key"`
}

// KeyResponse is the cluster-wide outcome of a key operation.
type KeyResponse struct {
	NumNodes int               `json:"num_nodes"`
	NumResp  int               `json:"num_resp"`
	NumErr   int               `json:"num_err"`
	Messages map[string]string `json:"messages,omitempty"`
	Keys     map[string]int    `json:"keys,omitempty"`
}

// HealthResponse is GET /v1/health.
type HealthResponse struct {
	Status string       `json:"status"` // "ok" or a reason
	Node   string       `json:"node"`
	Gossip string       `json:"gossip"`
	Role   string       `json:"role"`
	MySQL  *LocalHealth `json:"mysql,omitempty"`
	// Publish is the state of this agent's tag publishing.
	Publish *PublishStatus `json:"publish,omitempty"`
}

// PublishStatus says whether the agent's own tags, its health above all,
// reach the cluster. When the tags do not fit in memberlist's 512 bytes, the
// health tag has priority: user tags are withheld, and when even that is not
// enough the node publishes a minimal critical health (reason
// cannot-publish) so that no agent keeps routing to it on stale health.
type PublishStatus struct {
	OK            bool      `json:"ok"`
	Error         string    `json:"error,omitempty"`
	WithheldTags  []string  `json:"withheld_tags,omitempty"`
	MinimalHealth bool      `json:"minimal_health,omitempty"`
	Failures      uint64    `json:"failures"`
	Since         time.Time `json:"since,omitzero"`
}

// ErrorResponse is the body of every non-2xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// PoolNode is a member's place in the routing pool.
type PoolNode struct {
	Cluster string `json:"cluster,omitempty"` // in PoolResponse's flat lists
	Name    string `json:"name"`
	Addr    string `json:"addr"`
	Reason  string `json:"reason,omitempty"` // why it is out (or "floor" or "fallback" when kept in)
	Detail  string `json:"detail,omitempty"`
	// Until is, for a node out with reason damped, when the hold ends if
	// the node stays healthy.
	Until time.Time `json:"until,omitzero"`
	// Lag is the replica's replication lag as the answering agent judges
	// it now; absent for a node without one (a writer, a node out for a
	// hard reason). It is not part of the pool schema (package
	// poolschema): the pool file and hook payloads change only when the
	// pool does, and the lag changes all the time.
	Lag *Lag `json:"lag,omitempty"`
}

// Lag is a replica's replication lag as an agent judges it.
type Lag struct {
	// Source is how it was measured: "gtid" (the writer's GTID position
	// against the replica's, timed by the agent's own receipt of the
	// writer's positions) or "sbm" (the replica's Seconds_Behind_Master).
	Source string `json:"source"`
	// Seconds behind; null when unknown (sbm: Seconds_Behind_Master NULL).
	Seconds *float64 `json:"seconds"`
	// AtLeast: Seconds is a lower bound, the writer having passed the
	// replica's position before the agent's history of it begins (gtid).
	AtLeast bool `json:"at_least"`
	// Transactions the writer has that the replica lacks; null for sbm.
	Transactions *uint64 `json:"transactions"`
}

// ClusterPool is the pool of one cluster: in JSON, the pool schema's
// cluster (package poolschema, version 1), with until on damped nodes,
// the whole writer term (cluster, addr, granted and why besides the
// schema's term and writer) and unsafe.
type ClusterPool struct {
	Name     string     `json:"name"`
	Writers  []PoolNode `json:"writers"`
	Readers  []PoolNode `json:"readers"`
	Out      []PoolNode `json:"out"`
	Conflict []string   `json:"conflict"` // [] when there is no conflict
	// Term is the writer term the cluster's writer rule followed: only
	// its holder may be the writer. Absent when the cluster requires
	// none; term 0 when the agent knows none yet (then there is no
	// writer, and the writable nodes are out with reason no-term).
	Term *Term `json:"term,omitempty"`
	// Unsafe, when present, says why the cluster's writes are not
	// protected by a writer term: "no writer term" when none of its db
	// agents votes (they have no consensus key), so writes go to any
	// single writable server (docs/consensus.md). Absent for a cluster
	// that follows terms, and for Galera, which needs none.
	Unsafe string `json:"unsafe,omitempty"`
}

// PoolResponse is GET /v1/pool: one entry in Clusters per cluster shown,
// and Writers, Readers and Out flattened over all of them.
type PoolResponse struct {
	Clusters []ClusterPool `json:"clusters"`
	// Writers, Readers and Out list every cluster's nodes (each naming its
	// cluster), so a single-cluster setup can read them directly.
	Writers   []PoolNode `json:"writers"`
	Readers   []PoolNode `json:"readers"`
	Out       []PoolNode `json:"out"`
	Isolated  bool       `json:"isolated"`
	Isolation string     `json:"isolation,omitempty"`
	// Held is the number of nodes kept in their role because the agent
	// cannot verify their failure (docs/pool.md, Isolation).
	Held      int       `json:"held"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Generation numbers the pools the agent's router computed (1, 2, 3,
	// ...); this is the current one's. 0: none yet. A sink whose
	// AppliedGeneration is lower has not applied this pool yet.
	Generation uint64 `json:"generation"`
	// Sinks are the local routers this agent drives (none on most db hosts).
	Sinks []SinkStatus `json:"sinks"`
}

// SinkStatus is what one pool sink has done.
type SinkStatus struct {
	Name        string    `json:"name"`   // "haproxy" or "file"
	Target      string    `json:"target"` // runtime API address or file path
	State       string    `json:"state"`  // "ok", "failing" or "pending" (nothing applied yet)
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Failures    uint64    `json:"failures"`
	Frozen      bool      `json:"frozen,omitempty"` // removals withheld: this agent looks isolated
	// Notes are the sink's current warnings: withheld commands, servers that
	// map to no node, nodes with no server.
	Notes []string `json:"notes,omitempty"`
	// AppliedGeneration is the generation of the last pool the sink fully
	// applied: without error and not frozen. 0: none yet.
	AppliedGeneration uint64 `json:"applied_generation"`
}

// LocalHealth is the local MySQL probe's state (db agents).
type LocalHealth struct {
	State        string    `json:"state"` // passing, warning, critical
	Reason       string    `json:"reason,omitempty"`
	Message      string    `json:"message,omitempty"`
	Since        time.Time `json:"since,omitzero"`
	Target       string    `json:"target"`
	LastCheck    time.Time `json:"last_check,omitzero"`
	LastDuration string    `json:"last_duration,omitempty"`
	Checks       uint64    `json:"checks"`
	Connects     uint64    `json:"connects"`
	Reachable    bool      `json:"reachable"`
	Version      string    `json:"version,omitempty"`
	ServerID     uint32    `json:"server_id"`
	ReadOnly     bool      `json:"read_only"`
	Replica      bool      `json:"replica"`
	IORunning    bool      `json:"io_running"`
	SQLRunning   bool      `json:"sql_running"`
	LagSeconds   *int64    `json:"lag_seconds,omitempty"`
	// The other facts the agent publishes, as in MemberHealth.
	SuperReadOnly bool   `json:"super_read_only"`
	NotReceiving  bool   `json:"not_receiving,omitempty"`
	Galera        bool   `json:"galera,omitempty"`
	GaleraSynced  bool   `json:"galera_synced,omitempty"`
	Port          uint16 `json:"port,omitempty"`
	// SourceServerID, GTIDPosition: as in MemberHealth.
	SourceServerID uint32 `json:"source_server_id,omitempty"`
	GTIDPosition   string `json:"gtid_position,omitempty"`
	// GTIDPositionNote says why GTIDPosition is absent, e.g. "3 GTID
	// domains; shoal compares at most 2".
	GTIDPositionNote string `json:"gtid_position_note,omitempty"`
	LastIOError      string `json:"last_io_error,omitempty"`
	LastSQLError     string `json:"last_sql_error,omitempty"`
	Published        string `json:"published_tag"`
	// Fence is the last time this db agent fenced its own server; absent
	// when it never did.
	Fence *FenceStatus `json:"fence,omitempty"`
}

// FenceStatus is a db agent's last fencing of its own server: set
// read-only, client connections killed (docs/consensus.md, "Fencing").
type FenceStatus struct {
	Time    time.Time `json:"time"`
	Why     string    `json:"why"`
	Result  string    `json:"result"` // ok or error
	Error   string    `json:"error,omitempty"`
	Killed  int       `json:"connections_killed"`
	Attempt int       `json:"attempt"`           // attempts in this conflict, this one included
	Retry   time.Time `json:"retry_at,omitzero"` // when a failed attempt is retried
}

// MaintRequest enables or disables maintenance on the agent's node.
type MaintRequest struct {
	Enable bool   `json:"enable"`
	Reason string `json:"reason,omitempty"`
}

// MaintStatus is a node's maintenance state.
type MaintStatus struct {
	Node    string `json:"node"`
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason,omitempty"`
	// Persisted is true when the state survives an agent restart (the agent
	// has a tags file).
	Persisted bool `json:"persisted"`
	// Warning is set when the agent has a tags file that does not hold the
	// state in effect (saving it failed, for example on a full disk): it
	// says what a restart of the agent would do.
	Warning string `json:"warning,omitempty"`
	// Damped is set while this agent's pool holds the node out with reason
	// damped (flap damping, after repeated health removals), whatever the
	// maintenance state: DampedUntil is when the hold ends if the node
	// stays healthy, DampDetail the pool's detail (the penalty).
	Damped      bool      `json:"damped,omitempty"`
	DampedUntil time.Time `json:"damped_until,omitzero"`
	DampDetail  string    `json:"damp_detail,omitempty"`
}

// HistoryEntry is one pool or health transition.
type HistoryEntry struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // pool, health, isolation, conflict, maint
	Cluster string    `json:"cluster,omitempty"`
	Node    string    `json:"node,omitempty"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// HistoryFilter selects history entries; zero fields select all.
type HistoryFilter struct {
	Node    string
	Cluster string
	Kind    string
	Since   time.Time
	Limit   int // the newest Limit entries
}

// HistoryResponse is the agent's transition history, oldest first.
type HistoryResponse struct {
	Entries  []HistoryEntry `json:"entries"`
	Capacity int            `json:"capacity"` // entries the agent keeps in memory
	Total    uint64         `json:"total"`    // entries recorded since the agent started
	Evicted  uint64         `json:"evicted"`  // entries dropped from memory (older than the ring)
	File     string         `json:"file,omitempty"`
}

// HookStats is one event handler's queue and last run.
type HookStats struct {
	Spec            string            `json:"spec"`
	QueueDepth      int               `json:"queue_depth"`
	QueueMax        int               `json:"queue_max"`
	QueueHigh       int               `json:"queue_high"`
	Queued          uint64            `json:"queued"`
	Started         uint64            `json:"started"`
	Ran             uint64            `json:"ran"`
	Failed          uint64            `json:"failed"`
	TimedOut        uint64            `json:"timed_out"`
	Coalesced       uint64            `json:"coalesced"`
	Dropped         uint64            `json:"dropped"`
	DroppedByReason map[string]uint64 `json:"dropped_by_reason,omitempty"`
	// DroppedByClass: event class (member, shoal, user, query) → reason → events.
	DroppedByClass map[string]map[string]uint64 `json:"dropped_by_class,omitempty"`
	Running        bool                         `json:"running"`
	LastStart      time.Time                    `json:"last_start,omitzero"`
	LastExitCode   int                          `json:"last_exit_code"`
	LastDuration   string                       `json:"last_duration,omitempty"`
	LastError      string                       `json:"last_error,omitempty"`
}

// HooksResponse lists the agent's event handlers.
type HooksResponse struct {
	Handlers []HookStats `json:"handlers"`
	// Redacted: asked without the API token, so each spec shows its
	// filter and program only (arguments may hold secrets).
	Redacted bool `json:"redacted,omitempty"`
}

// HookTestRequest runs the handlers matching a synthetic event once.
type HookTestRequest struct {
	Event   string `json:"event"` // member-join, ..., user, query, pool-change, health-change
	Name    string `json:"name,omitempty"`
	Payload []byte `json:"payload,omitempty"`
}

// HookTestResponse is what the test run did.
type HookTestResponse struct {
	Handlers []HookStats `json:"handlers"` // the handlers that ran, after their run
	Response []byte      `json:"response,omitempty"`
	TimedOut bool        `json:"timed_out,omitempty"` // stopped waiting before every run finished
}

// FailoverRequest asks for the failover of a cluster whose writer is dead
// (POST /v1/failover, on a voter's agent), or with DryRun what one would
// do.
type FailoverRequest struct {
	Cluster string `json:"cluster,omitempty"` // default: the only cluster with a writer term
	DryRun  bool   `json:"dry_run,omitempty"`
}

// Failover is what a failover found and did (docs/consensus.md,
// "Failover"). Dead and Death are the witnesses' verdict on the writer;
// Pick and Why the candidate chosen (from the gossiped positions on a dry
// run: a run surveys each candidate first), Candidates every one
// considered, with why it was passed over; Done, NewTerm and Outcome what
// a run did.
type Failover struct {
	Cluster    string              `json:"cluster"`
	Writer     string              `json:"writer"`
	Term       uint64              `json:"term"`
	Dead       bool                `json:"dead"`
	Death      string              `json:"death"`
	DryRun     bool                `json:"dry_run"`
	Candidates []FailoverCandidate `json:"candidates"`
	Pick       string              `json:"pick"`
	Why        string              `json:"why"`
	Done       bool                `json:"done"`
	NewTerm    uint64              `json:"new_term"`
	Outcome    string              `json:"outcome"`
}

// FailoverCandidate is one replica a failover considered; Out says why it
// was passed over ("" for the pick).
type FailoverCandidate struct {
	Node     string `json:"node"`
	Position string `json:"position"`
	Out      string `json:"out"`
}

// SwitchoverRequest asks for a planned move of a cluster's writer (POST
// /v1/switchover, on a voter's agent).
type SwitchoverRequest struct {
	To      string `json:"to"`
	Cluster string `json:"cluster,omitempty"` // default: the target's cluster
	// CatchUpSeconds bounds the wait for the target to apply the old
	// writer's last transaction (0: the default, 30); AppliedSeconds the
	// wait for every router to apply the new term (0: the default, 10).
	// Any other value is from 1 to 120; the agent answers 400 otherwise.
	CatchUpSeconds float64 `json:"catch_up_seconds,omitempty"`
	AppliedSeconds float64 `json:"applied_seconds,omitempty"`
	// Force switches over to a target behind the writer by more than two
	// seconds (refused otherwise: every write waits while it catches up).
	Force bool `json:"force,omitempty"`
}

// Switchover is what a switchover did, step by step. Error is set when it
// failed, saying what it left; routers that did not apply the new term in
// time are in Routers.Pending.
type Switchover struct {
	ID      string       `json:"id"`
	Cluster string       `json:"cluster"`
	Old     string       `json:"old"`
	Target  string       `json:"target"`
	From    uint64       `json:"from_term"`
	Term    uint64       `json:"term"` // 0 when no term was granted
	Steps   []SwitchStep `json:"steps"`
	// ReadOnlySeconds is how long no server of the cluster took writes.
	ReadOnlySeconds float64        `json:"read_only_seconds"`
	Routers         RoutersApplied `json:"routers"`
	Seconds         float64        `json:"seconds"`
	Error           string         `json:"error,omitempty"`
}

// SwitchStep is one step of a switchover.
type SwitchStep struct {
	Name    string  `json:"name"`
	Node    string  `json:"node"`
	OK      bool    `json:"ok"`
	Seconds float64 `json:"seconds"`
	Detail  string  `json:"detail,omitempty"`
}

// RoutersApplied is what the routers (agents that drive a sink) reported
// of the new term.
type RoutersApplied struct {
	Applied     []string          `json:"applied"`
	Pending     map[string]string `json:"pending,omitempty"`     // router → why it has not applied it
	Unreachable map[string]string `json:"unreachable,omitempty"` // router → its member status
	Seconds     float64           `json:"seconds"`               // until the last applied, or the timeout
}
