package switchover

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/view"
)

// result collects what a switchover's steps did.
type result struct {
	view.Switchover
	start time.Time
}

// record appends a step and reports whether it went well.
func (r *result) record(name, node string, took time.Duration, err error, detail string) bool {
	st := view.SwitchStep{Name: name, Node: node, OK: err == nil, Took: took, Detail: detail}
	if err != nil {
		st.Detail = err.Error()
	}
	r.Steps = append(r.Steps, st)
	return err == nil
}

// run takes the steps of p after its intent is recorded, and says what
// each did.
func (s *Switcher) run(ctx context.Context, p plan, req view.SwitchoverRequest, begun view.SwitchStep) view.Switchover {
	clk := s.cfg.Clock
	// The cluster takes no writes from the demote step on: ReadOnly
	// counts from here.
	res := &result{Switchover: view.Switchover{ID: p.id, Cluster: p.cluster, Old: p.old, Target: p.target, From: p.from}, start: clk.Now()}
	defer func() { res.Took = clk.Since(res.start) }()
	res.Steps = append(res.Steps, begun)

	// 1. The old writer: read-only, clients killed, its position.
	t0 := clk.Now()
	ans, err := s.sendStep(ctx, p.step(consensus.OpDemote, p.old), stepTimeout, stepLimit)
	if !res.record("set the old writer read-only", p.old, clk.Since(t0), err,
		fmt.Sprintf("read-only at GTID %s, %d client connections killed", orNone(ans.GTID), ans.Killed)) {
		s.restore(ctx, p, res, fmt.Errorf("demote %s: %w", p.old, err))
		return res.Switchover
	}
	// 2. The target catches up.
	t0 = clk.Now()
	cu := p.step(consensus.OpCatchUp, p.target)
	cu.GTID, cu.WaitMS = ans.GTID, req.CatchUp.Milliseconds()
	_, err = s.sendStep(ctx, cu, req.CatchUp+stepTimeout, req.CatchUp+stepLimit)
	if !res.record("wait for the target to catch up", p.target, clk.Since(t0), err, "applied "+orNone(ans.GTID)) {
		s.restore(ctx, p, res, fmt.Errorf("%s did not catch up: %w", p.target, err))
		return res.Switchover
	}
	// 3. The quorum grants the next term (the leader's step).
	t0 = clk.Now()
	ans, err = s.sendLeader(ctx, p.step(consensus.OpGrant, p.leader))
	if !res.record("grant the next writer term", ans.Node, clk.Since(t0), err, fmt.Sprintf("term %d to %s", ans.Term, p.target)) {
		s.restore(ctx, p, res, fmt.Errorf("grant: %w", err))
		return res.Switchover
	}
	res.Term = ans.Term
	// 4. The target takes writes once it knows it holds the term.
	if !s.promote(ctx, &p, res) {
		return res.Switchover
	}
	// 5. The other servers replicate from the target (at once, each on
	// its own: one that fails is reported, the switchover stands).
	res.Steps = append(res.Steps, s.repointAll(ctx, p)...)
	s.end(ctx, p, res, "done: "+p.target+" holds term "+fmt.Sprint(res.Term))
	// 6. Every router applies the new term.
	res.Routers = s.WaitApplied(ctx, p.cluster, res.Term, p.target, req.Applied).view()
	return res.Switchover
}

// promote makes the target writable once it holds the new term.
func (s *Switcher) promote(ctx context.Context, p *plan, res *result) bool {
	t0 := s.cfg.Clock.Now()
	ans, err := s.sendStep(ctx, p.step(consensus.OpPromote, p.target), promoteWait+stepTimeout, promoteWait+stepLimit)
	p.timers = ans.Timers
	res.ReadOnly = s.cfg.Clock.Since(res.start)
	if !res.record("make the target writable", p.target, s.cfg.Clock.Since(t0), err, "replication reset, read_only=OFF") {
		res.Error = fmt.Sprintf("term %d was granted to %s but it could not be made writable (%v): the raft leader tries again at the switchover's deadline; until then no server takes writes", res.Term, p.target, err)
		return false
	}
	return true
}

// end ends the intent. A failure is reported: the leader ends it at its
// deadline, doing again what is left (steps are idempotent).
func (s *Switcher) end(ctx context.Context, p plan, res *result, outcome string) {
	t0 := s.cfg.Clock.Now()
	st := p.step(consensus.OpEnd, p.leader)
	st.Outcome = consensus.ShortenOutcome(outcome)
	_, err := s.sendLeader(ctx, st)
	res.record("end the switchover in raft", p.leader, s.cfg.Clock.Since(t0), err, outcome)
}

// restore makes the old writer writable again when the switchover gives
// up before the grant: first the intent is rolled back in raft, so that
// no grant of it can follow, then the old writer is told. When raft
// refuses (the grant was applied after all) or cannot be reached, the
// old writer stays read-only and the leader finishes the switchover.
func (s *Switcher) restore(ctx context.Context, p plan, res *result, why error) {
	t0 := s.cfg.Clock.Now()
	st := p.step(consensus.OpEnd, p.leader)
	st.Rollback, st.Outcome = true, consensus.ShortenOutcome("rolled back: "+why.Error())
	if _, err := s.sendLeader(ctx, st); err != nil {
		res.ReadOnly = s.cfg.Clock.Since(res.start)
		res.record("roll the switchover back in raft", p.leader, s.cfg.Clock.Since(t0), err, "")
		res.Error = fmt.Sprintf("%v; the switchover could not be rolled back in raft (%v): the old writer %s stays read-only until the raft leader finishes the switchover (at its deadline)", why, err, p.old)
		return
	}
	t0 = s.cfg.Clock.Now()
	_, err := s.sendStep(ctx, p.step(consensus.OpRestore, p.old), stepTimeout, stepLimit)
	res.ReadOnly = s.cfg.Clock.Since(res.start)
	if err != nil {
		res.record("restore the old writer", p.old, s.cfg.Clock.Since(t0), err, "")
		res.Error = fmt.Sprintf("%v; the old writer %s could NOT be made writable again (%v): no server takes writes until an operator sets read_only=OFF on it", why, p.old, err)
		return
	}
	res.record("restore the old writer", p.old, s.cfg.Clock.Since(t0), nil, "read_only=OFF: it is the writer again")
	res.Error = fmt.Sprintf("%v; the old writer %s is writable again (term %d unchanged)", why, p.old, p.from)
}

// repointAll sends the repoint step to each of p.others at once and
// returns each answer as a step.
func (s *Switcher) repointAll(ctx context.Context, p plan) []view.SwitchStep {
	out := make([]view.SwitchStep, len(p.others))
	var wg sync.WaitGroup
	for i, node := range p.others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := s.cfg.Clock.Now()
			st := p.step(consensus.OpRepoint, node)
			st.Timers = p.timers
			ans, err := s.sendStep(ctx, st, stepTimeout, 2*stepTimeout)
			out[i] = view.SwitchStep{Name: "replicate from the new writer", Node: node, OK: err == nil, Took: s.cfg.Clock.Since(t0), Detail: ans.Detail}
			if err != nil {
				out[i].Detail = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

// errNoAnswer is sendStep's error when the node never answered.
var errNoAnswer = errors.New("no answer")
