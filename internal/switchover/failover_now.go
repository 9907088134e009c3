package switchover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// failoverAskTimeout bounds a failover asked of the leader by another
// voter: the survey's drain and every step after it.
const failoverAskTimeout = surveyDrain + 3*stepLimit + promoteWait

// FailoverNow is `shoal failover`: the failover of a cluster whose writer
// is dead, by the rules of the leader's own (the same witnesses, the same
// survey and pick), whether or not consensus.failover is on. With DryRun
// it only says what it would do, from the gossiped positions (no survey:
// that stops the replicas' IO threads). A voter that does not lead asks
// the leader to run it (a signed step). An error wrapping
// view.ErrFailoverRequest is the request's fault, one wrapping
// view.ErrFailover the fleet's state.
func (s *Switcher) FailoverNow(ctx context.Context, req view.FailoverRequest) (view.Failover, error) {
	n := s.voter()
	if n == nil || s.cfg.Terms.Signer() == nil {
		return view.Failover{}, fmt.Errorf("%w: this agent is not a voter: run shoal failover on a db agent with the consensus key", view.ErrFailover)
	}
	// The terms this agent routes by (its FSM may lag a moment behind
	// them); the leader checks the term again before it acts.
	t, err := failoverTerm(s.cfg.Terms.View().Terms, req.Cluster)
	if err != nil {
		return view.Failover{}, err
	}
	members := s.cfg.Members()
	v := writerDeath(t, members)
	res := view.Failover{Cluster: t.Cluster, Writer: t.Writer, Term: t.Number, Dead: v.Dead, Death: v.Why, DryRun: req.DryRun}
	ch := choose(gossipCandidates(s.candidates(n, t), members), oldPosition(members, t.Writer))
	res.Pick, res.Candidates = ch.Pick, failoverCandidates(ch, members)
	res.Why = "by the gossiped positions, no candidate may be promoted (a run surveys each candidate first)"
	if ch.Pick != "" {
		res.Why = fmt.Sprintf("by the gossiped positions, %s has every transaction the other candidates have (a run surveys each candidate first: its own position, what it received, errant transactions, its promotion rule)", ch.Pick)
	}
	if req.DryRun {
		return res, nil
	}
	if !v.Dead {
		return res, fmt.Errorf("%w: %s (term %d of %q) is not dead by its witnesses: %s", view.ErrFailover, t.Writer, t.Number, t.Cluster, v.Why)
	}
	ctx = context.WithoutCancel(ctx) // once started, it runs to its end
	if n.IsLeader() {
		if !s.claimFailover(t.Cluster) {
			return res, fmt.Errorf("%w: a failover of %q is running on this agent", view.ErrFailover, t.Cluster)
		}
		s.failover(ctx, n, t, "requested (shoal failover): "+v.Why)
		s.releaseFailover(t.Cluster, true)
		return s.failoverResult(n, res, t), nil
	}
	leader := n.Status().Leader
	if leader == "" {
		return res, fmt.Errorf("%w: there is no raft leader (no quorum): no term can be granted", view.ErrFailover)
	}
	p := plan{id: newID(), cluster: t.Cluster, from: t.Number, old: t.Writer, target: leader, addr: t.Addr, leader: leader,
		group: s.cfg.Terms.OwnGroup(), by: s.cfg.Node}
	ans, err := s.sendStep(ctx, p.step(consensus.OpFailover, leader), failoverAskTimeout, failoverAskTimeout+stepTimeout)
	if err != nil {
		return res, fmt.Errorf("%w: the raft leader %s did not run it: %v", view.ErrFailover, leader, err)
	}
	res.Why, res.Outcome = "", ans.Detail
	if ans.Term > t.Number {
		// This voter's FSM learns the grant a moment after the leader's.
		deadline := s.cfg.Clock.Now().Add(promoteWait)
		for cur := n.FSM().Term(t.Cluster); ; cur = n.FSM().Term(t.Cluster) {
			if cur.Number >= ans.Term {
				res.Done, res.NewTerm, res.Pick = cur.Number == ans.Term, cur.Number, cur.Writer
				break
			}
			if s.cfg.Clock.Now().After(deadline) {
				res.Done, res.NewTerm, res.Pick = true, ans.Term, "" // granted, writer not known here yet
				break
			}
			<-s.cfg.Clock.After(heldEvery)
		}
	}
	return res, nil
}

// failoverResult fills in what a run did: the term now, the decision
// (which replaces the gossip's hint).
func (s *Switcher) failoverResult(n Voter, res view.Failover, t pool.Term) view.Failover {
	res.Why = ""
	cur := n.FSM().Term(t.Cluster)
	res.Done = cur.Number > t.Number && cur.Writer != t.Writer
	if res.Done {
		res.NewTerm, res.Pick = cur.Number, cur.Writer
	}
	res.Outcome = s.LastFailover()[t.Cluster]
	return res
}

// failoverAsked is the leader's failover step: a voter ran shoal failover.
func (s *Switcher) failoverAsked(ctx context.Context, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	n, err := s.leader()
	if err != nil {
		return err
	}
	t := n.FSM().Term(st.Cluster)
	if t.Number != st.From || t.Writer != st.Old {
		return fmt.Errorf("term %d of %s is held by %s, not %d by %s", t.Number, st.Cluster, t.Writer, st.From, st.Old)
	}
	v := writerDeath(t, s.cfg.Members())
	if !v.Dead {
		return fmt.Errorf("%s is not dead by the leader's witnesses: %s", t.Writer, v.Why)
	}
	if !s.claimFailover(t.Cluster) {
		return retryable{fmt.Errorf("a failover of %q is running on the leader", t.Cluster)}
	}
	promoted := s.failover(ctx, n, t, "requested by "+st.By+" (shoal failover): "+v.Why)
	s.releaseFailover(t.Cluster, promoted)
	ans.Detail = s.LastFailover()[t.Cluster]
	if promoted {
		ans.Term = n.FSM().Term(t.Cluster).Number
	}
	return nil
}

// claimFailover marks a failover of cluster running; false when one is.
func (s *Switcher) claimFailover(cluster string) bool {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	if s.fo.running[cluster] {
		return false
	}
	s.fo.running[cluster] = true
	return true
}

// releaseFailover ends a claim; a failover that promoted counts toward
// the hourly bound.
func (s *Switcher) releaseFailover(cluster string, promoted bool) {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	delete(s.fo.running, cluster)
	now := s.cfg.Clock.Now()
	if promoted {
		s.fo.started[cluster] = append(s.fo.started[cluster], now)
	} else {
		s.fo.retryAt[cluster] = now.Add(failoverRetry)
	}
}

// failoverTerm is the term of the cluster named, or of the only cluster
// with one.
func failoverTerm(terms map[string]pool.Term, cluster string) (pool.Term, error) {
	if cluster != "" {
		t, ok := terms[cluster]
		if !ok || t.Number == 0 {
			return pool.Term{}, fmt.Errorf("%w: cluster %s: no such cluster with a writer term", view.ErrFailoverRequest, strconv.Quote(cluster))
		}
		return t, nil
	}
	names := slices.Sorted(maps.Keys(terms))
	switch len(names) {
	case 0:
		return pool.Term{}, fmt.Errorf("%w: no cluster has a writer term yet", view.ErrFailover)
	case 1:
		return terms[names[0]], nil
	}
	return pool.Term{}, fmt.Errorf("%w: %d clusters have a writer term (%s): name one with --cluster", view.ErrFailoverRequest, len(names), strings.Join(names, ", "))
}

// gossipCandidates fills the candidates in from their gossiped health:
// the dry run's hints (no errant transactions can be seen).
func gossipCandidates(cands []candidate, members []pool.Member) []candidate {
	health := map[string]*tags.Health{}
	for _, m := range members {
		health[m.Name] = m.Health
	}
	for i := range cands {
		c := &cands[i]
		h := health[c.Name]
		if h == nil {
			c.Err = fmt.Errorf("it publishes no health")
			continue
		}
		c.Survey = consensus.SurveyAnswer{ServerID: h.ServerID, Replica: h.Replica, SQLRunning: h.SQLRunning, Drained: h.SQLRunning}
		if !h.Position.Known() {
			c.Err = fmt.Errorf("it gossips no GTID position")
			continue
		}
		c.Pos = fromPosition(h.Position)
		c.Received = c.Pos
	}
	return cands
}

// oldPosition is the dead writer's last gossiped position.
func oldPosition(members []pool.Member, writer string) tags.Position {
	for _, m := range members {
		if m.Name == writer && m.Health != nil {
			return m.Health.Position
		}
	}
	return tags.Position{}
}

// failoverCandidates lists the candidates of a choice, the pick first.
func failoverCandidates(ch choice, members []pool.Member) []view.FailoverCandidate {
	pos := map[string]string{}
	for _, m := range members {
		if m.Health != nil {
			pos[m.Name] = m.Health.Position.String()
		}
	}
	var out []view.FailoverCandidate
	if ch.Pick != "" {
		out = append(out, view.FailoverCandidate{Node: ch.Pick, Position: pos[ch.Pick]})
	}
	for _, name := range slices.Sorted(maps.Keys(ch.Out)) {
		out = append(out, view.FailoverCandidate{Node: name, Position: pos[name], Out: ch.Out[name]})
	}
	return out
}
