package switchover

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/internal/view"
)

func ops(f *fleet, node string) []string {
	_, o := f.servers[node].state()
	return o
}

func readOnly(f *fleet, node string) bool {
	ro, _ := f.servers[node].state()
	return ro
}

// A switchover that runs through: the target holds term 2 and takes
// writes, the old writer is read-only and replicates from it, and the
// intent recorded in raft is ended.
func TestSwitchoverRunsThrough(t *testing.T) {
	f := newFleet(t, false)
	res, err := f.sw["db3"].Switchover(context.Background(), view.SwitchoverRequest{To: "db2", CatchUp: time.Second, Applied: time.Second})
	if err != nil || res.Error != "" {
		t.Fatalf("switchover: %v %q %+v", err, res.Error, res.Steps)
	}
	if tm := f.raft.fsm.Term("main"); tm.Number != 2 || tm.Writer != "db2" || res.Term != 2 {
		t.Errorf("term %+v, result term %d", tm, res.Term)
	}
	if readOnly(f, "db2") || !readOnly(f, "db1") {
		t.Error("db2 should take writes and db1 not")
	}
	if !slices.Equal(ops(f, "db1"), []string{"demote", "repoint"}) || !slices.Equal(ops(f, "db2"), []string{"catchup", "promote"}) || !slices.Equal(ops(f, "db3"), []string{"repoint"}) {
		t.Errorf("steps: db1 %v, db2 %v, db3 %v", ops(f, "db1"), ops(f, "db2"), ops(f, "db3"))
	}
	if n := len(f.raft.fsm.Switches()); n != 0 {
		t.Errorf("%d intents left in raft", n)
	}
	if !f.sw["db1"].WasDemoted("main", 1) {
		t.Error("db1 does not remember its demote (a lease unfence would make it writable again)")
	}
	// The re-pointed servers take the target's replication timers.
	for _, n := range []string{"db1", "db3"} {
		if got := f.servers[n].timers; got != (fence.Timers{ConnectRetry: 1, HeartbeatPeriod: 1.5}) {
			t.Errorf("%s re-pointed with timers %+v, want the target's", n, got)
		}
	}
}

// The restore branch: the target does not catch up, so the switchover is
// rolled back in raft first and the old writer made writable again; the
// term does not move, and no grant of that switchover can follow.
func TestSwitchoverRestoresWhenTheTargetDoesNotCatchUp(t *testing.T) {
	f := newFleet(t, false)
	f.servers["db2"].catchUp = context.DeadlineExceeded
	res, err := f.sw["db3"].Switchover(context.Background(), view.SwitchoverRequest{To: "db2", CatchUp: time.Second, Applied: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Error, "the old writer db1 is writable again (term 1 unchanged)") {
		t.Errorf("error %q", res.Error)
	}
	if readOnly(f, "db1") || !slices.Equal(ops(f, "db1"), []string{"demote", "restore"}) {
		t.Errorf("db1: read-only %v, steps %v", readOnly(f, "db1"), ops(f, "db1"))
	}
	if tm := f.raft.fsm.Term("main"); tm.Number != 1 || tm.Writer != "db1" {
		t.Errorf("term moved: %+v", tm)
	}
	if n := len(f.raft.fsm.Switches()); n != 0 {
		t.Errorf("%d intents left in raft", n)
	}
	if f.sw["db1"].WasDemoted("main", 1) {
		t.Error("db1 still remembers a demote that was undone")
	}
	// A late grant of the rolled-back switchover is refused.
	st := plan{id: res.ID, cluster: "main", from: 1, old: "db1", target: "db2", addr: "db2:3306", group: group, by: "db3"}.step(consensus.OpGrant, "db2")
	if _, err := f.sw["db2"].grant(context.Background(), st); err == nil {
		t.Error("a grant after the rollback was applied")
	}
}

// A second switchover of the cluster is refused while one is recorded.
func TestSwitchoverRefusedWhileAnotherIsRecorded(t *testing.T) {
	f := newFleet(t, false)
	begin(t, f, "db3", time.Minute)
	f.servers["db1"].mu.Lock()
	f.servers["db1"].readOnly = false // as if the demote had not happened yet
	f.servers["db1"].mu.Unlock()
	_, err := f.sw["db1"].Switchover(context.Background(), view.SwitchoverRequest{To: "db2"})
	if err == nil || !strings.Contains(err.Error(), "is not finished yet") {
		t.Fatalf("err %v", err)
	}
}

// begin records an intent by coordinator "by" and takes the demote, as a
// coordinator that then dies would have.
func begin(t *testing.T, f *fleet, by string, budget time.Duration) plan {
	t.Helper()
	p := plan{id: newID(), cluster: "main", from: 1, old: "db1", target: "db2", addr: "db2:3306", leader: "db2", group: group, by: by}
	st := p.step(consensus.OpBegin, "db2")
	st.WaitMS = budget.Milliseconds()
	if ans, err := f.ask(context.Background(), st, time.Second); err != nil || !ans.OK {
		t.Fatalf("begin: %v %+v", err, ans)
	}
	if ans, err := f.ask(context.Background(), p.step(consensus.OpDemote, "db1"), time.Second); err != nil || !ans.OK {
		t.Fatalf("demote: %v %+v", err, ans)
	}
	return p
}

// The coordinator dies after the demote, before the grant: the leader
// rolls the switchover back and the old writer takes writes again.
func TestResumeRollsBackWhenTheCoordinatorDies(t *testing.T) {
	f := newFleet(t, false)
	p := begin(t, f, "db3", 2*time.Minute)
	f.down["db3"] = true
	f.sw["db2"].resumeOrphans(context.Background())
	if !readOnly(f, "db1") {
		t.Fatal("db1 writable while its coordinator is alive in the gossip")
	}
	f.gossip.kill("db3")
	f.sw["db1"].resumeOrphans(context.Background()) // not the leader: nothing
	f.sw["db2"].resumeOrphans(context.Background())
	testkit.WaitFor(t, 10*time.Second, "db1 writable again", func() bool { return !readOnly(f, "db1") })
	testkit.WaitFor(t, 10*time.Second, "the intent ended", func() bool { return len(f.raft.fsm.Switches()) == 0 })
	if tm := f.raft.fsm.Term("main"); tm.Number != 1 || tm.Writer != "db1" {
		t.Errorf("term moved: %+v", tm)
	}
	if _, err := f.sw["db2"].grant(context.Background(), p.step(consensus.OpGrant, "db2")); err == nil {
		t.Error("the dead coordinator's grant was applied after the rollback")
	}
	if f.sw["db2"].stats.Resumed.Load() != 1 {
		t.Errorf("resumed %d, want 1", f.sw["db2"].stats.Resumed.Load())
	}
}

// The coordinator dies after the grant: the leader completes the
// switchover, the target takes writes and the intent ends.
func TestResumeCompletesAGrantedSwitchover(t *testing.T) {
	f := newFleet(t, false)
	p := begin(t, f, "db3", 2*time.Minute)
	if ans, err := f.ask(context.Background(), p.step(consensus.OpGrant, "db2"), time.Second); err != nil || !ans.OK || ans.Term != 2 {
		t.Fatalf("grant: %v %+v", err, ans)
	}
	f.down["db3"] = true
	f.gossip.kill("db3")
	f.sw["db2"].resumeOrphans(context.Background())
	testkit.WaitFor(t, 10*time.Second, "the intent ended", func() bool { return len(f.raft.fsm.Switches()) == 0 })
	if readOnly(f, "db2") || !readOnly(f, "db1") {
		t.Error("db2 should take writes, db1 not")
	}
	if !slices.Contains(ops(f, "db1"), "repoint") {
		t.Errorf("db1 does not replicate from db2: %v", ops(f, "db1"))
	}
}

// A coordinator alive in the gossip but stuck is left alone until the
// intent's deadline, then the leader rolls it back.
func TestResumeWaitsForTheDeadlineOfALiveCoordinator(t *testing.T) {
	f := newFleet(t, true)
	begin(t, f, "db3", 90*time.Second)
	f.down["db3"] = true // alive, but answers nothing
	f.sw["db2"].resumeOrphans(context.Background())
	f.clock.Advance(89 * time.Second)
	f.sw["db2"].resumeOrphans(context.Background())
	if !readOnly(f, "db1") || len(f.raft.fsm.Switches()) != 1 {
		t.Fatal("the leader acted before the deadline")
	}
	f.clock.Advance(2 * time.Second)
	f.sw["db2"].resumeOrphans(context.Background())
	testkit.WaitFor(t, 10*time.Second, "db1 writable again", func() bool { return !readOnly(f, "db1") })
	testkit.WaitFor(t, 10*time.Second, "the intent ended", func() bool { return len(f.raft.fsm.Switches()) == 0 })
}

func TestOrphaned(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	in := consensus.SwitchIntent{By: "db3", Deadline: now.Add(time.Minute)}
	for _, c := range []struct {
		alive   bool
		running bool
		at      time.Time
		want    string
	}{
		{true, false, now, ""},
		{false, false, now, "its coordinator db3 is not alive"},
		{false, true, now, ""},
		{true, true, now.Add(2 * time.Minute), "its deadline 2026-12-05T12:01:00Z passed"},
	} {
		if got := orphaned(in, map[string]bool{"db3": c.alive}, c.at, c.running); got != c.want {
			t.Errorf("alive %v running %v at %s: %q, want %q", c.alive, c.running, c.at, got, c.want)
		}
	}
}

// A target behind the writer by more than view.MaxSwitchoverLag is
// refused (every write would wait while it catches up) unless forced;
// the lag is shown.
func TestSwitchoverRefusesALaggingTarget(t *testing.T) {
	f := newFleet(t, false)
	secs, tx := 2.7, uint64(40)
	f.sw["db3"].cfg.Lags = func() map[string]view.Lag {
		return map[string]view.Lag{"db2": {Source: "gtid", Seconds: &secs, Transactions: &tx}}
	}
	_, err := f.sw["db3"].Switchover(context.Background(), view.SwitchoverRequest{To: "db2", CatchUp: time.Second, Applied: time.Second})
	if !errors.Is(err, view.ErrSwitchover) || !strings.Contains(err.Error(), "db2 is behind the writer db1 (40 tx, 2.7s)") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("lagging target: %v", err)
	}
	if o := ops(f, "db1"); len(o) != 0 {
		t.Fatalf("the refused switchover took steps: %v", o)
	}
	res, err := f.sw["db3"].Switchover(context.Background(), view.SwitchoverRequest{To: "db2", CatchUp: time.Second, Applied: time.Second, Force: true})
	if err != nil || res.Error != "" || res.Term != 2 || !strings.Contains(res.Steps[0].Detail, "db2 behind by 40 tx, 2.7s") {
		t.Fatalf("forced: %v %+v", err, res)
	}
}
