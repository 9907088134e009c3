package config

import (
	"sort"
	"time"
)

// Profile is a named set of gossip timings. Base selects memberlist's
// default config ("lan", "wan" or "local"); the other fields override it
// where non-zero. Explicit Gossip overrides in the config win over both.
type Profile struct {
	Base string
	Gossip
	Doc string
}

// Profiles are the timing profiles. The detection times in Doc are measured
// on this project's in-process cluster test (see README "Timing profiles").
var Profiles = map[string]Profile{
	"lan": {
		Base: "lan",
		Doc:  "memberlist LAN defaults (probe 1s/500ms, suspicion x4, gossip 200ms): serf's own default",
	},
	"wan": {
		Base: "wan",
		Doc:  "memberlist WAN defaults (probe 5s/3s, suspicion x6, gossip 500ms): links between sites",
	},
	"local": {
		Base: "local",
		Doc:  "memberlist local defaults (probe 1s/200ms, suspicion x3, gossip 100ms): one host or a very fast LAN",
	},
	"fast": {
		Base: "lan",
		Gossip: Gossip{
			ProbeInterval:     150 * time.Millisecond,
			ProbeTimeout:      100 * time.Millisecond,
			SuspicionMult:     3,
			GossipInterval:    50 * time.Millisecond,
			RetransmitMult:    8,
			ReconnectInterval: time.Second,
		},
		Doc: "tuned for database hosts on one LAN: probe 150ms/100ms, suspicion x3, gossip 50ms, retransmit x8",
	},
}

// ProfileNames returns the profile names, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(Profiles))
	for n := range Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Effective returns the gossip timings in force: the profile's values with
// the explicit overrides on top. Zero fields mean "memberlist's default for
// the profile's base".
func (c *Config) Effective() Gossip {
	g := Profiles[c.Profile].Gossip
	o := c.Gossip
	setD := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	setI := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setD(&g.ProbeInterval, o.ProbeInterval)
	setD(&g.ProbeTimeout, o.ProbeTimeout)
	setI(&g.SuspicionMult, o.SuspicionMult)
	setI(&g.SuspicionMaxTimeoutMult, o.SuspicionMaxTimeoutMult)
	setD(&g.GossipInterval, o.GossipInterval)
	setI(&g.GossipNodes, o.GossipNodes)
	setI(&g.RetransmitMult, o.RetransmitMult)
	setI(&g.IndirectChecks, o.IndirectChecks)
	setD(&g.PushPullInterval, o.PushPullInterval)
	setD(&g.ReconnectInterval, o.ReconnectInterval)
	setD(&g.ReconnectTimeout, o.ReconnectTimeout)
	setD(&g.TombstoneTimeout, o.TombstoneTimeout)
	g.DeadNodeReclaimTime = o.DeadNodeReclaimTime // not a profile setting; 0 means never
	return g
}
