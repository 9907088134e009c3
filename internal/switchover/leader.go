package switchover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
)

// leader is the raft node when it leads, else a retryable error.
func (s *Switcher) leader() (Voter, error) {
	n := s.voter()
	if n == nil || !n.IsLeader() {
		return nil, retryable{errors.New("this agent is not the raft leader")}
	}
	return n, nil
}

// beginIntent is the leader's begin step: it records the switchover's
// intent in raft, with its deadline on the leader's clock.
func (s *Switcher) beginIntent(ctx context.Context, st consensus.SwitchStep) error {
	n, err := s.leader()
	if err != nil {
		return err
	}
	now := s.cfg.Clock.Now()
	in := consensus.SwitchIntent{ID: st.ID, Cluster: st.Cluster, From: st.From, Old: st.Old, Target: st.Target, Addr: st.Addr, By: st.By,
		Started: now, Deadline: now.Add(time.Duration(st.WaitMS) * time.Millisecond)}
	if _, err := n.BeginSwitch(ctx, in); err != nil {
		return err
	}
	s.cfg.Log.Info("consensus: switchover recorded", "id", st.ID, "cluster", st.Cluster, "by", st.By, "old", st.Old, "target", st.Target, "deadline", in.Deadline)
	return nil
}

// endIntent is the leader's end step.
func (s *Switcher) endIntent(ctx context.Context, st consensus.SwitchStep) error {
	n, err := s.leader()
	if err != nil {
		return err
	}
	if _, err := n.EndSwitch(ctx, st.Cluster, st.ID, st.Outcome, st.Rollback); err != nil {
		if !errors.Is(err, consensus.ErrNoSwitch) {
			return err
		}
		// Ended already: by this step sent before (its answer lost) or
		// by the leader's resume. A rollback stands only while the term
		// has not moved: no grant of the switchover can follow then.
		if t := n.FSM().Term(st.Cluster); st.Rollback && (t.Number != st.From || t.Writer != st.Old) {
			return fmt.Errorf("switchover %s ended already and term %d of %s is held by %s: too late to roll back", st.ID, t.Number, st.Cluster, t.Writer)
		}
		return nil
	}
	s.cfg.Log.Info("consensus: switchover ended", "id", st.ID, "cluster", st.Cluster, "rollback", st.Rollback, "outcome", st.Outcome)
	return nil
}

// grant is the raft leader's step: it grants term From+1 to the target
// under the switchover's intent, once its own view shows the old writer
// read-only (else its term rules would hand the term straight back to
// the old writer, still writable as far as it knows), and the target is
// a voter. A grant that already happened is answered again.
func (s *Switcher) grant(ctx context.Context, st consensus.SwitchStep) (uint64, error) {
	n, err := s.leader()
	if err != nil {
		return 0, err
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
	for _, m := range s.cfg.Members() {
		if m.Name == st.Old && m.Health != nil && !m.Health.ReadOnly {
			return 0, retryable{fmt.Errorf("the leader still sees %s writable (its read_only=ON has not reached the gossip yet)", st.Old)}
		}
	}
	why := fmt.Sprintf("switchover from %s (term %d), run by %s", st.Old, st.From, st.By)
	g := pool.Grant{Expect: st.From, Term: pool.Term{Cluster: st.Cluster, Number: st.From + 1, Writer: st.Target, Addr: st.Addr, Granted: s.cfg.Clock.Now(), Why: why}}
	if err := n.ProveWriter(ctx, g.Term); err != nil {
		return 0, retryable{fmt.Errorf("%s did not prove it is the voter of that name: %w", st.Target, err)}
	}
	t, err := n.GrantSwitch(ctx, st.ID, g)
	if err != nil {
		return 0, err
	}
	s.cfg.Log.Info("consensus: writer term granted", "cluster", t.Cluster, "term", t.Number, "writer", t.Writer, "addr", t.Addr, "why", t.Why)
	s.cfg.Terms.Publish([]pool.Term{t})
	return t.Number, nil
}
