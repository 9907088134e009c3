package gossip

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

func TestReachRound(t *testing.T) {
	members := []serf.Member{{Name: "a", Addr: net.IPv4(127, 0, 0, 1)}, {Name: "b", Addr: net.IPv4(127, 0, 0, 2)}}
	release := make(chan struct{})
	done := make(chan struct{}, 4)
	var pings atomic.Int32
	r := NewReach(ReachConfig{
		Members: func() []serf.Member { return members },
		Ping: func(m serf.Member) bool {
			pings.Add(1)
			<-release
			return m.Name == "a"
		},
		Done: func() { done <- struct{}{} },
	})
	if r.Latest().Done() {
		t.Fatal("a round before any probe")
	}
	if !r.Probe([]string{"a", "b", "ghost"}) {
		t.Fatal("first probe refused")
	}
	if r.Probe([]string{"a"}) {
		t.Fatal("a second probe was accepted while a round runs")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the round never ended")
	}
	got := r.Latest()
	if !got.Done() || !got.Answered["a"] || got.Answered["b"] || got.Answered["ghost"] || len(got.Answered) != 3 {
		t.Fatalf("round = %+v: want a answered, b and the unknown ghost not", got)
	}
	if pings.Load() != 2 || r.Dropped.Load() != 1 || r.Rounds.Load() != 1 {
		t.Fatalf("pings %d dropped %d rounds %d: want 2 (no ping to an unknown name), 1, 1", pings.Load(), r.Dropped.Load(), r.Rounds.Load())
	}
	r.Close()
	if r.Probe([]string{"a"}) {
		t.Fatal("probe accepted after Close")
	}
}

// A round asks up to relayVia of the members that answered to ping those
// that did not; a member that answers one of them is relayed.
func TestReachRelays(t *testing.T) {
	var members []serf.Member
	for i, n := range []string{"p1", "p2", "p3", "p4", "q", "dead"} {
		members = append(members, serf.Member{Name: n, Addr: net.IPv4(127, 0, 0, byte(i+1))})
	}
	var mu sync.Mutex
	vias := map[string]bool{}
	done := make(chan struct{}, 1)
	r := NewReach(ReachConfig{
		Members: func() []serf.Member { return members },
		Ping:    func(m serf.Member) bool { return m.Name != "q" && m.Name != "dead" },
		Relay: func(via, target serf.Member) bool {
			mu.Lock()
			vias[via.Name] = true
			mu.Unlock()
			return target.Name == "q" && via.Name == "p2"
		},
		Pick: func(int) int { return 0 }, // drops the first: p1
		Done: func() { done <- struct{}{} },
	})
	if !r.Probe([]string{"p1", "p2", "p3", "p4", "q", "dead", "ghost"}) {
		t.Fatal("probe refused")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the round never ended")
	}
	got := r.Latest()
	if got.Answered["q"] || !got.Relayed["q"] || got.Relayed["dead"] || !got.Reached("q") || got.Reached("dead") || got.Reached("ghost") {
		t.Fatalf("round = %+v: want q relayed, dead and ghost not reached", got)
	}
	if _, asked := got.Relayed["ghost"]; asked {
		t.Fatal("an unknown name was relayed")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(vias) != relayVia || vias["p1"] {
		t.Fatalf("relays through %v: want %d of the members that answered (p1 dropped)", vias, relayVia)
	}
	if n := r.Relays.Load(); n != 2*relayVia {
		t.Fatalf("relays %d, want %d (2 members through %d each)", n, 2*relayVia, relayVia)
	}
}
