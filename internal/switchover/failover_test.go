package switchover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/internal/view"
)

// deadWriter makes db1's agent report its mysqld down and both replicas
// lose it; db2 applied up to seq 10, db3 up to seq 12.
func deadWriter(f *fleet) {
	f.setMember("db1", pool.StatusAlive, &tags.Health{State: tags.Critical, Reason: "refused", ServerID: 1})
	for i, n := range []string{"db2", "db3"} {
		f.setMember(n, pool.StatusAlive, &tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, SQLRunning: true, ServerID: uint32(i + 2), SourceServerID: 1})
	}
	f.servers["db2"].survey = fence.Survey{Replica: true, SQLRunning: true, Drained: true, ServerID: 2, IOPos: "0-1-10", BinlogPos: "0-1-10", CurrentPos: "0-1-10"}
	f.servers["db3"].survey = fence.Survey{Replica: true, SQLRunning: true, Drained: true, ServerID: 3, IOPos: "0-1-12", BinlogPos: "0-1-12", CurrentPos: "0-1-12"}
}

// A dead writer, confirmed by its agent and both replicas for
// confirmFast: the leader surveys both, picks db3 (the most advanced),
// grants it term 2 under a failover intent, promotes it and re-points
// db2; the dead db1 is not touched, and the intent ends.
func TestFailoverPromotesTheMostAdvanced(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	ctx := context.Background()
	leader := f.sw["db2"]
	leader.judgeWriters(ctx)
	f.clock.Advance(confirmFast - time.Millisecond)
	leader.judgeWriters(ctx)
	f.sw["db3"].judgeWriters(ctx) // not the leader: nothing
	if o := ops(f, "db2"); len(o) != 0 {
		t.Fatalf("a failover started before the death was confirmed for %s: %v", confirmFast, o)
	}
	f.clock.Advance(time.Millisecond)
	leader.judgeWriters(ctx)
	testkit.WaitFor(t, 10*time.Second, "term 2 to db3 and the intent ended", func() bool {
		tm := f.raft.fsm.Term("main")
		return tm.Number == 2 && tm.Writer == "db3" && len(f.raft.fsm.Switches()) == 0 && !leader.failoverRunning("main")
	})
	tm := f.raft.fsm.Term("main")
	if !strings.Contains(tm.Why, "failover from db1 (term 1)") || !strings.Contains(tm.Why, "db3 is the most advanced replica (0-1-12)") {
		t.Errorf("why %q", tm.Why)
	}
	if readOnly(f, "db3") {
		t.Error("db3 is not writable")
	}
	if !slices.Equal(ops(f, "db3"), []string{"survey", "promote"}) || !slices.Equal(ops(f, "db2"), []string{"survey", "repoint"}) || len(ops(f, "db1")) != 0 {
		t.Errorf("steps: db1 %v, db2 %v, db3 %v", ops(f, "db1"), ops(f, "db2"), ops(f, "db3"))
	}
	if got := leader.LastFailover()["main"]; !strings.HasPrefix(got, "failed over to db3 (term 2)") {
		t.Errorf("last failover %q", got)
	}
	if got := f.servers["db2"].timers; got != (fence.Timers{ConnectRetry: 1, HeartbeatPeriod: 1.5}) {
		t.Errorf("db2 re-pointed with timers %+v, want db3's", got)
	}
	// The survey holds are gone: nothing starts replication again later.
	f.clock.Advance(surveyHold)
	for _, n := range []string{"db2", "db3"} {
		f.sw[n].releaseHeld(ctx)
		if f.servers[n].resumed != 0 {
			t.Errorf("%s's replication started again after the failover", n)
		}
	}
}

// Not dead while a replica still receives from the writer, nor while it
// is slow, hung or passing: no survey, no step at all.
func TestNoFailoverWithoutTheWitnesses(t *testing.T) {
	for name, set := range map[string]func(f *fleet){
		"a replica still receives": func(f *fleet) {
			f.setMember("db3", pool.StatusAlive, &tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true, ServerID: 3, SourceServerID: 1})
		},
		"the writer hangs (timeout)": func(f *fleet) {
			f.setMember("db1", pool.StatusAlive, &tags.Health{State: tags.Critical, Reason: "timeout", ServerID: 1})
		},
		"the writer is slow": func(f *fleet) {
			f.setMember("db1", pool.StatusAlive, &tags.Health{State: tags.Warning, Reason: "slow", ServerID: 1})
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFleet(t, true)
			deadWriter(f)
			set(f)
			for range 5 {
				f.sw["db2"].judgeWriters(context.Background())
				f.clock.Advance(time.Minute)
			}
			for _, n := range []string{"db1", "db2", "db3"} {
				if o := ops(f, n); len(o) != 0 {
					t.Errorf("%s took steps: %v", n, o)
				}
			}
			if tm := f.raft.fsm.Term("main"); tm.Number != 1 {
				t.Errorf("term moved: %+v", tm)
			}
		})
	}
}

// When no candidate holds every transaction (two domains, each replica
// ahead in one), nothing is promoted: the candidates start receiving
// again, the term stays, and the leader tries again only after
// failoverRetry.
func TestFailoverRefusedWhenNoCandidateHasEverything(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	f.servers["db2"].survey.CurrentPos, f.servers["db2"].survey.IOPos = "0-1-12,1-1-5", "0-1-12,1-1-5"
	f.servers["db3"].survey.CurrentPos, f.servers["db3"].survey.IOPos = "0-1-13,1-1-4", "0-1-13,1-1-4"
	ctx := context.Background()
	leader := f.sw["db2"]
	leader.judgeWriters(ctx)
	f.clock.Advance(confirmFast)
	leader.judgeWriters(ctx)
	testkit.WaitFor(t, 10*time.Second, "the failover given up", func() bool { return !leader.failoverRunning("main") && leader.LastFailover()["main"] != "" })
	if tm := f.raft.fsm.Term("main"); tm.Number != 1 || len(f.raft.fsm.Switches()) != 0 {
		t.Fatalf("term %+v, intents %v", tm, f.raft.fsm.Switches())
	}
	got := leader.LastFailover()["main"]
	if !strings.Contains(got, "no candidate may be promoted") || !strings.Contains(got, "db2: lacks 1 transactions db3 applied") {
		t.Errorf("last failover %q", got)
	}
	for _, n := range []string{"db2", "db3"} {
		if !slices.Equal(ops(f, n), []string{"survey", "resume"}) {
			t.Errorf("%s: %v, want survey then resume", n, ops(f, n))
		}
	}
	f.clock.Advance(failoverRetry - time.Second)
	leader.judgeWriters(ctx)
	time.Sleep(50 * time.Millisecond)
	if n := len(ops(f, "db2")); n != 2 {
		t.Errorf("surveyed again before failoverRetry: %v", ops(f, "db2"))
	}
}

// A writer whose agent is gone too (failed in the gossip) is failed over
// only after the writer's lease: by then it fenced itself if it lives.
func TestFailoverWaitsForTheLeaseWhenTheAgentIsGone(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	f.setMember("db1", pool.StatusFailed, nil)
	leader := f.sw["db2"]
	leader.cfg.Lease = 5 * time.Second
	ctx := context.Background()
	leader.judgeWriters(ctx)
	f.clock.Advance(4 * time.Second)
	leader.judgeWriters(ctx)
	if o := ops(f, "db3"); len(o) != 0 {
		t.Fatalf("surveyed before the lease passed: %v", o)
	}
	f.clock.Advance(time.Second)
	leader.judgeWriters(ctx)
	testkit.WaitFor(t, 10*time.Second, "term 2 to db3", func() bool {
		tm := f.raft.fsm.Term("main")
		return tm.Number == 2 && tm.Writer == "db3"
	})
}

// frozenWriter is deadWriter's fleet with db1's agent failed and both
// replicas' IO threads running, receiving nothing when silent.
func frozenWriter(t *testing.T, silent bool) *fleet {
	f := newFleet(t, true)
	deadWriter(f)
	f.setMember("db1", pool.StatusFailed, nil)
	replicasHear(f, silent)
	return f
}

// replicasHear sets db2's and db3's health: IO thread running, and
// receiving nothing when silent.
func replicasHear(f *fleet, silent bool) {
	for i, n := range []string{"db2", "db3"} {
		f.setMember(n, pool.StatusAlive, &tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true,
			NotReceiving: silent, ServerID: uint32(i + 2), SourceServerID: 1})
	}
}

// A frozen host (agent and mysqld stopped): the replicas' IO threads run
// on but receive nothing after a few heartbeat periods. The lease counts
// from the first time the leader saw the writer's agent gone, not from
// when the replicas noticed: the failover starts a lease after the agent
// went, not a lease after the silence.
func TestFrozenWriterFailsOverALeaseAfterItsAgentWent(t *testing.T) {
	f := frozenWriter(t, false)
	receiving := func(nr bool) { replicasHear(f, nr) }
	leader := f.sw["db2"]
	leader.cfg.Lease = 5 * time.Second
	ctx := context.Background()
	leader.judgeWriters(ctx) // t=0: the agent is gone, the replicas still receive
	f.clock.Advance(3 * time.Second)
	receiving(true)
	leader.judgeWriters(ctx) // t=3s: they notice the silence
	f.clock.Advance(1500 * time.Millisecond)
	leader.judgeWriters(ctx) // t=4.5s: within the lease
	if o := ops(f, "db3"); len(o) != 0 {
		t.Fatalf("surveyed before the lease passed: %v", o)
	}
	f.clock.Advance(500 * time.Millisecond)
	leader.judgeWriters(ctx) // t=5s: a lease after the agent went
	testkit.WaitFor(t, 10*time.Second, "term 2 to db3", func() bool {
		tm := f.raft.fsm.Term("main")
		return tm.Number == 2 && tm.Writer == "db3"
	})
}

// Replicas that receive again (the host thawed) call the failover off,
// however long the agent was gone.
func TestNoFailoverOnceTheReplicasReceiveAgain(t *testing.T) {
	f := frozenWriter(t, true)
	leader := f.sw["db2"]
	leader.cfg.Lease = 5 * time.Second
	ctx := context.Background()
	leader.judgeWriters(ctx)
	f.clock.Advance(4 * time.Second)
	f.setMember("db3", pool.StatusAlive, replica(true))
	leader.judgeWriters(ctx)
	f.clock.Advance(2 * time.Second)
	leader.judgeWriters(ctx)
	time.Sleep(50 * time.Millisecond)
	if o := ops(f, "db3"); len(o) != 0 {
		t.Fatalf("surveyed while a replica receives: %v", o)
	}
}

// A candidate whose survey no failover followed (the leader died before
// it recorded one) starts receiving again by itself after surveyHold; one
// whose failover is recorded waits.
func TestSurveyHoldIsReleased(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	ctx := context.Background()
	p := plan{id: "00000000000000aa", cluster: "main", from: 1, old: "db1", target: "db3", addr: "db3:3306", leader: "db2", group: group, by: "db2"}
	st := p.step(consensus.OpSurvey, "db3")
	st.Expires = f.clock.Now().Add(time.Minute)
	if ans := f.sw["db3"].takeSafely(ctx, st); !ans.OK || ans.Survey == nil || ans.GTID != "0-1-12" {
		t.Fatalf("survey: %+v", ans)
	}
	f.clock.Advance(surveyHold - time.Second)
	f.sw["db3"].releaseHeld(ctx)
	if f.servers["db3"].resumed != 0 {
		t.Fatal("released before surveyHold")
	}
	f.clock.Advance(time.Second)
	f.sw["db3"].releaseHeld(ctx)
	if f.servers["db3"].resumed != 1 {
		t.Fatal("not released after surveyHold")
	}

	// Recorded in raft: held on.
	p.id = "00000000000000bb"
	st = p.step(consensus.OpSurvey, "db3")
	st.Expires = f.clock.Now().Add(time.Minute)
	f.sw["db3"].takeSafely(ctx, st)
	in := consensus.SwitchIntent{ID: p.id, Cluster: "main", From: 1, Old: "db1", Target: "db3", Addr: "db3:3306", By: "db2",
		Started: f.clock.Now(), Deadline: f.clock.Now().Add(time.Hour), Kind: consensus.KindFailover}
	if _, err := (fakeVoter{f.raft, "db2"}).BeginSwitch(ctx, in); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * surveyHold)
	f.sw["db3"].releaseHeld(ctx)
	if f.servers["db3"].resumed != 1 {
		t.Fatal("released while its failover is recorded")
	}
}

// A failover intent whose leader no longer runs it: before the grant the
// new leader ends it and the candidates receive again (the dead writer
// is never "restored"); after the grant it completes it without
// re-pointing the dead writer.
func TestResumeOfAFailover(t *testing.T) {
	for _, granted := range []bool{false, true} {
		f := newFleet(t, true)
		deadWriter(f)
		ctx := context.Background()
		in := consensus.SwitchIntent{ID: "00000000000000cc", Cluster: "main", From: 1, Old: "db1", Target: "db3", Addr: "db3:3306", By: "db3",
			Started: f.clock.Now(), Deadline: f.clock.Now().Add(time.Hour), Kind: consensus.KindFailover}
		v := fakeVoter{f.raft, "db2"}
		if _, err := v.BeginSwitch(ctx, in); err != nil {
			t.Fatal(err)
		}
		if granted {
			g := pool.Grant{Expect: 1, Term: pool.Term{Cluster: "main", Number: 2, Writer: "db3", Addr: "db3:3306", Granted: f.clock.Now(), Why: "failover"}}
			if _, err := v.GrantSwitch(ctx, in.ID, g); err != nil {
				t.Fatal(err)
			}
		}
		f.sw["db2"].resumeOrphans(ctx) // db3 (alive) ran it but no longer leads
		testkit.WaitFor(t, 10*time.Second, "the intent ended", func() bool { return len(f.raft.fsm.Switches()) == 0 })
		if o := ops(f, "db1"); len(o) != 0 {
			t.Errorf("granted %v: the dead writer took steps: %v", granted, o)
		}
		tm := f.raft.fsm.Term("main")
		switch {
		case !granted && (tm.Number != 1 || !slices.Contains(ops(f, "db2"), "resume") || !slices.Contains(ops(f, "db3"), "resume")):
			t.Errorf("rolled back: term %+v, db2 %v, db3 %v", tm, ops(f, "db2"), ops(f, "db3"))
		case granted && (tm.Writer != "db3" || readOnly(f, "db3") || !slices.Equal(ops(f, "db2"), []string{"repoint"})):
			t.Errorf("completed: term %+v, db3 read-only %v, db2 %v", tm, readOnly(f, "db3"), ops(f, "db2"))
		}
	}
}

// shoal failover --dry-run: the verdict and the pick from the gossiped
// positions, nothing changed; a run on a writer that is not dead is
// refused; an unknown cluster is the request's fault.
func TestFailoverNow(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	at := func(seq uint64) tags.Position {
		p, _ := tags.NewPosition([]tags.Domain{{ID: 0, Seq: seq}})
		return p
	}
	for n, seq := range map[string]uint64{"db2": 10, "db3": 12} {
		h := *f.health[n]
		h.Position = at(seq)
		f.setMember(n, pool.StatusAlive, &h)
	}
	ctx := context.Background()
	res, err := f.sw["db3"].FailoverNow(ctx, view.FailoverRequest{DryRun: true})
	if err != nil || !res.Dead || res.Pick != "db3" || len(res.Candidates) != 2 || res.Candidates[1].Node != "db2" ||
		!strings.Contains(res.Candidates[1].Out, "lacks 2 transactions db3 applied") || res.Done {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	for _, n := range []string{"db1", "db2", "db3"} {
		if o := ops(f, n); len(o) != 0 {
			t.Errorf("the dry run made %s take steps: %v", n, o)
		}
	}
	if _, err := f.sw["db3"].FailoverNow(ctx, view.FailoverRequest{Cluster: "nope"}); !errors.Is(err, view.ErrFailoverRequest) {
		t.Errorf("unknown cluster: %v", err)
	}
	f.setMember("db1", pool.StatusAlive, &tags.Health{State: tags.Passing, ServerID: 1})
	if res, err := f.sw["db2"].FailoverNow(ctx, view.FailoverRequest{}); !errors.Is(err, view.ErrFailover) || res.Dead {
		t.Errorf("a live writer failed over: %+v, %v", res, err)
	}
	// Dead again; db2 leads: the run promotes db3.
	deadWriter(f)
	res, err = f.sw["db2"].FailoverNow(ctx, view.FailoverRequest{Cluster: "main"})
	if err != nil || !res.Done || res.NewTerm != 2 || res.Pick != "db3" || !strings.HasPrefix(res.Outcome, "failed over to db3") {
		t.Fatalf("run: %+v, %v", res, err)
	}
}

// consensus.failover_limit: a leader that started as many failovers of a
// cluster in the last hour starts no more; an hour later it does.
func TestFailoverLimit(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	leader := f.sw["db2"]
	leader.cfg.FailoverLimit = 1
	leader.fo.started["main"] = []time.Time{f.clock.Now().Add(-59 * time.Minute)}
	ctx := context.Background()
	leader.judgeWriters(ctx)
	f.clock.Advance(confirmFast)
	leader.judgeWriters(ctx)
	if got := leader.LastFailover()["main"]; !strings.Contains(got, "1 failovers of main in the last hour") {
		t.Fatalf("last failover %q", got)
	}
	if o := ops(f, "db3"); len(o) != 0 {
		t.Fatalf("surveyed over the limit: %v", o)
	}
	f.clock.Advance(2 * time.Minute) // past the hour, and past failoverRetry
	leader.judgeWriters(ctx)
	testkit.WaitFor(t, 10*time.Second, "term 2 once the hour passed", func() bool { return f.raft.fsm.Term("main").Number == 2 })
}

// A survey's hold outlives an agent restart: the new switcher reads it
// from the hold file and starts the IO thread again surveyHold after its
// start, unless raft records that failover; with none left the file goes.
func TestSurveyHoldSurvivesARestart(t *testing.T) {
	f := newFleet(t, true)
	deadWriter(f)
	file := filepath.Join(t.TempDir(), "snapshot.survey-hold")
	f.sw["db3"].cfg.HoldFile = file
	ctx := context.Background()
	p := plan{id: "00000000000000dd", cluster: "main", from: 1, old: "db1", target: "db3", addr: "db3:3306", leader: "db2", group: group, by: "db2"}
	st := p.step(consensus.OpSurvey, "db3")
	st.Expires = f.clock.Now().Add(time.Minute)
	if ans := f.sw["db3"].takeSafely(ctx, st); !ans.OK {
		t.Fatalf("survey: %+v", ans)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("no hold file after the survey: %v", err)
	}
	// The agent restarts: a new switcher on the same file.
	again := New(Config{Node: "db3", Gossip: f.gossip, Terms: f.sw["db3"].cfg.Terms, Voter: f.sw["db3"].cfg.Voter,
		Actuator: f.servers["db3"], Pool: f.pool, Members: f.members, Clock: f.clock, HoldFile: file})
	f.clock.Advance(surveyHold - time.Second)
	again.releaseHeld(ctx)
	if f.servers["db3"].resumed != 0 {
		t.Fatal("released before surveyHold from the restart")
	}
	f.clock.Advance(time.Second)
	again.releaseHeld(ctx)
	if f.servers["db3"].resumed != 1 {
		t.Fatal("the hold of the run before the restart was not released")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hold file is still there: %v", err)
	}
	// A broken file is refused, not trusted.
	if err := os.WriteFile(file, []byte(`{"bad cluster name!":{"id":"x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New(Config{Node: "db3", Clock: f.clock}).loadHolds(); err != nil {
		t.Fatalf("a switcher without a hold file read one: %v", err)
	}
	s := New(Config{Node: "db3", Clock: f.clock})
	s.cfg.HoldFile = file
	if err := s.loadHolds(); err == nil {
		t.Fatal("a broken hold file was accepted")
	}
}

// failedOver runs the failover of deadWriter's db1 to db3 (term 2, the
// promotion position 0-1-12) and returns the fleet.
func failedOver(t *testing.T) *fleet {
	t.Helper()
	f := newFleet(t, true)
	deadWriter(f)
	f.servers["db3"].survey.Timers = fence.Timers{ConnectRetry: 2, HeartbeatPeriod: 0.5}
	ctx := context.Background()
	leader := f.sw["db2"]
	leader.judgeWriters(ctx)
	f.clock.Advance(confirmFast)
	leader.judgeWriters(ctx)
	testkit.WaitFor(t, 10*time.Second, "term 2 to db3 and the intent ended", func() bool {
		tm := f.raft.fsm.Term("main")
		return tm.Number == 2 && tm.Writer == "db3" && len(f.raft.fsm.Switches()) == 0 && !leader.failoverRunning("main")
	})
	want := consensus.Failover{Cluster: "main", Term: 2, Old: "db1", OldServerID: 1, Target: "db3", Position: "0-1-12"}
	got := f.raft.fsm.Failovers()["main"]
	if tm := got.Timers; tm == nil || *tm != (consensus.ReplTimers{ConnectRetry: 2, HeartbeatMS: 500}) {
		t.Fatalf("failover record's timers %+v, want db3's survey's", tm)
	}
	if got.Timers = nil; got != want {
		t.Fatalf("failover record %+v, want %+v", got, want)
	}
	return f
}

// The old writer back with transactions beyond the promotion position:
// they are counted and named, and its server is left alone (diverged).
// Without any it rejoins as a replica of the new writer. Down, or not
// read-only yet: judged later. Either way only once.
func TestFailedOverWriterReturns(t *testing.T) {
	ctx := context.Background()
	t.Run("diverged", func(t *testing.T) {
		f := failedOver(t)
		old := f.sw["db1"]
		f.servers["db1"].posErr = errors.New("connection refused")
		old.checkReturn(ctx)
		if len(old.Returns()) != 0 {
			t.Fatalf("judged while down: %v", old.Returns())
		}
		f.servers["db1"].posErr = nil
		f.servers["db1"].positions = fence.Survey{ReadOnly: false, BinlogPos: "0-1-15"}
		f.clock.Advance(returnEvery)
		old.checkReturn(ctx)
		if len(old.Returns()) != 0 {
			t.Fatalf("judged while writable (the fencer's to set read-only first): %v", old.Returns())
		}
		f.servers["db1"].positions.ReadOnly = true
		f.clock.Advance(returnEvery)
		old.checkReturn(ctx)
		r := old.Returns()["main"]
		if r.Lost != 3 || r.LostSet != "0-1-13..0-1-15" || r.NewRole != "diverged" || !strings.Contains(r.String(), "3 transactions (0-1-13..0-1-15)") {
			t.Errorf("return %+v: %s", r, r)
		}
		if n := old.Stats().LostTransactions.Load(); n != 3 {
			t.Errorf("lost transactions counted %d, want 3", n)
		}
		if o := ops(f, "db1"); len(o) != 0 {
			t.Errorf("a diverged server was touched: %v", o)
		}
		f.clock.Advance(returnEvery)
		old.checkReturn(ctx)
		if n := old.Stats().LostTransactions.Load(); n != 3 {
			t.Errorf("counted again: %d", n)
		}
	})
	t.Run("rejoins", func(t *testing.T) {
		f := failedOver(t)
		old := f.sw["db1"]
		f.servers["db1"].positions = fence.Survey{ReadOnly: true, BinlogPos: "0-1-11"}
		old.checkReturn(ctx)
		r := old.Returns()["main"]
		if r.Lost != 0 || r.NewRole != "replica of db3" || !slices.Equal(ops(f, "db1"), []string{"repoint"}) || !f.servers["db1"].former {
			t.Errorf("return %+v, steps %v, former writer %v", r, ops(f, "db1"), f.servers["db1"].former)
		}
		if tm := f.servers["db1"].timers; tm != (fence.Timers{ConnectRetry: 2, HeartbeatPeriod: 0.5}) {
			t.Errorf("db1 rejoined with timers %+v, want db3's (its heartbeat period: a silent writer is seen by it)", tm)
		}
		// Another agent (not the old writer) judges nothing.
		f.sw["db2"].checkReturn(ctx)
		if len(f.sw["db2"].Returns()) != 0 {
			t.Errorf("db2 judged a return: %v", f.sw["db2"].Returns())
		}
	})
	t.Run("same sequence number, another server: one lost", func(t *testing.T) {
		f := failedOver(t)
		old := f.sw["db1"]
		f.servers["db1"].positions = fence.Survey{ReadOnly: true, BinlogPos: "0-9-12"}
		old.checkReturn(ctx)
		if r := old.Returns()["main"]; r.Lost != 1 || r.LostSet != "0-9-12" {
			t.Errorf("return %+v", r)
		}
	})
}

// A writer whose agent led raft when it froze: the slow path waits raft's
// leader lease on top of the writer's lease (a leader counts as in contact
// until it steps down), counted from when a voter that did not lead yet
// first saw it gone.
func TestFrozenLeaderWriterWaitsTheLeaderLeaseToo(t *testing.T) {
	f := frozenWriter(t, true)
	setLeader := func(n string) {
		f.raft.mu.Lock()
		f.raft.leader = n
		f.raft.mu.Unlock()
	}
	sw := f.sw["db2"]
	sw.cfg.Lease, sw.cfg.LeaderLease = 5*time.Second, 500*time.Millisecond
	ctx := context.Background()
	setLeader("db1")
	sw.judgeWriters(ctx) // t=0: db1 leads in db2's view, and is gone
	f.clock.Advance(1500 * time.Millisecond)
	setLeader("db2") // elected
	sw.judgeWriters(ctx)
	f.clock.Advance(3500 * time.Millisecond)
	sw.judgeWriters(ctx) // t=5s: a lease after it went, not the leader lease more
	time.Sleep(50 * time.Millisecond)
	if o := ops(f, "db3"); len(o) != 0 {
		t.Fatalf("surveyed a lease after a leading writer went, before raft's leader lease: %v", o)
	}
	f.clock.Advance(500 * time.Millisecond)
	sw.judgeWriters(ctx)
	testkit.WaitFor(t, 10*time.Second, "term 2 to db3", func() bool {
		tm := f.raft.fsm.Term("main")
		return tm.Number == 2 && tm.Writer == "db3"
	})
}
