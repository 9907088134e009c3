package gossip

import (
	"fmt"
	"io"
	"net"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/config"
)

// SerfConfig translates the shoal configuration into serf's and memberlist's.
// Event coalescing stays off: events reach handlers as they happen.
func SerfConfig(c *config.Config, logOutput io.Writer) (*serf.Config, error) {
	sc := serf.DefaultConfig()
	prof := config.Profiles[c.Profile]
	switch prof.Base {
	case "wan":
		sc.MemberlistConfig = memberlist.DefaultWANConfig()
	case "local":
		sc.MemberlistConfig = memberlist.DefaultLocalConfig()
	default:
		sc.MemberlistConfig = memberlist.DefaultLANConfig()
	}
	mc := sc.MemberlistConfig
	sc.NodeName = c.Node
	mc.Name = c.Node
	sc.LogOutput = logOutput
	mc.LogOutput = logOutput

	host, port, err := config.SplitHostPortDefault(c.Bind, config.DefaultGossipPort)
	if err != nil {
		return nil, fmt.Errorf("bind %q: %w", c.Bind, err)
	}
	mc.BindAddr, mc.BindPort = host, port
	if c.Advertise != "" {
		ah, ap, err := config.SplitHostPortDefault(c.Advertise, port)
		if err != nil {
			return nil, fmt.Errorf("advertise %q: %w", c.Advertise, err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// memberlist picks a private interface address itself.
	} else {
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}

	g := c.Effective()
	applyTuning(sc, g)
	mc.DeadNodeReclaimTime = g.DeadNodeReclaimTime
	if mc.ProbeTimeout > mc.ProbeInterval {
		return nil, fmt.Errorf("gossip.probe_timeout %s exceeds gossip.probe_interval %s", mc.ProbeTimeout, mc.ProbeInterval)
	}

	sc.SnapshotPath = c.Snapshot
	sc.RejoinAfterLeave = c.Rejoin
	sc.KeyringFile = c.KeyringFile
	sc.EnableNameConflictResolution = false // see conflict.go
	sc.CoalescePeriod = 0
	sc.QuiescentPeriod = 0
	sc.UserCoalescePeriod = 0
	sc.UserQuiescentPeriod = 0
	return sc, nil
}

// applyTuning sets the timers and fan-outs the profile and the gossip
// section set (0: memberlist's or serf's default stays).
func applyTuning(sc *serf.Config, g config.Gossip) {
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
