// Package view holds the agent's read models: what package agent returns
// about itself (its description, pool, local health, maintenance, history,
// a hook test run) for the HTTP API, the metrics and the tests to read.
// Where a part's own type says it all (history.Entry, hooks.HandlerStats),
// the views hold that type.
//
// These are internal types. The public wire types are in pkg/client; the
// HTTP API (package api) converts one into the other at its boundary, so
// that a change here changes no public type. Under internal/, only the API
// and the clients of agents (the CLI, and the demo, which drives the agents
// it starts) depend on pkg/client; this package does not (pkg/client's
// TestOnlyTheAPIAndTheCLIImportTheClient keeps it so).
package view

import (
	"errors"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/tags"
)

// ErrNoSuchMember is wrapped by the agent's errors about a node that is not
// a member; the HTTP API answers them 404 (api.ErrNoSuchMember is this
// error).
var ErrNoSuchMember = errors.New("no such member")

// JoinStatus reports the start-up join.
type JoinStatus struct {
	Addrs       []string
	Joined      bool
	JoinedNodes int
	Attempts    int
	LastAttempt time.Time // zero before the first attempt
	LastError   string
}

// Timings are the gossip timings in force.
type Timings struct {
	ProbeInterval     time.Duration
	ProbeTimeout      time.Duration
	SuspicionMult     int
	SuspicionMaxMult  int
	GossipInterval    time.Duration
	GossipNodes       int
	RetransmitMult    int
	IndirectChecks    int
	PushPullInterval  time.Duration
	ReconnectInterval time.Duration
}

// SerfStats are the counters serf keeps (serf.Serf.Stats), parsed.
type SerfStats struct {
	Members, Failed, Left   int
	HealthScore             int
	MemberTime, EventTime   uint64 // Lamport clocks
	QueryTime               uint64
	IntentQueue, EventQueue int
	QueryQueue              int
	Encrypted               bool
	CoordinateResets        uint64
}

// ParseSerfStats reads serf's counters (serf.Serf.Stats, all strings); a
// counter serf does not report (or reports unparsable) is 0.
func ParseSerfStats(m map[string]string) SerfStats {
	n := func(k string) int { v, _ := strconv.Atoi(m[k]); return v }
	u := func(k string) uint64 { v, _ := strconv.ParseUint(m[k], 10, 64); return v }
	return SerfStats{
		Members: n("members"), Failed: n("failed"), Left: n("left"), HealthScore: n("health_score"),
		MemberTime: u("member_time"), EventTime: u("event_time"), QueryTime: u("query_time"),
		IntentQueue: n("intent_queue"), EventQueue: n("event_queue"), QueryQueue: n("query_queue"),
		Encrypted: m["encrypted"] == "true", CoordinateResets: u("coordinate_resets"),
	}
}

// PublishStatus says whether the agent's own tags, its health above all,
// reach the cluster.
type PublishStatus struct {
	OK            bool
	Error         string
	WithheldTags  []string
	MinimalHealth bool
	Failures      uint64
	Since         time.Time
}

// Info describes the running agent.
type Info struct {
	Node         string
	Addr         string
	Tags         map[string]string
	Status       string
	Version      string
	GoVersion    string
	Started      time.Time
	Uptime       time.Duration
	Profile      string
	Timings      Timings
	Encrypted    bool
	KeyringFile  string
	KeyWarning   string
	Snapshot     string
	HTTPAddr     string
	RPCAddr      string
	APITokenFile string
	Join         JoinStatus
	HealthScore  int
	EventsDrop   uint64
	Publish      PublishStatus
	Serf         SerfStats
	// Consensus is the consensus layer; nil when this agent has no
	// consensus key (the writer terms are then not used).
	Consensus *Consensus
}

// Consensus is the consensus layer as `shoal info` shows it: this
// agent's raft server when it is a voter.
type Consensus struct {
	Voter           bool   // this agent is a voter (a db agent, or a witness)
	ID              string // its raft server ID: the node name
	Addr            string // its raft address
	BootstrapExpect int
	State           string // leader, follower, candidate, shutdown; "" for no voter
	Leader          string
	LeaderAddr      string
	Bootstrapped    bool // in a raft configuration
	RaftTerm        uint64
	LastIndex       uint64
	AppliedIndex    uint64
	// LastContact is a follower's last contact with the leader.
	LastContact time.Time
	Voters      []ConsensusVoter
	// Refused counts the raft connections refused, by reason (a peer
	// without the consensus key, a handshake that timed out, overload).
	Refused map[string]uint64
	// Terms are the writer terms this agent knows, by cluster.
	Terms []Term
	// TermKeys are the public keys this agent verifies terms with
	// (base64): its consensus keyring's and consensus.term_key. None: it
	// cannot verify terms, and routes no writes where one is required.
	TermKeys []string
	// Group is the raft group this agent follows ("" when none is known:
	// no voter in a configuration seen, or more than one group).
	Group string
	// Groups lists every raft group the alive voters' tags name, with
	// those voters: more than one is a split (docs/consensus.md, "Fleet
	// identity") and no writes are routed where a term is required.
	Groups []ConsensusGroup
	// Failover: consensus.failover is on here (the raft leader replaces a
	// dead writer). Failovers is the last failover decision of each
	// cluster this agent made as the leader (escaped).
	Failover  bool
	Failovers map[string]string
	// Returned: what became of this agent's server, by cluster, when it
	// came back after a failover replaced it as the writer (escaped):
	// re-pointed, or diverged with its lost transactions named.
	Returned map[string]string
}

// ConsensusGroup is one raft group as the gossip shows it.
type ConsensusGroup struct {
	ID     string
	Voters []string // escaped names
}

// ConsensusVoter is one voter of the raft configuration.
type ConsensusVoter struct {
	ID     string
	Addr   string
	Leader bool
	// Failing, on the leader: its heartbeats fail since LastContact.
	Failing     bool
	LastContact time.Time
}

// Term is a cluster's writer term.
type Term struct {
	Cluster string
	Number  uint64
	Writer  string
	Addr    string
	Granted time.Time
	Why     string
}

// ForceLeave says what a force-leave did.
type ForceLeave struct {
	Node   string // the member's display name
	Before string // its status when asked
	Result string // one of the ForceLeave* results
}

// Force-leave results.
const (
	ForceLeaveLeft      = "left"
	ForceLeavePruned    = "pruned"
	ForceLeaveUnchanged = "unchanged"
)

// PoolNode is a member's place in the routing pool.
type PoolNode struct {
	Cluster string // set in Pool's flat lists
	Name    string
	Addr    string
	Reason  string // why it is out (or "floor" or "fallback" when kept in)
	Detail  string
	Until   time.Time // for reason damped: when the hold ends if it stays healthy
	// Lag is the replica's lag as this agent judges it now; nil for a node
	// that has none (a writer, a node out for a hard reason). It is not part
	// of the pool (package poolschema): it changes on every tick, and the
	// pool, which sinks and hooks get, changes only when a role or a reason
	// does.
	Lag *Lag
}

// Lag is a replica's replication lag as this agent judges it (pool.Lag).
type Lag struct {
	Source string // "gtid" or "sbm" (Seconds_Behind_Master)
	// Seconds the replica is behind; nil when unknown (sbm: NULL). For gtid,
	// how long ago this agent saw the writer pass the replica's position.
	Seconds *float64
	// AtLeast (gtid): the writer passed the replica's position before this
	// agent's history of the writer begins; Seconds is a lower bound.
	AtLeast bool
	// Transactions the writer has that the replica lacks; nil unless
	// Source is gtid.
	Transactions *uint64
}

// Figures are the lag's numbers as operators read them, without the
// source: "120 tx, 11.3s", "3 tx, ≥600.0s", "15s", "unknown".
func (l Lag) Figures() string {
	sec := "unknown"
	if l.Seconds != nil {
		sec = secondsText(*l.Seconds, l.Source == "gtid")
		if l.AtLeast {
			sec = "≥" + sec
		}
	}
	if l.Transactions != nil {
		return strconv.FormatUint(*l.Transactions, 10) + " tx, " + sec
	}
	return sec
}

// secondsText is a lag in seconds as shoal shows it: "0s" for none, one
// decimal when measured (tenths, for gtid), whole seconds otherwise (sbm,
// which MariaDB reports in whole seconds).
func secondsText(s float64, tenths bool) string {
	switch {
	case s <= 0:
		return "0s"
	case tenths:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	return strconv.FormatFloat(s, 'f', 0, 64) + "s"
}

// ClusterPool is the pool of one cluster.
type ClusterPool struct {
	Name     string
	Writers  []PoolNode
	Readers  []PoolNode
	Out      []PoolNode
	Conflict []string // never nil
	// Term is the writer term the cluster's writer rule followed: nil
	// when the cluster requires none; Number 0 when none is known.
	Term *Term
	// Unsafe says why the cluster's writes are not protected by a writer
	// term (pool.UnsafeNoTerm), "" when they are or need none (Galera).
	Unsafe string
}

// Pool is the routing pool as this agent computed it, with its sinks.
type Pool struct {
	Clusters  []ClusterPool
	Writers   []PoolNode // every cluster's, each naming its cluster
	Readers   []PoolNode
	Out       []PoolNode
	Isolated  bool
	Isolation string // why, when Isolated (or isolated past pool.isolation_max)
	// Held is the number of nodes kept in their role because this agent
	// cannot verify their failure (docs/pool.md, Isolation).
	Held      int
	UpdatedAt time.Time
	// Generation is the router's generation of this pool
	// (routing.Update.Generation; 0: none computed yet). A sink whose
	// AppliedGeneration is lower has not applied it yet.
	Generation uint64
	Sinks      []SinkStatus
}

// Sink states.
const (
	SinkOK      = "ok"
	SinkFailing = "failing"
	SinkPending = "pending" // nothing applied yet
)

// SinkStatus is what one pool sink has done.
type SinkStatus struct {
	Name        string // "haproxy" or "file"
	Target      string // runtime API address or file path
	State       string // SinkOK, SinkFailing or SinkPending
	LastSuccess time.Time
	LastError   string
	LastErrorAt time.Time
	Failures    uint64
	Frozen      bool // removals withheld: this agent looks isolated
	Notes       []string
	// AppliedGeneration is the generation of the last pool the sink fully
	// applied (routing.Update.Generation; 0: none yet). See package sink.
	AppliedGeneration uint64
}

// LocalHealth is the local MySQL probe's state (db agents).
type LocalHealth struct {
	State        string
	Reason       string
	Message      string
	Since        time.Time
	Target       string
	LastCheck    time.Time
	LastDuration time.Duration
	Checks       uint64
	Connects     uint64
	Reachable    bool // the latest check reached the server
	Version      string
	LastIOError  string
	LastSQLError string
	// PositionNote says why Health has no GTID position (probe.Facts).
	PositionNote string
	// Health is the health the probe's status publishes (probe.Status.Health):
	// the facts of the schema (tags.Facts), as every agent sees them.
	Health    tags.Health
	Published string // the health tag as gossiped
	// Fence is the last fencing of this server by its own agent; nil when
	// fencing is off or it never fenced.
	Fence *Fence
}

// Fence is a db agent's last fencing of its own server
// (docs/consensus.md, "Fencing").
type Fence struct {
	Time    time.Time // when the last attempt ended
	Why     string    // what it followed, e.g. "writable, but term 3 belongs to db1"
	Result  string    // "ok" or "error"
	Error   string    // the SQL error of a failed attempt
	Killed  int       // client connections the attempt killed
	Attempt int       // attempts in this conflict episode, this one included
	Retry   time.Time // when a failed attempt is retried; zero once it succeeded
}

// Maint is a node's maintenance state, and whether this agent's pool holds
// it out by flap damping.
type Maint struct {
	Node        string
	Enabled     bool
	Reason      string
	Persisted   bool   // the tags file holds this state: it survives a restart
	Warning     string // set when a tags file is configured but does not hold this state
	Damped      bool
	DampedUntil time.Time
	DampDetail  string
}

// History is the agent's transition history, oldest first.
type History struct {
	Entries  []history.Entry // never nil
	Capacity int
	Total    uint64
	Evicted  uint64
	File     string
}

// HookTest is a synthetic event to run the matching handlers with once.
type HookTest struct {
	Event   string
	Name    string
	Payload []byte
}

// HookTestResult is what a test run did.
type HookTestResult struct {
	Handlers []hooks.HandlerStats // the handlers that ran, after their run
	Response []byte
	TimedOut bool
}
