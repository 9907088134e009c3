package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/term"
	"github.com/shoaldb/shoal/internal/view"
)

// Switchover defaults and bounds (docs/consensus.md, "Switchover").
const (
	// DefaultSwitchCatchUp bounds the wait for the target to apply the old
	// writer's last transaction; the writes wait as long.
	DefaultSwitchCatchUp = 30 * time.Second
	// DefaultSwitchApplied bounds the wait for every router to apply the
	// new term.
	DefaultSwitchApplied = 10 * time.Second
	// MaxSwitchWait bounds either.
	MaxSwitchWait = 2 * time.Minute
	// switchStepTimeout bounds one attempt at a quick step (an answer
	// lost is asked again), switchStepLimit all attempts at it.
	switchStepTimeout = 3 * time.Second
	switchStepLimit   = 15 * time.Second
)

// switchPlan is a switchover as planned from this agent's pool.
type switchPlan struct {
	id, cluster  string
	from         uint64
	old, target  string
	addr, leader string
	group        string // the raft group the steps name
	// others are the cluster's other db members (the old writer first),
	// which replicate from the target afterwards.
	others []string
}

// refuse is an error that stops a switchover before its first step.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", view.ErrSwitchover, fmt.Sprintf(format, args...))
}

// Switchover moves a cluster's writer to req.To, out before in: the old
// writer is set read-only (its clients killed), the target waits until it
// has applied the old writer's last transaction, the quorum grants it the
// next term, it is made writable, the other servers replicate from it,
// and the routers report that they applied the term. Only a voter runs
// it: every step is signed with the consensus key. An error wrapping
// view.ErrSwitchover means nothing was done; a failure during the run is
// in the result's Error, with what it left.
func (a *Agent) Switchover(ctx context.Context, req view.SwitchoverRequest) (view.Switchover, error) {
	if req.CatchUp == 0 {
		req.CatchUp = DefaultSwitchCatchUp
	}
	if req.Applied == 0 {
		req.Applied = DefaultSwitchApplied
	}
	if req.CatchUp < 0 || req.CatchUp > MaxSwitchWait || req.Applied < 0 || req.Applied > MaxSwitchWait {
		return view.Switchover{}, refuse("the catch-up and router waits must be from 1s to %s", MaxSwitchWait)
	}
	sw := &a.cons.sw
	if !sw.running.CompareAndSwap(false, true) {
		return view.Switchover{}, refuse("a switchover is already running on this agent")
	}
	defer sw.running.Store(false)
	plan, err := a.planSwitchover(req)
	if err != nil {
		return view.Switchover{}, err
	}
	a.log.Warn("switchover starting", "id", plan.id, "cluster", plan.cluster, "from", plan.old, "to", plan.target, "term", plan.from)
	// Once started, a switchover runs to its end (every wait is bounded):
	// a client that goes away (Ctrl-C) must not leave the old writer
	// demoted with nobody to restore it.
	res := a.runSwitchover(context.WithoutCancel(ctx), plan, req)
	if res.Error != "" {
		a.log.Error("switchover failed", "id", plan.id, "cluster", plan.cluster, "error", res.Error)
	} else {
		a.log.Warn("switchover done", "id", plan.id, "cluster", plan.cluster, "writer", plan.target, "term", res.Term,
			"read_only", res.ReadOnly, "routers_applied", len(res.Routers.Applied), "routers_pending", len(res.Routers.Pending))
	}
	return res, nil
}

// planSwitchover checks, on this agent's pool, that the switchover can
// start: the cluster follows a term whose holder is its writer now, the
// target is a passing reader and a voter, and there is a raft leader.
func (a *Agent) planSwitchover(req view.SwitchoverRequest) (switchPlan, error) {
	n := a.cons.node
	if n == nil || a.cons.terms.Signer() == nil {
		return switchPlan{}, refuse("this agent is not a voter: run shoal switchover on a db agent with the consensus key (it signs every step)")
	}
	if req.To == "" {
		return switchPlan{}, refuse("no target: give --to NODE")
	}
	p := a.pool.router.Current().Pool
	c := switchCluster(p, req.Cluster, req.To)
	switch {
	case c == nil && req.Cluster != "":
		return switchPlan{}, &view.SwitchoverRequestError{Field: view.SwitchoverFieldCluster, Value: strconv.Quote(req.Cluster), Reason: "no such cluster in this agent's pool"}
	case c == nil:
		return switchPlan{}, &view.SwitchoverRequestError{Field: view.SwitchoverFieldTo, Value: strconv.Quote(req.To), Reason: "not a db member of any cluster in this agent's pool"}
	case c.Term == nil:
		return switchPlan{}, refuse("cluster %q follows no writer term (none of its db agents is a voter): switch over by setting read_only as before", c.Name)
	case c.Term.Number == 0:
		return switchPlan{}, refuse("cluster %q has no writer term yet", c.Name)
	}
	t := *c.Term
	if req.To == t.Writer {
		return switchPlan{}, refuse("%s already holds term %d of %q", req.To, t.Number, c.Name)
	}
	if len(c.Writers) != 1 || c.Writers[0].Name != t.Writer {
		return switchPlan{}, refuse("cluster %q has no writer now (%s holds term %d but is %s): a switchover moves a working writer", c.Name, t.Writer, t.Number, outReason(c, t.Writer))
	}
	target, ok := findNode(c.Readers, req.To)
	if !ok {
		return switchPlan{}, refuse("%s is not a reader of %q (%s): the target must be passing and caught up", req.To, c.Name, outReason(c, req.To))
	}
	if _, ok := n.Voters()[req.To]; !ok {
		return switchPlan{}, refuse("%s is not a voter: only a voter can hold the writer term", req.To)
	}
	leader := n.Status().Leader
	if leader == "" {
		return switchPlan{}, refuse("there is no raft leader (no quorum): no term can be granted")
	}
	group := n.FSM().Group()
	if group == "" {
		return switchPlan{}, refuse("the raft group has no ID yet (its first leader sets it): try again in a second")
	}
	plan := switchPlan{id: newSwitchID(), cluster: c.Name, from: t.Number, old: t.Writer, target: req.To, addr: target.Addr, leader: leader, group: group}
	seen := map[string]bool{req.To: true, t.Writer: true}
	plan.others = []string{t.Writer}
	for _, l := range [][]pool.Node{c.Readers, c.Out} {
		for _, nd := range l {
			if !seen[nd.Name] {
				seen[nd.Name] = true
				plan.others = append(plan.others, nd.Name)
			}
		}
	}
	return plan, nil
}

// switchCluster is the named cluster, or the one req.To is a db member of.
func switchCluster(p *pool.Pool, name, to string) *pool.Cluster {
	if p == nil {
		return nil
	}
	if name != "" {
		return p.Cluster(name)
	}
	for i := range p.Clusters {
		c := &p.Clusters[i]
		for _, l := range [][]pool.Node{c.Writers, c.Readers, c.Out} {
			if _, ok := findNode(l, to); ok {
				return c
			}
		}
	}
	return nil
}

func findNode(l []pool.Node, name string) (pool.Node, bool) {
	for _, n := range l {
		if n.Name == name {
			return n, true
		}
	}
	return pool.Node{}, false
}

// outReason says why name is not where a switchover needs it.
func outReason(c *pool.Cluster, name string) string {
	if n, ok := findNode(c.Out, name); ok {
		if n.Detail != "" {
			return fmt.Sprintf("out: %s, %s", n.Reason, n.Detail)
		}
		return fmt.Sprintf("out: %s", n.Reason)
	}
	if _, ok := findNode(c.Writers, name); ok {
		return "the writer"
	}
	return "not a member of the cluster"
}

func newSwitchID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runSwitchover takes the steps of plan and says what each did.
func (a *Agent) runSwitchover(ctx context.Context, plan switchPlan, req view.SwitchoverRequest) view.Switchover {
	// The cluster takes no writes from the demote step on: ReadOnly
	// counts from here.
	start := time.Now()
	res := view.Switchover{ID: plan.id, Cluster: plan.cluster, Old: plan.old, Target: plan.target, From: plan.from}
	defer func() { res.Took = time.Since(start) }()
	step := func(op, node string) consensus.SwitchStep {
		return consensus.SwitchStep{ID: plan.id, Op: op, Node: node, By: a.cfg.Node, Cluster: plan.cluster, From: plan.from,
			Old: plan.old, Target: plan.target, Addr: plan.addr, Group: plan.group}
	}
	record := func(name, node string, took time.Duration, err error, detail string) bool {
		s := view.SwitchStep{Name: name, Node: node, OK: err == nil, Took: took, Detail: detail}
		if err != nil {
			s.Detail = err.Error()
		}
		res.Steps = append(res.Steps, s)
		return err == nil
	}
	// restore makes the old writer writable again when the switchover
	// gives up before the grant.
	restore := func(why error) {
		t0 := time.Now()
		_, err := a.sendStep(ctx, step(consensus.OpRestore, plan.old), switchStepTimeout, switchStepLimit)
		res.ReadOnly = time.Since(start)
		if err != nil {
			record("restore the old writer", plan.old, time.Since(t0), err, "")
			res.Error = fmt.Sprintf("%v; the old writer %s could NOT be made writable again (%v): no server takes writes until an operator sets read_only=OFF on it", why, plan.old, err)
			return
		}
		record("restore the old writer", plan.old, time.Since(t0), nil, "read_only=OFF: it is the writer again")
		res.Error = fmt.Sprintf("%v; the old writer %s is writable again (term %d unchanged)", why, plan.old, plan.from)
	}

	// 1. The old writer: read-only, clients killed, its position.
	t0 := time.Now()
	ans, err := a.sendStep(ctx, step(consensus.OpDemote, plan.old), switchStepTimeout, switchStepLimit)
	if !record("set the old writer read-only", plan.old, time.Since(t0), err,
		fmt.Sprintf("read-only at GTID %s, %d client connections killed", orNone(ans.GTID), ans.Killed)) {
		restore(fmt.Errorf("demote %s: %w", plan.old, err))
		return res
	}
	// 2. The target catches up.
	t0 = time.Now()
	cu := step(consensus.OpCatchUp, plan.target)
	cu.GTID, cu.WaitMS = ans.GTID, req.CatchUp.Milliseconds()
	_, err = a.sendStep(ctx, cu, req.CatchUp+switchStepTimeout, req.CatchUp+switchStepLimit)
	if !record("wait for the target to catch up", plan.target, time.Since(t0), err, "applied "+orNone(ans.GTID)) {
		restore(fmt.Errorf("%s did not catch up: %w", plan.target, err))
		return res
	}
	// 3. The quorum grants the next term (the leader's step).
	t0 = time.Now()
	ans, err = a.sendGrant(ctx, step(consensus.OpGrant, plan.leader))
	if !record("grant the next writer term", ans.Node, time.Since(t0), err, fmt.Sprintf("term %d to %s", ans.Term, plan.target)) {
		restore(fmt.Errorf("grant: %w", err))
		return res
	}
	res.Term = ans.Term
	// 4. The target takes writes once it knows it holds the term.
	t0 = time.Now()
	_, err = a.sendStep(ctx, step(consensus.OpPromote, plan.target), promoteWait+switchStepTimeout, promoteWait+switchStepLimit)
	res.ReadOnly = time.Since(start)
	if !record("make the target writable", plan.target, time.Since(t0), err, "replication reset, read_only=OFF") {
		res.Error = fmt.Sprintf("term %d was granted to %s but it could not be made writable (%v): no server takes writes until an operator sets read_only=OFF on %s", res.Term, plan.target, err, plan.target)
		return res
	}
	// 5. The other servers replicate from the target (at once, each on
	// its own: one that fails is reported, the switchover stands).
	a.repointAll(ctx, plan, step, &res)
	// 6. Every router applies the new term.
	res.Routers = a.waitApplied(ctx, plan.cluster, res.Term, plan.target, req.Applied).view()
	return res
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// repointAll sends the repoint step to each of plan.others at once and
// records each answer as a step.
func (a *Agent) repointAll(ctx context.Context, plan switchPlan, step func(op, node string) consensus.SwitchStep, res *view.Switchover) {
	type out struct {
		node string
		took time.Duration
		err  error
		ans  consensus.SwitchAnswer
	}
	outs := make([]out, len(plan.others))
	var wg sync.WaitGroup
	for i, node := range plan.others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ans, err := a.sendStep(ctx, step(consensus.OpRepoint, node), switchStepTimeout, 2*switchStepTimeout)
			outs[i] = out{node, time.Since(t0), err, ans}
		}()
	}
	wg.Wait()
	for _, o := range outs {
		s := view.SwitchStep{Name: "replicate from the new writer", Node: o.node, OK: o.err == nil, Took: o.took, Detail: o.ans.Detail}
		if o.err != nil {
			s.Detail = o.err.Error()
		}
		res.Steps = append(res.Steps, s)
	}
}

// sendGrant sends the grant step to the raft leader, following the
// leadership if it moves, until switchStepLimit.
func (a *Agent) sendGrant(ctx context.Context, st consensus.SwitchStep) (consensus.SwitchAnswer, error) {
	deadline := time.Now().Add(switchStepLimit)
	for {
		ans, err := a.sendStep(ctx, st, switchStepTimeout, time.Until(deadline))
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return ans, err
		}
		leader := a.cons.node.Status().Leader
		if leader == "" || leader == st.Node {
			return ans, err
		}
		st.Node = leader
	}
}

// errNoAnswer is sendStep's error when the node never answered.
var errNoAnswer = errors.New("no answer")

// sendStep sends a step to its node and returns the node's answer: it is
// sent again while no answer comes (each attempt waits up to timeout) or
// the answer says to retry, until limit; an answer that is not OK is an
// error. Answers to every step but repoint must be signed.
func (a *Agent) sendStep(ctx context.Context, st consensus.SwitchStep, timeout, limit time.Duration) (consensus.SwitchAnswer, error) {
	deadline := time.Now().Add(limit)
	var last error = errNoAnswer
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if !time.Now().Add(100 * time.Millisecond).Before(deadline) {
				return consensus.SwitchAnswer{Node: st.Node}, fmt.Errorf("%s on %s: %w (after %d attempts in %s)", st.Op, st.Node, last, attempt, limit)
			}
			select {
			case <-ctx.Done():
				return consensus.SwitchAnswer{Node: st.Node}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		st.Expires = a.clock.Now().Add(timeout + 30*time.Second)
		ans, err := a.askStep(ctx, st, min(timeout, time.Until(deadline)+time.Second))
		switch {
		case err != nil:
			last = err
		case ans.Retry:
			last = errors.New(ans.Error)
		case !ans.OK:
			return ans, fmt.Errorf("%s on %s: %s", st.Op, st.Node, ans.Error)
		default:
			return ans, nil
		}
	}
}

// askStep sends one attempt of a step and waits for st.Node's answer.
func (a *Agent) askStep(ctx context.Context, st consensus.SwitchStep, timeout time.Duration) (consensus.SwitchAnswer, error) {
	b, err := consensus.EncodeSwitchStep(a.cons.terms.Signer(), st)
	if err != nil {
		return consensus.SwitchAnswer{}, err
	}
	resp, err := a.Query(consensus.SwitchQuery, b, &serf.QueryParam{FilterNodes: []string{st.Node}, Timeout: timeout, RelayFactor: 2})
	if err != nil {
		return consensus.SwitchAnswer{}, fmt.Errorf("send: %w", err)
	}
	var ans consensus.SwitchAnswer
	err = fmt.Errorf("%w within %s", errNoAnswer, timeout)
	term.EachAnswer(ctx, resp, func(r serf.NodeResponse) bool {
		if r.From != st.Node {
			return true
		}
		ans, err = a.checkAnswer(st, r.Payload)
		return false
	})
	if ctx.Err() != nil {
		return consensus.SwitchAnswer{}, ctx.Err()
	}
	return ans, err
}

// checkAnswer decodes a node's answer to st and checks that it is one.
func (a *Agent) checkAnswer(st consensus.SwitchStep, payload []byte) (consensus.SwitchAnswer, error) {
	ans, err := consensus.DecodeSwitchAnswer(payload, a.cons.terms.Verify())
	switch {
	case err != nil:
		return consensus.SwitchAnswer{}, fmt.Errorf("answer: %w", err)
	case ans.ID != st.ID || ans.Op != st.Op || ans.Node != st.Node:
		return consensus.SwitchAnswer{}, fmt.Errorf("answer for %s/%s from %s, not this step", ans.Op, ans.ID, ans.Node)
	case !ans.Signed && st.Op != consensus.OpRepoint:
		return consensus.SwitchAnswer{}, errors.New("unsigned answer: the node has no consensus key")
	}
	return ans, nil
}

// view converts what waitApplied saw (Applied is sorted already).
func (r AppliedReport) view() view.RoutersApplied {
	return view.RoutersApplied{Applied: r.Applied, Pending: r.Pending, Unreachable: r.Unreachable, Took: r.Took}
}
