package consensus

import (
	"testing"
	"time"

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
