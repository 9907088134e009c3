package switchover

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
)

// retryable marks an error after which the step may be sent again.
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

// errBusy is the answer to a step that arrives while another runs.
const errBusy = "busy with another switchover step"

// Answer takes a switchover step addressed to this agent (a
// consensus.SwitchQuery), on a goroutine of its own (a step may wait for
// replication), and answers it. A step that does not verify is not
// answered: only the holder of the consensus key runs switchovers.
func (s *Switcher) Answer(ctx context.Context, q *serf.Query) {
	st, err := consensus.DecodeSwitchStep(q.Payload, s.cfg.Terms.Verify())
	if err != nil {
		s.stats.Refused.Add(1)
		s.cfg.Log.Warn("switchover step refused", "error", err)
		return
	}
	if st.Node != s.cfg.Node {
		return
	}
	key := st.ID + "/" + st.Op
	if b, ok := s.cached(key); ok {
		_ = q.Respond(b)
		return
	}
	respond := func(ans consensus.SwitchAnswer) {
		b, err := consensus.EncodeSwitchAnswer(s.cfg.Terms.Signer(), ans)
		if err != nil {
			s.cfg.Log.Error("switchover answer not encoded", "op", st.Op, "error", err)
			return
		}
		if !ans.Retry {
			s.remember(key, b)
		}
		if err := q.Respond(b); err != nil {
			s.cfg.Log.Warn("switchover answer not sent", "op", st.Op, "id", st.ID, "error", err)
		}
	}
	if err := s.admit(st); err != nil {
		s.stats.Refused.Add(1)
		respond(consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: s.cfg.Node, Error: err.Error()})
		return
	}
	if !changesServer(st.Op) && st.Op != consensus.OpCatchUp {
		// The leader's steps are raft's business, never held up by a
		// step on this agent's server (the leader may be the target,
		// catching up).
		s.cfg.Go(func() { respond(s.takeSafely(ctx, st)) })
		return
	}
	if !s.busy.CompareAndSwap(false, true) {
		respond(consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: s.cfg.Node, Error: errBusy, Retry: true})
		return
	}
	s.cfg.Go(func() {
		defer s.busy.Store(false)
		respond(s.takeSafely(ctx, st))
	})
}

// admit checks that a verified step is fresh and of this agent's group.
func (s *Switcher) admit(st consensus.SwitchStep) error {
	if err := st.CheckFresh(s.cfg.Clock.Now()); err != nil {
		return err
	}
	if own := s.cfg.Terms.OwnGroup(); own == "" || st.Group != own {
		return fmt.Errorf("the step is of raft group %s; this agent follows %q", st.Group, own)
	}
	return nil
}

// takeSafely takes a step; a panic is a failed step.
func (s *Switcher) takeSafely(ctx context.Context, st consensus.SwitchStep) (ans consensus.SwitchAnswer) {
	ans = consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: s.cfg.Node}
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Log.Error("switchover step: recovered from a panic", "op", st.Op, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			ans.OK, ans.Error = false, fmt.Sprintf("panic: %v", r)
		}
	}()
	s.stats.Taken.Add(1)
	s.cfg.Log.Info("switchover step", "op", st.Op, "id", st.ID, "cluster", st.Cluster, "by", st.By, "old", st.Old, "target", st.Target, "from_term", st.From)
	err := s.take(ctx, st, &ans)
	if s.cfg.CheckNow != nil && changesServer(st.Op) {
		// The step changed the server: publish its new state now, not
		// at the next interval (the leader waits to see it read-only,
		// the routers to see the target writable).
		s.cfg.CheckNow()
	}
	if err != nil {
		var r retryable
		ans.Error, ans.Retry = err.Error(), errors.As(err, &r)
		s.cfg.Log.Warn("switchover step failed", "op", st.Op, "id", st.ID, "cluster", st.Cluster, "error", err)
	}
	ans.OK = err == nil
	return ans
}

// changesServer reports whether op changes the local server.
func changesServer(op string) bool {
	switch op {
	case consensus.OpDemote, consensus.OpRestore, consensus.OpPromote, consensus.OpRepoint, consensus.OpSurvey, consensus.OpResume:
		return true
	}
	return false
}

// take takes one step on this agent's server, or in the quorum for the
// leader's steps, filling in ans.
func (s *Switcher) take(ctx context.Context, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	switch st.Op {
	case consensus.OpBegin:
		return s.beginIntent(ctx, st)
	case consensus.OpGrant:
		t, err := s.grant(ctx, st)
		ans.Term = t
		return err
	case consensus.OpEnd:
		return s.endIntent(ctx, st)
	case consensus.OpFailover:
		return s.failoverAsked(ctx, st, ans)
	}
	act := s.cfg.Actuator
	if act == nil {
		return errors.New("this agent probes no database server")
	}
	switch st.Op {
	case consensus.OpDemote, consensus.OpRestore:
		return s.demoteOrRestore(ctx, act, st, ans)
	case consensus.OpCatchUp:
		if st.Target != s.cfg.Node {
			return fmt.Errorf("%s is not the target %s", s.cfg.Node, st.Target)
		}
		return act.CatchUp(ctx, st.GTID, time.Duration(st.WaitMS)*time.Millisecond)
	case consensus.OpPromote:
		return s.promoteHere(ctx, act, st, ans)
	case consensus.OpRepoint:
		return s.repointHere(ctx, act, st, ans)
	case consensus.OpSurvey:
		return s.surveyHere(ctx, act, st, ans)
	case consensus.OpResume:
		return s.resumeHere(ctx, act, st)
	}
	return fmt.Errorf("unknown step %q", st.Op)
}

// demoteOrRestore sets the old writer read-only (demote) or writable
// again (restore), when it holds term st.From.
func (s *Switcher) demoteOrRestore(ctx context.Context, act Actuator, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	self := s.cfg.Node
	if st.Old != self {
		return fmt.Errorf("%s is not the old writer %s", self, st.Old)
	}
	if t := s.cfg.Terms.View().Terms[st.Cluster]; t.Number != st.From || t.Writer != self {
		return fmt.Errorf("this node does not hold term %d of %s (it knows term %d, held by %s)", st.From, st.Cluster, t.Number, t.Writer)
	}
	if st.Op == consensus.OpRestore {
		s.setDemoted(st.Cluster, 0)
		if err := act.Unfence(ctx); err != nil {
			return err
		}
		s.history(st, "read-only", "writable", "switchover abandoned, restored by "+st.By+": writable again")
		return nil
	}
	s.setDemoted(st.Cluster, st.From)
	res, gtid, err := act.Demote(ctx)
	ans.GTID, ans.Killed = gtid, res.Killed
	if err != nil {
		return err
	}
	s.history(st, "writable", "read-only", fmt.Sprintf("switchover to %s by %s: read-only at %s, %d client connections killed", st.Target, st.By, gtid, res.Killed))
	return nil
}

// promoteHere makes the target writable once it holds term From+1.
func (s *Switcher) promoteHere(ctx context.Context, act Actuator, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	if st.Target != s.cfg.Node {
		return fmt.Errorf("%s is not the target %s", s.cfg.Node, st.Target)
	}
	if err := s.waitHeld(ctx, st.Cluster, st.From+1); err != nil {
		return err
	}
	_, tm, err := act.Promote(ctx)
	if err != nil {
		return err
	}
	ans.Timers = replTimers(tm)
	s.unhold(st.Cluster)
	s.history(st, "read-only", "writable", fmt.Sprintf("switchover from %s by %s: holds term %d, replication reset, read_only=OFF", st.Old, st.By, st.From+1))
	return nil
}

// repointHere makes this server replicate from the target.
func (s *Switcher) repointHere(ctx context.Context, act Actuator, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	self := s.cfg.Node
	if st.Target == self {
		return errors.New("the target does not replicate from itself")
	}
	src := fence.Source{Addr: st.Addr, FormerWriter: st.Old == self, User: s.cfg.ReplUser, Password: s.cfg.ReplPassword}
	src.Timers = fenceTimers(st.Timers)
	if err := act.Repoint(ctx, src); err != nil {
		if errors.Is(err, fence.ErrNoReplicationAccount) {
			return fmt.Errorf("%w: set mysql.replication_user and mysql.replication_password_file on %s", err, self)
		}
		return err
	}
	s.unhold(st.Cluster)
	ans.Detail = "replicates from " + st.Target + " (" + st.Addr + ")"
	return nil
}

// heldEvery is how often waitHeld looks at the terms again.
const heldEvery = 50 * time.Millisecond

// waitHeld waits until this agent knows that it holds term number of
// cluster: the grant reaches a voter's FSM a moment after the leader's.
func (s *Switcher) waitHeld(ctx context.Context, cluster string, number uint64) error {
	clk := s.cfg.Clock
	deadline := clk.Now().Add(promoteWait)
	for {
		t := s.cfg.Terms.View().Terms[cluster]
		switch {
		case t.Number == number && t.Writer == s.cfg.Node:
			return nil
		case t.Number > number:
			return fmt.Errorf("term %d of %s is already past %d (held by %s)", t.Number, cluster, number, t.Writer)
		case clk.Now().After(deadline):
			return fmt.Errorf("this node does not hold term %d of %s after %s (it knows term %d, held by %s)", number, cluster, promoteWait, t.Number, t.Writer)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(heldEvery):
		}
	}
}

// replTimers are a server's replication timers as steps carry them (nil
// when none is known).
func replTimers(tm fence.Timers) *consensus.ReplTimers {
	if tm.ConnectRetry <= 0 && tm.HeartbeatPeriod <= 0 {
		return nil
	}
	return &consensus.ReplTimers{ConnectRetry: min(tm.ConnectRetry, 86400), HeartbeatMS: min(int64(tm.HeartbeatPeriod*1000), 4294967000)}
}

// fenceTimers are timers a step carries, for a re-point (zero: keep the
// server's).
func fenceTimers(t *consensus.ReplTimers) fence.Timers {
	if t == nil {
		return fence.Timers{}
	}
	return fence.Timers{ConnectRetry: t.ConnectRetry, HeartbeatPeriod: float64(t.HeartbeatMS) / 1000}
}
