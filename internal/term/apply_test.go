package term

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
)

// fakeGossip records the broadcasts; it has no members and sends no query.
type fakeGossip struct {
	mu     sync.Mutex
	events int
}

func (g *fakeGossip) Members() []serf.Member { return nil }
func (g *fakeGossip) UserEvent(string, []byte, bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events++
	return nil
}
func (g *fakeGossip) Query(string, []byte, *serf.QueryParam) (*serf.QueryResponse, error) {
	return nil, os.ErrClosed
}

// OnApply runs on raft's apply goroutine: it does no I/O (no signature, no
// file) and returns while the book's loop is not even running; the loop
// then signs the term and saves the terms file.
func TestOnApplyQueuesAndTheLoopSaves(t *testing.T) {
	kr := termKeyring(t)
	file := t.TempDir() + "/snapshot.terms"
	b := New(Config{File: file})
	b.SetKeys(kr, nil, true)
	term := pool.Term{Cluster: "main", Number: 4, Writer: "db1", Addr: "db1:3306", Granted: time.Now(), Group: "0a1b2c3d"}
	done := make(chan struct{})
	go func() { b.OnApply(term); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("OnApply blocked without the loop")
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("OnApply wrote the terms file inline (stat: %v)", err)
	}
	if b.View().Terms["main"].Number != 0 {
		t.Fatal("OnApply learned the term inline")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { b.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil && b.View().Terms["main"].Number == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop did not learn and save the applied term")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := New(Config{File: file})
	c.SetKeys(kr, nil, false)
	c.Load()
	if got := c.View().Terms["main"]; got.Number != 4 || got.Writer != "db1" {
		t.Fatalf("terms file holds %+v, want 4 to db1", got)
	}
}

// The leader's own grant reaches the book twice (its publish and its
// apply): it is learned once, broadcast once, and never counted stale,
// whichever comes first.
func TestOwnGrantCountedOnce(t *testing.T) {
	kr := termKeyring(t)
	for _, publishFirst := range []bool{true, false} {
		g := &fakeGossip{}
		b := New(Config{Gossip: g})
		b.SetKeys(kr, nil, true)
		term := pool.Term{Cluster: "main", Number: 2, Writer: "db1", Addr: "db1:3306", Granted: time.Now(), Group: "0a1b2c3d"}
		if publishFirst {
			b.Publish([]pool.Term{term})
		}
		b.OnApply(term)
		b.keepApplied()
		if !publishFirst {
			b.Publish([]pool.Term{term})
		}
		s := b.Stats()
		if s.Learned.Load() != 1 || s.Stale.Load() != 0 || g.events != 1 {
			t.Errorf("publish first %v: learned %d, stale %d, broadcasts %d; want 1, 0, 1", publishFirst, s.Learned.Load(), s.Stale.Load(), g.events)
		}
	}
	// Someone else's older term is still stale.
	b := New(Config{})
	b.SetKeys(kr, nil, false)
	b.Handle(context.Background(), serf.UserEvent{Name: consensus.TermEvent, Payload: signedTerm(t, kr, 3, "db2")})
	b.Handle(context.Background(), serf.UserEvent{Name: consensus.TermEvent, Payload: signedTerm(t, kr, 3, "db2")})
	if s := b.Stats().Stale.Load(); s != 1 {
		t.Errorf("a repeated broadcast: stale %d, want 1", s)
	}
}
