package gossip

import (
	"io"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

func TestSerfConfigFromSettings(t *testing.T) {
	tu := DefaultTuning()
	tu.ProbeInterval = 300 * time.Millisecond
	s := Settings{Node: "n1", BindAddr: "10.0.0.1", BindPort: 7000, Profile: "fast", Tuning: tu, Rejoin: true}
	sc, err := SerfConfig(s, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mc := sc.MemberlistConfig
	if sc.NodeName != "n1" || mc.BindAddr != "10.0.0.1" || mc.BindPort != 7000 || mc.AdvertiseAddr != "10.0.0.1" || mc.AdvertisePort != 7000 {
		t.Errorf("addresses: %+v", mc)
	}
	// The user's setting wins over the profile's, the profile's over memberlist's.
	if mc.ProbeInterval != 300*time.Millisecond || mc.ProbeTimeout != 100*time.Millisecond || mc.SuspicionMult != 3 {
		t.Errorf("tuning: probe %s/%s suspicion %d", mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult)
	}
	if mc.DeadNodeReclaimTime != DefaultDeadNodeReclaimTime || !sc.RejoinAfterLeave {
		t.Errorf("reclaim %s rejoin %v", mc.DeadNodeReclaimTime, sc.RejoinAfterLeave)
	}
	s.BindAddr, s.AdvertiseAddr, s.AdvertisePort = "0.0.0.0", "192.0.2.1", 7001
	if sc, _ := SerfConfig(s, io.Discard); sc.MemberlistConfig.AdvertiseAddr != "192.0.2.1" || sc.MemberlistConfig.AdvertisePort != 7001 {
		t.Errorf("advertise: %+v", sc.MemberlistConfig)
	}
	s.Profile = "nope"
	if _, err := SerfConfig(s, io.Discard); err == nil {
		t.Error("an unknown profile was accepted")
	}
}

func TestTuningCheck(t *testing.T) {
	if err := DefaultTuning().Check(); err != nil {
		t.Fatalf("DefaultTuning().Check() = %v", err)
	}
	testkit.RefusesEach(t, DefaultTuning, Tuning.Check, []testkit.Refusal[Tuning]{
		{Mod: func(g *Tuning) { g.ProbeInterval = time.Millisecond }, Want: `probe_interval "1ms": must be at least 10ms (or 0 for the profile's value)`},
		{Mod: func(g *Tuning) { g.TombstoneTimeout = time.Second }, Want: `tombstone_timeout "1s": must be at least 1m0s (or 0 for the profile's value)`},
		{Mod: func(g *Tuning) { g.GossipNodes = -1 }, Want: `gossip_nodes "-1": must be at least 1 (or 0 for the profile's value)`},
		{Mod: func(g *Tuning) { g.DeadNodeReclaimTime = -1 }, Want: `dead_node_reclaim_time "-1ns": must not be negative`},
		{Mod: func(g *Tuning) { g.ProbeInterval, g.ProbeTimeout = time.Second, 2*time.Second },
			Want: `probe_timeout "2s": must not exceed gossip.probe_interval (1s)`},
	})
}
