package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
)

// switchParts is this agent's part in switchovers (docs/consensus.md,
// "Switchover"): the steps it takes when another agent's switchover sends
// it one (switchstep.go), and the switchover it runs itself when asked
// through the API (switchover.go).
type switchParts struct {
	// busy is set while a step runs: one at a time; a step that arrives
	// meanwhile is answered "busy" and sent again.
	busy atomic.Bool
	// running is set while this agent runs a switchover.
	running atomic.Bool

	mu sync.Mutex // guards: answers, order, demoted
	// answers are the answers to the steps taken, by "ID/op", so that a
	// step sent again (its answer was lost) gets the same answer and is
	// not taken twice. Bounded: the oldest go first.
	answers map[string][]byte
	order   []string
	// demoted is the term of each cluster a switchover demoted this server
	// in: the return of contact after a lease fence must not make it
	// writable again (package fencing).
	demoted map[string]uint64

	// replUser and replPassword (mysql.replication_user and
	// replication_password_file) are the account a former writer
	// replicates from the new one with; "" keeps the server's own.
	replUser, replPassword string

	taken, refused atomic.Uint64
}

// maxSwitchAnswers bounds the remembered answers.
const maxSwitchAnswers = 64

// promoteWait bounds how long a target waits to learn that it holds the
// new term before it refuses to take writes.
const promoteWait = 10 * time.Second

func newSwitchParts() switchParts {
	return switchParts{answers: map[string][]byte{}, demoted: map[string]uint64{}}
}

func (s *switchParts) cached(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.answers[key]
	return b, ok
}

func (s *switchParts) remember(key string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.answers[key]; ok {
		return
	}
	s.answers[key] = b
	s.order = append(s.order, key)
	if len(s.order) > maxSwitchAnswers {
		delete(s.answers, s.order[0])
		s.order = s.order[1:]
	}
}

// setDemoted notes (term > 0) or forgets (0) that a switchover demoted
// this server in cluster at term.
func (s *switchParts) setDemoted(cluster string, term uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if term == 0 {
		delete(s.demoted, cluster)
		return
	}
	s.demoted[cluster] = term
}

// wasDemoted reports whether a switchover demoted this server in cluster
// at term or later.
func (s *switchParts) wasDemoted(cluster string, term uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.demoted[cluster]
	return ok && d >= term
}

// answerSwitch takes a switchover step addressed to this agent, on a
// goroutine of its own (a step may wait for replication), and answers it.
// A step that does not verify is not answered: only the holder of the
// consensus key runs switchovers.
func (a *Agent) answerSwitch(ctx context.Context, q *serf.Query) {
	sw := &a.cons.sw
	st, err := consensus.DecodeSwitchStep(q.Payload, a.cons.terms.Verify())
	if err != nil {
		sw.refused.Add(1)
		a.log.Warn("switchover step refused", "error", err)
		return
	}
	if st.Node != a.cfg.Node {
		return
	}
	key := st.ID + "/" + st.Op
	if b, ok := sw.cached(key); ok {
		_ = q.Respond(b)
		return
	}
	respond := func(ans consensus.SwitchAnswer) {
		b, err := consensus.EncodeSwitchAnswer(a.cons.terms.Signer(), ans)
		if err != nil {
			a.log.Error("switchover answer not encoded", "op", st.Op, "error", err)
			return
		}
		if !ans.Retry {
			sw.remember(key, b)
		}
		if err := q.Respond(b); err != nil {
			a.log.Warn("switchover answer not sent", "op", st.Op, "id", st.ID, "error", err)
		}
	}
	if err := st.CheckFresh(a.clock.Now()); err != nil {
		sw.refused.Add(1)
		respond(consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: a.cfg.Node, Error: err.Error()})
		return
	}
	if own := a.cons.terms.Groups().Own; own == "" || st.Group != own {
		sw.refused.Add(1)
		respond(consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: a.cfg.Node,
			Error: fmt.Sprintf("the step is of raft group %s; this agent follows %q", st.Group, own)})
		return
	}
	if !sw.busy.CompareAndSwap(false, true) {
		respond(consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: a.cfg.Node, Error: errBusy, Retry: true})
		return
	}
	a.life.wg.Add(1)
	go func() {
		defer a.life.wg.Done()
		defer sw.busy.Store(false)
		respond(a.takeStepSafely(ctx, st))
	}()
}

// retryable marks an error after which the step may be sent again.
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

// errBusy is the answer to a step that arrives while another runs.
const errBusy = "busy with another switchover step"

// takeStepSafely takes a step; a panic is a failed step.
func (a *Agent) takeStepSafely(ctx context.Context, st consensus.SwitchStep) (ans consensus.SwitchAnswer) {
	ans = consensus.SwitchAnswer{ID: st.ID, Op: st.Op, Node: a.cfg.Node}
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("switchover step: recovered from a panic", "op", st.Op, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			ans.OK, ans.Error = false, fmt.Sprintf("panic: %v", r)
		}
	}()
	a.cons.sw.taken.Add(1)
	a.log.Info("switchover step", "op", st.Op, "id", st.ID, "cluster", st.Cluster, "by", st.By, "old", st.Old, "target", st.Target, "from_term", st.From)
	err := a.takeStep(ctx, st, &ans)
	if a.probe != nil && st.Op != consensus.OpGrant && st.Op != consensus.OpCatchUp {
		// The step changed the server: publish its new state now, not
		// at the next interval (the leader waits to see it read-only,
		// the routers to see the target writable).
		a.probe.CheckNow()
	}
	if err != nil {
		var r retryable
		ans.Error, ans.Retry = err.Error(), errors.As(err, &r)
		a.log.Warn("switchover step failed", "op", st.Op, "id", st.ID, "cluster", st.Cluster, "error", err)
	}
	ans.OK = err == nil
	return ans
}

// takeStep takes one step on this agent's server (or, for the grant, in
// the quorum), filling in ans.
func (a *Agent) takeStep(ctx context.Context, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	if st.Op == consensus.OpGrant {
		t, err := a.grantSwitch(st)
		ans.Term = t
		return err
	}
	act := a.cons.act // the agent's one actuator, made with the probe
	if a.probe == nil || act == nil {
		return errors.New("this agent probes no database server")
	}
	self := a.cfg.Node
	switch st.Op {
	case consensus.OpDemote, consensus.OpRestore:
		if st.Old != self {
			return fmt.Errorf("%s is not the old writer %s", self, st.Old)
		}
		if t := a.cons.terms.View().Terms[st.Cluster]; t.Number != st.From || t.Writer != self {
			return fmt.Errorf("this node does not hold term %d of %s (it knows term %d, held by %s)", st.From, st.Cluster, t.Number, t.Writer)
		}
		if st.Op == consensus.OpRestore {
			a.cons.sw.setDemoted(st.Cluster, 0)
			if err := act.Unfence(ctx); err != nil {
				return err
			}
			a.switchHistory(st, "read-only", "writable", "switchover abandoned by "+st.By+": writable again")
			return nil
		}
		a.cons.sw.setDemoted(st.Cluster, st.From)
		res, gtid, err := act.Demote(ctx)
		ans.GTID, ans.Killed = gtid, res.Killed
		if err != nil {
			return err
		}
		a.switchHistory(st, "writable", "read-only", fmt.Sprintf("switchover to %s by %s: read-only at %s, %d client connections killed", st.Target, st.By, gtid, res.Killed))
		return nil
	case consensus.OpCatchUp:
		if st.Target != self {
			return fmt.Errorf("%s is not the target %s", self, st.Target)
		}
		return act.CatchUp(ctx, st.GTID, time.Duration(st.WaitMS)*time.Millisecond)
	case consensus.OpPromote:
		if st.Target != self {
			return fmt.Errorf("%s is not the target %s", self, st.Target)
		}
		if err := a.waitHeld(ctx, st.Cluster, st.From+1); err != nil {
			return err
		}
		if _, err := act.Promote(ctx); err != nil {
			return err
		}
		a.switchHistory(st, "read-only", "writable", fmt.Sprintf("switchover from %s by %s: holds term %d, replication reset, read_only=OFF", st.Old, st.By, st.From+1))
		return nil
	case consensus.OpRepoint:
		if st.Target == self {
			return errors.New("the target does not replicate from itself")
		}
		src := fence.Source{Addr: st.Addr, FormerWriter: st.Old == self, User: a.cons.sw.replUser, Password: a.cons.sw.replPassword}
		if err := act.Repoint(ctx, src); err != nil {
			if errors.Is(err, fence.ErrNoReplicationAccount) {
				return fmt.Errorf("%w: set mysql.replication_user and mysql.replication_password_file on %s", err, self)
			}
			return err
		}
		ans.Detail = "replicates from " + st.Target + " (" + st.Addr + ")"
		return nil
	}
	return fmt.Errorf("unknown step %q", st.Op)
}

// waitHeld waits until this agent knows that it holds term number of
// cluster: the grant reaches a voter's FSM a moment after the leader's.
func (a *Agent) waitHeld(ctx context.Context, cluster string, number uint64) error {
	deadline := time.Now().Add(promoteWait)
	for {
		t := a.cons.terms.View().Terms[cluster]
		switch {
		case t.Number == number && t.Writer == a.cfg.Node:
			return nil
		case t.Number > number:
			return fmt.Errorf("term %d of %s is already past %d (held by %s)", t.Number, cluster, number, t.Writer)
		case time.Now().After(deadline):
			return fmt.Errorf("this node does not hold term %d of %s after %s (it knows term %d, held by %s)", number, cluster, promoteWait, t.Number, t.Writer)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// grantSwitch is the raft leader's step: it grants term From+1 to the
// target, once its own view shows the old writer read-only (else its term
// rules would hand the term straight back to the old writer, still
// writable as far as it knows), and the target is a voter. A grant that
// already happened is answered again.
func (a *Agent) grantSwitch(st consensus.SwitchStep) (uint64, error) {
	n := a.cons.node
	if n == nil || !n.IsLeader() {
		return 0, retryable{errors.New("this agent is not the raft leader")}
	}
	cur := n.FSM().Term(st.Cluster)
	switch {
	case cur.Number == st.From+1 && cur.Writer == st.Target:
		return cur.Number, nil
	case cur.Number != st.From || cur.Writer != st.Old:
		return 0, fmt.Errorf("the term of %s is %d held by %s, not %d held by %s", st.Cluster, cur.Number, cur.Writer, st.From, st.Old)
	}
	if _, ok := n.Voters()[st.Target]; !ok {
		return 0, fmt.Errorf("%s is not a voter: only a voter can hold the writer term", st.Target)
	}
	for _, m := range a.poolMembers() {
		if m.Name == st.Old && m.Health != nil && !m.Health.ReadOnly {
			return 0, retryable{fmt.Errorf("the leader still sees %s writable (its read_only=ON has not reached the gossip yet)", st.Old)}
		}
	}
	why := fmt.Sprintf("switchover from %s (term %d), run by %s", st.Old, st.From, st.By)
	g := pool.Grant{Expect: st.From, Term: pool.Term{Cluster: st.Cluster, Number: st.From + 1, Writer: st.Target, Addr: st.Addr, Granted: a.clock.Now(), Why: why}}
	if err := n.ProveWriter(context.TODO(), g.Term); err != nil {
		return 0, retryable{fmt.Errorf("%s did not prove it is the voter of that name: %w", st.Target, err)}
	}
	t, err := n.Grant(context.TODO(), g) // no deadline: raft takes the entry within 5 s, as before
	if err != nil {
		return 0, err
	}
	a.log.Info("consensus: writer term granted", "cluster", t.Cluster, "term", t.Number, "writer", t.Writer, "addr", t.Addr, "why", t.Why)
	a.cons.terms.Publish([]pool.Term{t})
	return t.Number, nil
}

// switchHistory records what a step did to this server in the history
// (kind fence: the server's writability changed).
func (a *Agent) switchHistory(st consensus.SwitchStep, from, to, detail string) {
	if a.rep.hist == nil {
		return
	}
	a.rep.hist.Add(history.Entry{Time: a.clock.Now(), Kind: history.KindFence, Cluster: st.Cluster, Node: a.cfg.Node,
		From: from, To: to, Reason: "switchover", Detail: detail})
}
