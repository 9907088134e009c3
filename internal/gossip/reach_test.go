package gossip

import (
	"net"
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
