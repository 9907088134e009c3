package consensus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
)

// TestLeadershipFollowsRaft: the leader loop starts on raft's leadership
// notification (the new leader publishes the terms again and grants), and
// the old leader's loop stops at once when the leadership moves away.
func TestLeadershipFollowsRaft(t *testing.T) {
	nodes, view, _ := startQuorum(t, "db1")
	old := leaderOf(nodes)
	waitDecideRounds(t, old, 1)
	if err := old.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	waitUntil(t, old.ID()+" logs the leadership lost", 10*time.Second, func() bool {
		return old.logs.count("consensus: leadership lost") > 0
	})
	stopped := old.rounds.decide.Load() // final: the loop ended before the line
	var next *testNode
	waitUntil(t, "another leader", 10*time.Second, func() bool {
		next = leaderOf(nodes)
		return next != nil && next != old
	})
	waitUntil(t, "term 1 published again by "+next.ID(), 5*time.Second, func() bool { return view.timesPublished("default", 1) >= 2 })
	// The new leader decides (about 1 s of rounds) while the old one
	// decides no more.
	waitDecideRounds(t, next, 4)
	if got := old.rounds.decide.Load(); got != stopped {
		t.Errorf("%s ran %d decide rounds after it lost the leadership", old.ID(), got-stopped)
	}
	view.set(func(v *fakeView) {
		v.members = []pool.Member{dbMember("db1", false), dbMember("db2", true), dbMember("db3", false)}
	})
	waitUntil(t, "term 2 to db2 from "+next.ID(), 5*time.Second, func() bool {
		tm := next.FSM().Term("default")
		return tm.Number == 2 && tm.Writer == "db2"
	})
}

// TestProveWriterRetryOnClock: a writer that failed its proof is not
// dialled again before writerRetry has passed on the node's clock; a
// proof cut short by the caller's context does not count as a failure.
func TestProveWriterRetryOnClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	addr := freeAddr(t)
	cfg := nodeConfig(t, "db1", addr, newKey(t))
	cfg.Clock = clock
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	dead := freeAddr(t) // nothing listens there
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{
		{ID: "db1", Address: raft.ServerAddress(addr), Suffrage: raft.Voter},
		{ID: "db2", Address: raft.ServerAddress(dead), Suffrage: raft.Voter},
	}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the configuration", 5*time.Second, n.HasState)
	term := pool.Term{Cluster: "default", Number: 1, Writer: "db2", Addr: "127.0.0.1:3306"}
	lately := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "failed to prove itself lately")
	}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.ProveWriter(ended, term); err == nil || lately(err) {
		t.Fatalf("proof under an ended context: %v, want a dial error", err)
	}
	ctx := context.Background()
	if err := n.ProveWriter(ctx, term); err == nil || lately(err) {
		t.Fatalf("first proof after an ended context: %v, want a dial error (the ended context is no failure of the writer's)", err)
	}
	if err := n.ProveWriter(ctx, term); !lately(err) {
		t.Fatalf("proof right after a failure: %v, want no dial", err)
	}
	clock.Advance(writerRetry - time.Millisecond)
	if err := n.ProveWriter(ctx, term); !lately(err) {
		t.Fatalf("proof %v after a failure: %v, want no dial", writerRetry-time.Millisecond, err)
	}
	clock.Advance(time.Millisecond)
	if err := n.ProveWriter(ctx, term); err == nil || lately(err) {
		t.Fatalf("proof %v after a failure: %v, want a dial error", writerRetry, err)
	}
}

// TestGrantEndsWithContext: a grant under an ended context is not
// applied and says why.
func TestGrantEndsWithContext(t *testing.T) {
	addr := freeAddr(t)
	n, err := Open(nodeConfig(t, "db1", addr, newKey(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := pool.Grant{Term: pool.Term{Cluster: "default", Number: 1, Writer: "db1", Addr: "127.0.0.1:3306", Granted: time.Now()}}
	if _, err := n.Grant(ctx, g); !errors.Is(err, context.Canceled) {
		t.Errorf("grant under an ended context: %v, want context.Canceled", err)
	}
	if _, err := n.Grant(context.Background(), g); !errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("grant on a node that does not lead: %v, want raft.ErrNotLeader", err)
	}
}
