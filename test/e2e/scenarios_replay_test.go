//go:build e2e

package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// Issue 27, finding 4: replayed packets are not a sign of life. The gossip
// packets a db agent sends to the app agent are recorded; the db agent is
// then frozen (SIGSTOP) and the recordings are sent again at 20/s from the
// db host's address and gossip port. No key is needed. The app agent must
// see the frozen agent failed about as fast as without the replay: only an
// ack to its own pings, with its own sequence numbers, may withhold a
// failure. (Before own pings, any packet that decrypted counted as an
// answer: 11.2 s against 0.97 s.)
//
// While the replay goes on after the detection, the app agent's revival
// pings toward the frozen agent stay bounded (finding 5): at most one per
// revival interval (500 ms in a cluster this small), whatever packets
// arrive with its address. Before, each replayed packet woke the revival
// watch, which pinged at once.
//
//	go test -tags e2e -count=1 -v -run '^TestReplayedPackets$' ./test/e2e/
func TestReplayedPackets(t *testing.T) {
	Require(t)
	c := NewCluster(t, Options{})
	s := Scenario(t, "replay_20_per_s")
	victim, app := c.DBs[len(c.DBs)-1], c.Apps[0] // a replica: the writer stays
	const (
		captureFor = 3 * time.Second
		replayRate = 20.0
		// The detection limit a trial waits for: past maxHold (10 s) of
		// the gate, to measure the old code's delay.
		detectLimit = 30 * time.Second
		// absBound is the generous absolute bound on detection with
		// replay (fast profile: about 1 s without).
		absBound = 5 * time.Second
		// The revival pings of the app agent are counted over
		// reviveWindow of replay after the detection; reviveBound allows
		// one per 500 ms (reviveEvery) and two more.
		reviveWindow = 5 * time.Second
		reviveBound  = 12
		reviveSeries = `shoal_member_failure_pings_total{kind="revive"}`
	)
	revivePings := func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, _, err := MetricValue(ctx, app.Agent, reviveSeries)
		if err != nil {
			s.Fatalf("read %s's revival pings: %v", app.Name, err)
		}
		return v
	}
	var stopped bool
	t.Cleanup(func() {
		if stopped {
			_ = victim.Agent.Signal(syscall.SIGCONT)
		}
	})
	trial := func(i int, replay bool) time.Duration {
		var pkts [][]byte
		if replay {
			capture := CaptureUDP(t, app.Host, victim.Host, GossipPort, GossipPort)
			time.Sleep(captureFor)
			pkts = capture.Stop()
			s.Note("trial %d: captured %d gossip packets from %s to %s in %s", i, len(pkts), victim.Name, app.Name, captureFor)
			if len(pkts) < 5 {
				s.Fatalf("trial %d: captured only %d packets", i, len(pkts))
			}
		}
		if err := victim.Agent.Signal(syscall.SIGSTOP); err != nil {
			s.Fatalf("SIGSTOP %s: %v", victim.Name, err)
		}
		stopped = true
		t0 := time.Now()
		var rp *Replayer
		if replay {
			rp = ReplayUDP(t, victim.Host, app.Host, GossipPort, GossipPort, pkts, replayRate)
		}
		r := c.Obs.WaitAgents([]string{app.Name}, t0, detectLimit, memberIs(victim.Name, "failed"))
		if rp != nil && r.OK {
			before := revivePings()
			time.Sleep(reviveWindow)
			n := int(revivePings() - before)
			s.Count("revive_pings_in_5s_of_replay", n)
			if n > reviveBound {
				s.Errorf("trial %d: %s sent %d revival pings to the frozen %s in %s of replay, want at most %d", i, app.Name, n, victim.Name, reviveWindow, reviveBound)
			}
		}
		if rp != nil {
			rp.Stop()
			s.Note("trial %d: replay %s", i, rp)
			if rp.Errors() > 0 {
				s.Errorf("trial %d: %d replayed packets could not be sent", i, rp.Errors())
			}
		}
		if err := victim.Agent.Signal(syscall.SIGCONT); err != nil {
			s.Fatalf("SIGCONT %s: %v", victim.Name, err)
		}
		stopped = false
		name := "detect_frozen_db"
		if replay {
			name += "_with_replay"
		}
		info(s, name, r)
		if !r.OK {
			failWithState(s, c, "the frozen agent was never seen failed")
		}
		back := time.Now()
		if h := c.WaitHealthy(back, 60*time.Second); !h.OK {
			s.Fatalf("trial %d: the cluster did not heal after SIGCONT: %s", i, c.Describe())
		}
		return r.Took
	}
	var base, replayed time.Duration
	for i := range 4 {
		d := trial(i, i%2 == 1)
		if i%2 == 1 {
			replayed = max(replayed, d)
		} else {
			base = max(base, d)
		}
	}
	s.Note("detection of a frozen db agent at %s: without replay %.3fs, with replay at %.0f/s %.3fs (the slowest of two trials each)",
		app.Name, base.Seconds(), replayRate, replayed.Seconds())
	s.Measure("detect_with_replay_vs_2x_without", replayed, 2*base, replayed <= 2*base)
	s.Measure("detect_with_replay_absolute", replayed, absBound, replayed <= absBound)
}
