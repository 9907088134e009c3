package switchover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/view"
)

// Step bounds.
const (
	// stepTimeout bounds one attempt at a quick step (an answer lost is
	// asked again), stepLimit all attempts at it.
	stepTimeout = 3 * time.Second
	stepLimit   = 15 * time.Second
	// promoteWait bounds how long a target waits to learn that it holds
	// the new term before it refuses to take writes.
	promoteWait = 10 * time.Second
	// intentMargin is what an intent's budget allows beyond the catch-up
	// wait: the demote, grant and promote steps at their limits, and the
	// re-points. A coordinator still at it past that is stuck, and the
	// leader finishes its switchover.
	intentMargin = 3*stepLimit + promoteWait + 2*stepTimeout + 15*time.Second
)

// plan is a switchover as planned from this agent's pool.
type plan struct {
	id, cluster  string
	from         uint64
	old, target  string
	addr, leader string
	group        string // the raft group the steps name
	by           string // the agent that runs it
	// others are the cluster's other db members (the old writer first),
	// which replicate from the target afterwards.
	others []string
	// failover: the old writer is dead; it is neither demoted, restored
	// nor re-pointed.
	failover bool
	// timers are the target's replication timers as the promote step
	// answered them: the re-pointed servers take them over.
	timers *consensus.ReplTimers
}

// step is the switchover's step op, addressed to node.
func (p plan) step(op, node string) consensus.SwitchStep {
	return consensus.SwitchStep{ID: p.id, Op: op, Node: node, By: p.by, Cluster: p.cluster, From: p.from,
		Old: p.old, Target: p.target, Addr: p.addr, Group: p.group}
}

// refuse is an error that stops a switchover before its first step.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", view.ErrSwitchover, fmt.Sprintf(format, args...))
}

// Switchover moves a cluster's writer to req.To, out before in: its
// intent is recorded in raft, the old writer is set read-only (its
// clients killed), the target waits until it has applied the old
// writer's last transaction, the quorum grants it the next term, it is
// made writable, the other servers replicate from it, the intent ends,
// and the routers report that they applied the term. Only a voter runs
// it: every step is signed with the consensus key. An error wrapping
// view.ErrSwitchover means nothing was done; a failure during the run is
// in the result's Error, with what it left.
func (s *Switcher) Switchover(ctx context.Context, req view.SwitchoverRequest) (view.Switchover, error) {
	req, err := req.Normalize()
	if err != nil {
		return view.Switchover{}, err
	}
	if !s.running.CompareAndSwap(false, true) {
		return view.Switchover{}, refuse("a switchover is already running on this agent")
	}
	defer s.running.Store(false)
	p, err := s.plan(req)
	if err != nil {
		return view.Switchover{}, err
	}
	// Once started, a switchover runs to its end (every wait is bounded):
	// a client that goes away (Ctrl-C) must not leave the old writer
	// demoted with nobody to restore it.
	ctx = context.WithoutCancel(ctx)
	t0 := s.cfg.Clock.Now()
	ans, err := s.begin(ctx, p, req)
	if err != nil {
		return view.Switchover{}, err
	}
	s.cfg.Log.Warn("switchover starting", "id", p.id, "cluster", p.cluster, "from", p.old, "to", p.target, "term", p.from)
	begun := view.SwitchStep{Name: "record the switchover in raft", Node: ans.Node, OK: true, Took: s.cfg.Clock.Since(t0),
		Detail: "the raft leader finishes it should this agent die"}
	if lag, _ := s.targetLag(req.To); lag != "" {
		begun.Detail += "; " + req.To + " behind by " + lag
	}
	res := s.run(ctx, p, req, begun)
	if res.Error != "" {
		s.cfg.Log.Error("switchover failed", "id", p.id, "cluster", p.cluster, "error", res.Error)
	} else {
		s.cfg.Log.Warn("switchover done", "id", p.id, "cluster", p.cluster, "writer", p.target, "term", res.Term,
			"read_only", res.ReadOnly, "routers_applied", len(res.Routers.Applied), "routers_pending", len(res.Routers.Pending))
	}
	return res, nil
}

// begin records the switchover's intent through the raft leader: from
// then on, any leader finishes it should this agent die.
func (s *Switcher) begin(ctx context.Context, p plan, req view.SwitchoverRequest) (consensus.SwitchAnswer, error) {
	st := p.step(consensus.OpBegin, p.leader)
	st.WaitMS = (req.CatchUp + intentMargin).Milliseconds()
	ans, err := s.sendLeader(ctx, st)
	if err != nil {
		return ans, refuse("the raft leader did not record the switchover: %v", err)
	}
	return ans, nil
}

// plan checks, on this agent's pool, that the switchover can start: the
// cluster follows a term whose holder is its writer now, the target is a
// passing reader and a voter, and there is a raft leader.
func (s *Switcher) plan(req view.SwitchoverRequest) (plan, error) {
	n := s.voter()
	if n == nil || s.cfg.Terms.Signer() == nil {
		return plan{}, refuse("this agent is not a voter: run shoal switchover on a db agent with the consensus key (it signs every step)")
	}
	c := switchCluster(s.cfg.Pool(), req.Cluster, req.To)
	switch {
	case c == nil && req.Cluster != "":
		return plan{}, &view.SwitchoverRequestError{Field: view.SwitchoverFieldCluster, Value: strconv.Quote(req.Cluster), Reason: "no such cluster in this agent's pool"}
	case c == nil:
		return plan{}, &view.SwitchoverRequestError{Field: view.SwitchoverFieldTo, Value: strconv.Quote(req.To), Reason: "not a db member of any cluster in this agent's pool"}
	case c.Term == nil:
		return plan{}, refuse("cluster %q follows no writer term (none of its db agents is a voter): switch over by setting read_only as before", c.Name)
	case c.Term.Number == 0:
		return plan{}, refuse("cluster %q has no writer term yet", c.Name)
	}
	t := *c.Term
	if req.To == t.Writer {
		return plan{}, refuse("%s already holds term %d of %q", req.To, t.Number, c.Name)
	}
	if len(c.Writers) != 1 || c.Writers[0].Name != t.Writer {
		return plan{}, refuse("cluster %q has no writer now (%s holds term %d but is %s): a switchover moves a working writer", c.Name, t.Writer, t.Number, outReason(c, t.Writer))
	}
	target, ok := findNode(c.Readers, req.To)
	if !ok {
		return plan{}, refuse("%s is not a reader of %q (%s): the target must be passing and caught up", req.To, c.Name, outReason(c, req.To))
	}
	if _, ok := n.Voters()[req.To]; !ok {
		return plan{}, refuse("%s is not a voter: only a voter can hold the writer term", req.To)
	}
	if lag, behind := s.targetLag(req.To); behind && !req.Force {
		return plan{}, refuse("%s is behind the writer %s (%s): every write would wait while it catches up; wait until it is within %s, or pass --force",
			req.To, t.Writer, lag, view.MaxSwitchoverLag)
	}
	if in, ok := n.FSM().Switch(c.Name); ok {
		return plan{}, refuse("switchover %s of %q (by %s, to %s) is not finished yet", in.ID, c.Name, in.By, in.Target)
	}
	leader := n.Status().Leader
	if leader == "" {
		return plan{}, refuse("there is no raft leader (no quorum): no term can be granted")
	}
	group := n.FSM().Group()
	if group == "" {
		return plan{}, refuse("the raft group has no ID yet (its first leader sets it): try again in a second")
	}
	p := plan{id: newID(), cluster: c.Name, from: t.Number, old: t.Writer, target: req.To, addr: target.Addr, leader: leader, group: group, by: s.cfg.Node}
	p.others = others(c, t.Writer, req.To)
	return p, nil
}

// targetLag is the target's lag as this agent judges it, and whether it
// is behind the writer by more than view.MaxSwitchoverLag.
func (s *Switcher) targetLag(name string) (string, bool) {
	if s.cfg.Lags == nil {
		return "", false
	}
	l, ok := s.cfg.Lags()[name]
	if !ok || l.Seconds == nil {
		return "", false
	}
	return l.Figures(), *l.Seconds > view.MaxSwitchoverLag.Seconds()
}

// others are a cluster's db members but target, old first: they
// replicate from the target after a switchover.
func others(c *pool.Cluster, old, target string) []string {
	seen := map[string]bool{target: true, old: true}
	out := []string{old}
	for _, l := range [][]pool.Node{c.Writers, c.Readers, c.Out} {
		for _, nd := range l {
			if !seen[nd.Name] {
				seen[nd.Name] = true
				out = append(out, nd.Name)
			}
		}
	}
	return out
}

// switchCluster is the named cluster, or the one to is a db member of.
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

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
