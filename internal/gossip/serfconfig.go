package gossip

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/setting"
)

// DefaultDeadNodeReclaimTime lets a host that restarted with a new address
// take its name back 30 s after it was declared dead (memberlist's default, 0,
// never allows it until the member is reaped).
const DefaultDeadNodeReclaimTime = 30 * time.Second

// Tuning are the gossip settings a user gives: the agent's gossip section,
// with its yaml keys. A zero timing or count means the profile's value
// (see Profile.Effective).
type Tuning struct {
	ProbeInterval           time.Duration `yaml:"probe_interval"`
	ProbeTimeout            time.Duration `yaml:"probe_timeout"`
	SuspicionMult           int           `yaml:"suspicion_mult"`
	SuspicionMaxTimeoutMult int           `yaml:"suspicion_max_timeout_mult"`
	GossipInterval          time.Duration `yaml:"gossip_interval"`
	GossipNodes             int           `yaml:"gossip_nodes"`
	RetransmitMult          int           `yaml:"retransmit_mult"`
	IndirectChecks          int           `yaml:"indirect_checks"`
	PushPullInterval        time.Duration `yaml:"push_pull_interval"`
	ReconnectInterval       time.Duration `yaml:"reconnect_interval"`
	ReconnectTimeout        time.Duration `yaml:"reconnect_timeout"`
	TombstoneTimeout        time.Duration `yaml:"tombstone_timeout"`
	// DeadNodeReclaimTime is how long after a member is declared dead its
	// name may be taken by the same name at another address (a restarted
	// host with a new IP). memberlist's default, 0, never allows it until
	// the member is reaped.
	DeadNodeReclaimTime time.Duration `yaml:"dead_node_reclaim_time"`
	// ConfirmFailures withholds a member-failed from everything shoal does
	// (pool, hooks, members, metrics) until this agent's own direct pings
	// to the member go unanswered (see confirm.go).
	ConfirmFailures bool `yaml:"confirm_failures"`
	// Positions is how this agent's GTID positions travel: PositionsStream
	// (the position stream, positions.go; the health tag carries them at a
	// slow cadence) or PositionsTags (in the health tag at every change,
	// as releases before the stream did: for a cluster being upgraded from
	// one, until every agent runs this one). Either way the agent takes
	// part in the stream: it receives and passes on others' positions.
	Positions string `yaml:"positions"`
}

// Values of Tuning.Positions.
const (
	PositionsStream = "stream"
	PositionsTags   = "tags"
)

// DefaultTuning returns the settings the agent starts from: the profile's
// timings, a dead member's name reclaimable after
// DefaultDeadNodeReclaimTime, failures confirmed.
func DefaultTuning() Tuning {
	return Tuning{DeadNodeReclaimTime: DefaultDeadNodeReclaimTime, ConfirmFailures: true, Positions: PositionsStream}
}

// The smallest timings a user may set (0 keeps the profile's).
const (
	MinProbe             = 10 * time.Millisecond // probe_interval, probe_timeout, gossip_interval
	MinPushPullInterval  = time.Second
	MinReconnectInterval = 100 * time.Millisecond
	MinReapTimeout       = time.Minute // reconnect_timeout, tombstone_timeout
)

// Check checks the settings as given: every problem is a *setting.Error
// naming the setting's key.
func (t Tuning) Check() error {
	var errs setting.Errors
	dur := func(key string, d, min time.Duration) {
		if d != 0 && d < min {
			errs.Addf(key, d, "must be at least %s (or 0 for the profile's value)", min)
		}
	}
	count := func(key string, v int) {
		if v != 0 && v < 1 {
			errs.Addf(key, v, "must be at least 1 (or 0 for the profile's value)")
		}
	}
	dur("probe_interval", t.ProbeInterval, MinProbe)
	dur("probe_timeout", t.ProbeTimeout, MinProbe)
	dur("gossip_interval", t.GossipInterval, MinProbe)
	dur("push_pull_interval", t.PushPullInterval, MinPushPullInterval)
	dur("reconnect_interval", t.ReconnectInterval, MinReconnectInterval)
	dur("reconnect_timeout", t.ReconnectTimeout, MinReapTimeout)
	dur("tombstone_timeout", t.TombstoneTimeout, MinReapTimeout)
	if t.DeadNodeReclaimTime < 0 {
		errs.Addf("dead_node_reclaim_time", t.DeadNodeReclaimTime, "must not be negative")
	}
	count("suspicion_mult", t.SuspicionMult)
	count("suspicion_max_timeout_mult", t.SuspicionMaxTimeoutMult)
	count("gossip_nodes", t.GossipNodes)
	count("retransmit_mult", t.RetransmitMult)
	count("indirect_checks", t.IndirectChecks)
	switch t.Positions {
	case "", PositionsStream, PositionsTags:
	default:
		errs.Addf("positions", t.Positions, "must be %s or %s", PositionsStream, PositionsTags)
	}
	if t.ProbeInterval != 0 && t.ProbeTimeout != 0 && t.ProbeTimeout > t.ProbeInterval {
		errs.Addf("probe_timeout", t.ProbeTimeout, "must not exceed gossip.probe_interval (%s)", t.ProbeInterval)
	}
	return errs.Err()
}

// Settings are what SerfConfig needs, filled by the agent's configuration.
type Settings struct {
	Node string
	// BindAddr and BindPort are the gossip listener.
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are the address peers are told; an
	// empty AdvertiseAddr means the bind address, or, when that is
	// unspecified (0.0.0.0), a private interface address memberlist picks.
	AdvertiseAddr string
	AdvertisePort int
	// Profile is the timing profile (a key of Profiles); Tuning are the
	// user's settings over it.
	Profile string
	Tuning  Tuning

	Snapshot    string
	Rejoin      bool
	KeyringFile string
}

// UserEventSizeLimit is the most bytes a user event's name and payload
// may have (serf's default is 512).
const UserEventSizeLimit = 1024

// SerfConfig translates the settings into serf's and memberlist's.
// Event coalescing stays off: events reach handlers as they happen.
func SerfConfig(s Settings, logOutput io.Writer) (*serf.Config, error) {
	sc := serf.DefaultConfig()
	prof, ok := Profiles[s.Profile]
	if !ok {
		return nil, fmt.Errorf("unknown gossip profile %q", s.Profile)
	}
	switch prof.Base {
	case "wan":
		sc.MemberlistConfig = memberlist.DefaultWANConfig()
	case "local":
		sc.MemberlistConfig = memberlist.DefaultLocalConfig()
	default:
		sc.MemberlistConfig = memberlist.DefaultLANConfig()
	}
	mc := sc.MemberlistConfig
	sc.NodeName = s.Node
	mc.Name = s.Node
	sc.LogOutput = logOutput
	mc.LogOutput = logOutput

	mc.BindAddr, mc.BindPort = s.BindAddr, s.BindPort
	if s.AdvertiseAddr != "" {
		mc.AdvertiseAddr, mc.AdvertisePort = s.AdvertiseAddr, s.AdvertisePort
	} else if ip := net.ParseIP(s.BindAddr); ip != nil && ip.IsUnspecified() {
		// memberlist picks a private interface address itself.
	} else {
		mc.AdvertiseAddr, mc.AdvertisePort = s.BindAddr, s.BindPort
	}

	g := prof.Effective(s.Tuning)
	applyTuning(sc, g)
	mc.DeadNodeReclaimTime = g.DeadNodeReclaimTime
	if mc.ProbeTimeout > mc.ProbeInterval {
		return nil, fmt.Errorf("gossip.probe_timeout %s exceeds gossip.probe_interval %s", mc.ProbeTimeout, mc.ProbeInterval)
	}

	sc.SnapshotPath = s.Snapshot
	sc.RejoinAfterLeave = s.Rejoin
	sc.KeyringFile = s.KeyringFile
	sc.EnableNameConflictResolution = false // see conflict.go
	sc.CoalescePeriod = 0
	sc.QuiescentPeriod = 0
	sc.UserCoalescePeriod = 0
	// A signed writer term (consensus.MaxSignedTerm) travels as a user
	// event; serf's default limit, 512 bytes, is too small for long names.
	sc.UserEventSizeLimit = UserEventSizeLimit
	sc.UserQuiescentPeriod = 0
	return sc, nil
}

// applyTuning sets the timers and fan-outs the profile and the gossip
// section set (0: memberlist's or serf's default stays).
func applyTuning(sc *serf.Config, g Tuning) {
	mc := sc.MemberlistConfig
	if g.ProbeInterval != 0 {
		mc.ProbeInterval = g.ProbeInterval
	}
	if g.ProbeTimeout != 0 {
		mc.ProbeTimeout = g.ProbeTimeout
	}
	if g.SuspicionMult != 0 {
		mc.SuspicionMult = g.SuspicionMult
	}
	if g.SuspicionMaxTimeoutMult != 0 {
		mc.SuspicionMaxTimeoutMult = g.SuspicionMaxTimeoutMult
	}
	if g.GossipInterval != 0 {
		mc.GossipInterval = g.GossipInterval
	}
	if g.GossipNodes != 0 {
		mc.GossipNodes = g.GossipNodes
	}
	if g.RetransmitMult != 0 {
		mc.RetransmitMult = g.RetransmitMult
	}
	if g.IndirectChecks != 0 {
		mc.IndirectChecks = g.IndirectChecks
	}
	if g.PushPullInterval != 0 {
		mc.PushPullInterval = g.PushPullInterval
	}
	if g.ReconnectInterval != 0 {
		sc.ReconnectInterval = g.ReconnectInterval
	}
	if g.ReconnectTimeout != 0 {
		sc.ReconnectTimeout = g.ReconnectTimeout
	}
	if g.TombstoneTimeout != 0 {
		sc.TombstoneTimeout = g.TombstoneTimeout
	}
}
