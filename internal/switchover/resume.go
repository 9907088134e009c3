package switchover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
)

// resumeEvery is how often the leader looks for orphaned switchovers.
const resumeEvery = time.Second

// Resume runs until ctx ends: while this agent leads the raft group, it
// finishes each switchover whose coordinator is gone from the gossip
// (failed, left, or no member) or past its deadline. Before the grant it
// rolls the switchover back: the intent is ended in raft first, so that
// its grant can no longer be applied, then the old writer is made
// writable again. After the grant it completes it: the target is
// promoted, the others re-pointed, the intent ended.
func (s *Switcher) Resume(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(resumeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		s.resumeOrphans(ctx)
	}
}

// resumeOrphans starts finishing each orphaned intent not yet being
// finished.
func (s *Switcher) resumeOrphans(ctx context.Context) {
	n := s.voter()
	if n == nil || !n.IsLeader() {
		return
	}
	alive := s.aliveMembers()
	now := s.cfg.Clock.Now()
	for _, in := range n.FSM().Switches() {
		why := orphaned(in, alive, now, in.By == s.cfg.Node && s.running.Load())
		if isFailover(in) && !(in.By == s.cfg.Node && s.failoverRunning(in.Cluster)) {
			// A failover is run by the leader that started it, on its
			// own goroutine: no other agent, nor this one after a
			// restart or a change of leader, will finish it.
			why = fmt.Sprintf("the leader that ran it (%s) no longer does", in.By)
		}
		if why == "" || !s.startResume(in.ID) {
			continue
		}
		s.cfg.Go(func() {
			defer s.doneResume(in.ID)
			s.finish(ctx, in, why)
		})
	}
}

// orphaned says why the leader must finish in, "" while its coordinator
// (alive, or this agent still running it: running) may still do so.
func orphaned(in consensus.SwitchIntent, alive map[string]bool, now time.Time, running bool) string {
	switch {
	case now.After(in.Deadline):
		return fmt.Sprintf("its deadline %s passed", in.Deadline.UTC().Format(time.RFC3339))
	case running:
		return ""
	case !alive[in.By]:
		return fmt.Sprintf("its coordinator %s is not alive", in.By)
	}
	return ""
}

// aliveMembers are the names of the members serf sees alive.
func (s *Switcher) aliveMembers() map[string]bool {
	out := map[string]bool{}
	for _, m := range s.cfg.Gossip.Members() {
		if m.Status == serf.StatusAlive {
			out[m.Name] = true
		}
	}
	return out
}

func (s *Switcher) startResume(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resuming[id] {
		return false
	}
	s.resuming[id] = true
	return true
}

func (s *Switcher) doneResume(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.resuming, id)
}

// finish rolls back or completes in; what fails is tried again at the
// next look, as long as this agent leads.
func (s *Switcher) finish(ctx context.Context, in consensus.SwitchIntent, why string) {
	s.stats.Resumed.Add(1)
	p := plan{id: in.ID, cluster: in.Cluster, from: in.From, old: in.Old, target: in.Target, addr: in.Addr,
		leader: s.cfg.Node, group: s.cfg.Terms.OwnGroup(), by: s.cfg.Node, failover: isFailover(in)}
	log := s.cfg.Log.With("id", in.ID, "cluster", in.Cluster, "coordinator", in.By, "old", in.Old, "target", in.Target)
	if !in.Granted {
		n, err := s.leader()
		if err == nil {
			_, err = n.EndSwitch(ctx, in.Cluster, in.ID, consensus.ShortenOutcome("rolled back by the raft leader "+s.cfg.Node+": "+why), true)
		}
		switch {
		case errors.Is(err, consensus.ErrSwitchGranted):
			in.Granted = true // granted meanwhile: complete it
		case err != nil:
			log.Warn("switchover not rolled back; trying again", "why", why, "error", err)
			return
		case p.failover:
			// The dead writer is not restored: the candidates start
			// receiving again, and the leader judges the writer anew.
			log.Warn("failover rolled back by the raft leader", "why", why)
			s.resumeAll(ctx, p, s.failoverCandidates(p))
			return
		default:
			log.Warn("switchover rolled back by the raft leader", "why", why)
			if _, err := s.sendStep(ctx, p.step(consensus.OpRestore, in.Old), stepTimeout, stepLimit); err != nil {
				log.Error("the old writer was NOT made writable again: no server takes writes until an operator sets read_only=OFF on it", "error", err)
				return
			}
			log.Warn("switchover rolled back: the old writer is writable again", "term", in.From)
			return
		}
	}
	s.complete(ctx, p, log, why)
}

// complete finishes a granted switchover: the target promoted, the
// others re-pointed, the intent ended.
func (s *Switcher) complete(ctx context.Context, p plan, log *slog.Logger, why string) {
	ans, err := s.sendStep(ctx, p.step(consensus.OpPromote, p.target), promoteWait+stepTimeout, promoteWait+stepLimit)
	if err != nil {
		log.Error("switchover not completed: the target was not made writable; trying again", "why", why, "error", err)
		return
	}
	p.timers = ans.Timers
	c := switchCluster(s.cfg.Pool(), p.cluster, "")
	switch {
	case c != nil && p.failover:
		p.others = failoverOthers(c, p.old, p.target)
	case c != nil:
		p.others = others(c, p.old, p.target)
	case !p.failover:
		p.others = []string{p.old}
	}
	for _, st := range s.repointAll(ctx, p) {
		if !st.OK {
			log.Warn("switchover completion: a server does not replicate from the new writer", "node", st.Node, "error", st.Detail)
		}
	}
	n, err := s.leader()
	if err == nil {
		_, err = n.EndSwitch(ctx, p.cluster, p.id, consensus.ShortenOutcome("completed by the raft leader "+s.cfg.Node+": "+why), false)
	}
	if err != nil && !errors.Is(err, consensus.ErrNoSwitch) {
		log.Warn("switchover completed but not ended in raft; trying again", "error", err)
		return
	}
	log.Warn("switchover completed by the raft leader", "why", why, "writer", p.target, "term", p.from+1)
}
