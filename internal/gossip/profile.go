package gossip

import (
	"reflect"
	"sort"
	"time"
)

// Profile is a named set of gossip timings. Base selects memberlist's
// default config ("lan", "wan" or "local"); Tuning overrides it where
// non-zero. A user's explicit gossip settings win over both (see Effective).
type Profile struct {
	Base   string
	Tuning Tuning
	Doc    string
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
		Tuning: Tuning{
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

// DefaultProfile is the profile of an agent that names none.
const DefaultProfile = "lan"

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
// the explicit settings t on top (each non-zero field of t wins). Zero
// fields mean "memberlist's default for the profile's base".
func (p Profile) Effective(t Tuning) Tuning {
	g := p.Tuning
	gv, tv := reflect.ValueOf(&g).Elem(), reflect.ValueOf(t)
	for i := range tv.NumField() {
		if f := tv.Field(i); !f.IsZero() {
			gv.Field(i).Set(f)
		}
	}
	// Not profile settings: the user's, zero included (0 never reclaims).
	g.DeadNodeReclaimTime, g.ConfirmFailures, g.Positions = t.DeadNodeReclaimTime, t.ConfirmFailures, t.Positions
	return g
}
