package switchover

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// Failover timings.
const (
	// failoverEvery is how often the leader judges the writers, and every
	// agent looks at the replication it stopped for a survey.
	failoverEvery = 250 * time.Millisecond
	// confirmFast is how long the witnesses must agree, when the writer's
	// own agent reports its server down, before the failover starts.
	confirmFast = 500 * time.Millisecond
	// surveyDrain bounds how long a candidate applies what it received.
	surveyDrain = 10 * time.Second
	// surveyHold is how long a candidate keeps its IO thread stopped for
	// a failover that raft has not recorded: after it, the candidate
	// starts it again by itself (the leader that surveyed it died).
	surveyHold = 30 * time.Second
	// failoverRetry is how long the leader waits after a failover that
	// did not go ahead before it tries again for the same term.
	failoverRetry = 10 * time.Second
)

// failoverState is the leader's and the candidates' failover bookkeeping.
type failoverState struct {
	mu sync.Mutex
	// deadSince: when the witnesses first agreed on the death of a
	// cluster's writer, by cluster (term number, time).
	deadSince map[string]deadMark
	// goneSince: when this voter first saw the writer's agent gone from
	// the gossip, by cluster (kept on every voter, leading or not): the
	// slow path's lease counts from it.
	goneSince map[string]deadMark
	// leaderSeen: when this voter last saw each node lead raft; a writer
	// whose agent led shortly before it was seen gone needs raft's leader
	// lease on top of the writer's lease.
	leaderSeen map[string]time.Time
	running    map[string]bool      // clusters a failover runs for
	retryAt    map[string]time.Time // a cluster's next try, after one did not go ahead
	started    map[string][]time.Time
	// held: the survey this server stands still for, by cluster.
	held map[string]heldMark
	// last is the latest failover decision, for the status.
	last map[string]string
}

type deadMark struct {
	term  uint64
	since time.Time
}

type heldMark struct {
	id string
	at time.Time
}

func (f *failoverState) init() {
	f.deadSince = map[string]deadMark{}
	f.goneSince = map[string]deadMark{}
	f.leaderSeen = map[string]time.Time{}
	f.running = map[string]bool{}
	f.retryAt = map[string]time.Time{}
	f.started = map[string][]time.Time{}
	f.held = map[string]heldMark{}
	f.last = map[string]string{}
}

// Failover runs until ctx ends. On every agent it starts again the
// replication that a survey stopped when no failover followed
// (surveyHold). On the raft leader, when enabled, it judges each
// cluster's writer (writerDeath) and fails a dead one over: confirmed
// from more than one witness, for confirmFast when its own agent reports
// its server down, else for the writer's lease.
func (s *Switcher) Failover(ctx context.Context, enabled bool) {
	t := s.cfg.Clock.NewTicker(failoverEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		s.releaseHeld(ctx)
		s.checkReturn(ctx)
		if enabled {
			s.judgeWriters(ctx)
		}
	}
}

// judgeWriters starts a failover for each cluster whose writer is dead
// long enough, on the leader.
func (s *Switcher) judgeWriters(ctx context.Context) {
	n := s.voter()
	f := &s.fo
	if n == nil {
		return
	}
	members := s.cfg.Members()
	now := s.cfg.Clock.Now()
	leader := n.IsLeader()
	if l := n.Status().Leader; l != "" {
		f.mu.Lock()
		f.leaderSeen[l] = now
		f.mu.Unlock()
	}
	intents := n.FSM().Switches()
	for cluster, t := range n.FSM().Terms() {
		v := writerDeath(t, members)
		f.mu.Lock()
		// Every voter keeps when it first saw the writer's agent gone,
		// so that a leader elected after it (the writer's agent led)
		// counts the lease from then.
		if g, ok := f.goneSince[cluster]; !v.Gone {
			delete(f.goneSince, cluster)
		} else if !ok || g.term != t.Number {
			f.goneSince[cluster] = deadMark{term: t.Number, since: now}
		}
		_, switching := intents[cluster]
		if !leader || switching {
			delete(f.deadSince, cluster)
			f.mu.Unlock()
			continue
		}
		if !v.Dead {
			delete(f.deadSince, cluster)
			f.mu.Unlock()
			continue
		}
		d, ok := f.deadSince[cluster]
		if !ok || d.term != t.Number {
			d = deadMark{term: t.Number, since: now}
			f.deadSince[cluster] = d
			s.cfg.Log.Warn("failover: the writer is dead by its witnesses", "cluster", cluster, "writer", t.Writer, "term", t.Number, "why", v.Why)
		}
		// Fast: the witnesses agree for confirmFast. Slow: besides, the
		// writer's lease (and raft's leader lease: its agent may have led)
		// has passed since its agent was first seen gone: its own agent
		// has fenced a living writer by then. The replicas notice the
		// silence within that lease.
		ready := now.Sub(d.since) >= confirmFast
		if !v.Fast {
			ready = ready && now.Sub(f.goneSince[cluster].since) >= s.slowWait(t.Writer, f.goneSince[cluster].since)
		}
		go_ := ready && !f.running[cluster] && !now.Before(f.retryAt[cluster])
		if go_ {
			f.started[cluster] = recent(f.started[cluster], now)
			if len(f.started[cluster]) >= s.failoverLimit() {
				f.last[cluster] = fmt.Sprintf("not failed over: %d failovers of %s in the last hour (the most)", len(f.started[cluster]), cluster)
				f.retryAt[cluster] = now.Add(failoverRetry)
				s.cfg.Log.Error("failover refused: too many in an hour", "cluster", cluster, "writer", t.Writer, "count", len(f.started[cluster]))
				go_ = false
			} else {
				f.running[cluster] = true
			}
		}
		f.mu.Unlock()
		if go_ {
			s.cfg.Go(func() { s.releaseFailover(cluster, s.failover(ctx, n, t, v.Why)) })
		}
	}
}

// slowWait is how long after the writer's agent was first seen gone (at
// gone) the slow path waits: the writer's lease, after which a follower
// that lost contact when it was cut or froze (before the gossip saw it
// gone) has fenced itself; and raft's leader lease more when the writer's
// agent led raft within a lease before (a leader counts as in contact
// until it steps down). f.mu held.
func (s *Switcher) slowWait(writer string, gone time.Time) time.Duration {
	if seen, ok := s.fo.leaderSeen[writer]; ok && !seen.Before(gone.Add(-s.cfg.Lease)) {
		return s.cfg.Lease + s.cfg.LeaderLease
	}
	return s.cfg.Lease
}

// failoverLimit bounds the failovers of one cluster this leader starts in
// an hour (consensus.failover_limit): a flapping fleet is not failed over
// for ever. A count, not a block window: a failover after a quiet hour is
// never refused.
func (s *Switcher) failoverLimit() int {
	if s.cfg.FailoverLimit > 0 {
		return s.cfg.FailoverLimit
	}
	return consensus.DefaultFailoverLimit
}

// failoverRunning reports whether this agent runs a failover of cluster.
func (s *Switcher) failoverRunning(cluster string) bool {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	return s.fo.running[cluster]
}

// recent is ts without the times more than an hour before now.
func recent(ts []time.Time, now time.Time) []time.Time {
	out := ts[:0]
	for _, t := range ts {
		if now.Sub(t) < time.Hour {
			out = append(out, t)
		}
	}
	return out
}

// failover replaces the dead writer of term t: the candidates (the
// cluster's other voters) stop receiving and apply what they received
// (survey), the most advanced is chosen (choose), the failover's intent
// is recorded in raft with it as the target, the term granted to it, it
// is promoted and the others replicate from it. It reports whether the
// term moved. Before the intent nothing is changed but the candidates'
// IO threads, which are started again should the failover not go ahead.
func (s *Switcher) failover(ctx context.Context, n Voter, t pool.Term, death string) bool {
	log := s.cfg.Log.With("cluster", t.Cluster, "old", t.Writer, "term", t.Number)
	p := plan{id: newID(), cluster: t.Cluster, from: t.Number, old: t.Writer, leader: s.cfg.Node, group: s.cfg.Terms.OwnGroup(), by: s.cfg.Node, failover: true}
	cands := s.candidates(n, t)
	if len(cands) == 0 {
		s.stats.FailoversNotDone.Add(1)
		s.failoverDecided(t.Cluster, "not failed over: no other voter of the cluster is alive to take the term")
		log.Error("failover: no candidate: no other voter of the cluster is alive", "death", death)
		return false
	}
	log.Warn("failover starting: surveying the candidates", "id", p.id, "death", death, "candidates", len(cands))
	surveyed := s.survey(ctx, p, cands)
	// The world may have moved while the candidates drained.
	members := s.cfg.Members()
	var oldPos tags.Position
	for _, m := range members {
		if m.Name == t.Writer && m.Health != nil {
			oldPos = m.Health.Position
		}
	}
	abort := func(why string) bool {
		s.stats.FailoversNotDone.Add(1)
		s.failoverDecided(t.Cluster, "not failed over: "+why)
		log.Error("failover not going ahead", "id", p.id, "why", why)
		s.resumeAll(ctx, p, cands)
		return false
	}
	if !n.IsLeader() {
		return abort("this agent no longer leads the raft group")
	}
	if v := writerDeath(t, members); !v.Dead {
		return abort("the writer is no longer dead by its witnesses: " + v.Why)
	}
	if cur := n.FSM().Term(t.Cluster); cur.Number != t.Number || cur.Writer != t.Writer {
		return abort(fmt.Sprintf("the term moved to %d held by %s", cur.Number, cur.Writer))
	}
	ch := choose(withHints(surveyed, members, t), oldPos)
	if ch.Pick == "" {
		return abort(ch.Why)
	}
	p.target, p.addr = ch.Pick, ch.Addr
	now := s.cfg.Clock.Now()
	in := consensus.SwitchIntent{ID: p.id, Cluster: p.cluster, From: p.from, Old: p.old, Target: p.target, Addr: p.addr, By: s.cfg.Node,
		Started: now, Deadline: now.Add(intentMargin), Kind: consensus.KindFailover, OldServerID: oldServerID(t, members)}
	for _, c := range surveyed {
		if c.Name == ch.Pick {
			in.Position = formatList(c.Pos) // the promotion position: what a returning old writer is judged by
			in.Timers = c.Timers
		}
	}
	if _, err := n.BeginSwitch(ctx, in); err != nil {
		return abort("the failover was not recorded in raft: " + err.Error())
	}
	why := consensus.ShortenOutcome(fmt.Sprintf("failover from %s (term %d): %s; %s", t.Writer, t.Number, death, ch.Why))
	g := pool.Grant{Expect: t.Number, Term: pool.Term{Cluster: t.Cluster, Number: t.Number + 1, Writer: p.target, Addr: p.addr, Granted: now, Why: why}}
	err := n.ProveWriter(ctx, g.Term)
	var granted pool.Term
	if err == nil {
		granted, err = n.GrantSwitch(ctx, p.id, g)
	}
	if err != nil {
		// Not granted: end the intent (nothing was changed but the IO
		// threads), or leave it to the next leader's Resume.
		if _, eerr := n.EndSwitch(ctx, p.cluster, p.id, consensus.ShortenOutcome("failover not granted: "+err.Error()), true); eerr != nil {
			log.Error("failover not granted, and its intent not ended: the raft leader's resume ends it", "id", p.id, "error", err, "end_error", eerr)
		}
		return abort("the term was not granted to " + p.target + ": " + err.Error())
	}
	s.cfg.Terms.Publish([]pool.Term{granted})
	s.stats.FailoversPromoted.Add(1)
	log.Warn("failover: writer term granted", "id", p.id, "writer", p.target, "new_term", granted.Number, "why", why)
	s.failoverDecided(t.Cluster, fmt.Sprintf("failed over to %s (term %d): %s", p.target, granted.Number, ch.Why))
	for name, w := range ch.Out {
		log.Info("failover: candidate passed over", "id", p.id, "node", name, "why", w)
	}
	s.complete(ctx, p, log, "failover")
	return true
}

// oldServerID is the dead writer's server_id: its own last health, or
// what its replicas replicate from; 0 when unknown.
func oldServerID(t pool.Term, members []pool.Member) uint32 {
	var fromReplicas uint32
	for _, m := range members {
		switch {
		case m.Health == nil || m.Tags[tags.KeyRole] != tags.RoleDB || tags.Cluster(m.Tags) != t.Cluster:
		case m.Name == t.Writer && m.Health.ServerID != 0:
			return m.Health.ServerID
		case m.Health.Replica && m.Health.SourceServerID != 0:
			fromReplicas = m.Health.SourceServerID
		}
	}
	return fromReplicas
}

func (s *Switcher) failoverDecided(cluster, what string) {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	s.fo.last[cluster] = what
}

// LastFailover is the latest failover decision of each cluster on this
// agent (while it led), for the status.
func (s *Switcher) LastFailover() map[string]string {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	return maps.Clone(s.fo.last)
}

// candidates are the cluster's db members other than the dead writer
// that are voters and alive in the gossip, with their MySQL addresses.
func (s *Switcher) candidates(n Voter, t pool.Term) []candidate {
	voters := n.Voters()
	var out []candidate
	for _, m := range s.cfg.Members() {
		if m.Tags[tags.KeyRole] != tags.RoleDB || tags.Cluster(m.Tags) != t.Cluster || m.Name == t.Writer {
			continue
		}
		if _, ok := voters[m.Name]; !ok || m.Status != pool.StatusAlive || m.Addr == "" {
			continue
		}
		out = append(out, candidate{Name: m.Name, Addr: m.Addr})
	}
	return out
}

// survey sends the survey step to every candidate at once.
func (s *Switcher) survey(ctx context.Context, p plan, cands []candidate) []candidate {
	out := make([]candidate, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := p.step(consensus.OpSurvey, c.Name)
			st.Target, st.Addr, st.WaitMS = c.Name, c.Addr, surveyDrain.Milliseconds()
			ans, err := s.sendStep(ctx, st, surveyDrain+stepTimeout, surveyDrain+stepLimit)
			out[i] = surveyed(c, ans, err)
		}()
	}
	wg.Wait()
	return out
}

// withHints adds, to the surveyed candidates, every other db member of
// the cluster (not the dead writer) with a gossiped position that was not
// surveyed or whose survey failed: its agent is gone or did not answer,
// but its server may hold transactions the others lack (it received them
// before its agent went). The pick must hold its last gossiped position
// too, or there is none.
func withHints(cands []candidate, members []pool.Member, t pool.Term) []candidate {
	seen := map[string]int{}
	for i, c := range cands {
		seen[c.Name] = i
	}
	var out []candidate
	for _, c := range cands {
		if c.Err == nil {
			out = append(out, c)
		}
	}
	for _, m := range members {
		if m.Tags[tags.KeyRole] != tags.RoleDB || tags.Cluster(m.Tags) != t.Cluster || m.Name == t.Writer {
			continue
		}
		i, surveyed := seen[m.Name]
		if surveyed && cands[i].Err == nil {
			continue
		}
		why := "its agent is " + m.Status.String()
		switch {
		case surveyed:
			why = cands[i].Err.Error()
		case m.Status == pool.StatusAlive:
			why = "not a voter"
		}
		h := candidate{Name: m.Name, Addr: m.Addr, Hint: true, Err: errors.New(why)}
		if m.Health != nil && m.Health.Position.Known() {
			h.Pos = fromPosition(m.Health.Position)
			h.Received = h.Pos
		} else {
			h.Hint = false // nothing known: reported, not counted
		}
		out = append(out, h)
	}
	return out
}

// surveyed fills a candidate in from its survey answer.
func surveyed(c candidate, ans consensus.SwitchAnswer, err error) candidate {
	switch {
	case err != nil:
		c.Err = err
		return c
	case ans.Survey == nil:
		c.Err = errors.New("the answer carries no survey")
		return c
	}
	c.Survey = *ans.Survey
	c.SQLError = ans.Detail
	c.Timers = ans.Timers
	if c.Pos, err = parseGTIDList(ans.GTID); err == nil {
		c.Received, err = parseGTIDList(ans.Survey.Received)
	}
	if err != nil {
		c.Err = fmt.Errorf("its position: %w", err)
	}
	return c
}

// resumeAll starts the candidates' IO threads again.
func (s *Switcher) resumeAll(ctx context.Context, p plan, cands []candidate) {
	var wg sync.WaitGroup
	for _, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := p.step(consensus.OpResume, c.Name)
			st.Target, st.Addr = c.Name, c.Addr
			if _, err := s.sendStep(ctx, st, stepTimeout, 2*stepTimeout); err != nil {
				s.cfg.Log.Warn("failover: a candidate's replication not started again (it starts it itself later)", "node", c.Name, "error", err)
			}
		}()
	}
	wg.Wait()
}

// surveyHere is a candidate's survey step: it stops receiving from the
// dead writer and applies what it received, and says what it holds.
func (s *Switcher) surveyHere(ctx context.Context, act Actuator, st consensus.SwitchStep, ans *consensus.SwitchAnswer) error {
	if st.Target != s.cfg.Node {
		return fmt.Errorf("%s is not the candidate %s", s.cfg.Node, st.Target)
	}
	if t := s.cfg.Terms.View().Terms[st.Cluster]; t.Number != st.From || t.Writer != st.Old {
		return fmt.Errorf("term %d of %s is not held by %s (this agent knows term %d, held by %s)", st.From, st.Cluster, st.Old, t.Number, t.Writer)
	}
	s.fo.mu.Lock()
	s.fo.held[st.Cluster] = heldMark{id: st.ID, at: s.cfg.Clock.Now()}
	s.saveHolds()
	s.fo.mu.Unlock()
	sv, err := act.Survey(ctx, time.Duration(st.WaitMS)*time.Millisecond)
	if err != nil {
		return err
	}
	ans.GTID = sv.CurrentPos
	ans.Detail = sv.SQLError
	ans.Timers = replTimers(sv.Timers)
	ans.Survey = &consensus.SurveyAnswer{ServerID: sv.ServerID, Replica: sv.Replica, SQLRunning: sv.SQLRunning, Drained: sv.Drained,
		Received: sv.IOPos, Own: ownGTIDs(sv.BinlogPos, sv.ServerID), Promotion: s.cfg.Promotion}
	return nil
}

// ownGTIDs are the GTIDs of pos that carry serverID.
func ownGTIDs(pos string, serverID uint32) string {
	l, err := parseGTIDList(pos)
	if err != nil {
		return ""
	}
	for d, g := range l {
		if g.Server != serverID {
			delete(l, d)
		}
	}
	return formatList(l)
}

// resumeHere starts this server's IO thread again.
func (s *Switcher) resumeHere(ctx context.Context, act Actuator, st consensus.SwitchStep) error {
	s.fo.mu.Lock()
	h, ok := s.fo.held[st.Cluster]
	if ok && h.id == st.ID {
		delete(s.fo.held, st.Cluster)
		s.saveHolds()
	}
	s.fo.mu.Unlock()
	return act.ResumeReplication(ctx)
}

// unhold forgets the survey of cluster: the server was promoted or
// re-pointed.
func (s *Switcher) unhold(cluster string) {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	if _, ok := s.fo.held[cluster]; ok {
		delete(s.fo.held, cluster)
		s.saveHolds()
	}
}

// releaseHeld starts replication again where a survey stopped it more
// than surveyHold ago and raft holds no failover of that ID: the leader
// that surveyed died before it recorded the failover, or the failover
// ended without re-pointing this server.
func (s *Switcher) releaseHeld(ctx context.Context) {
	act := s.cfg.Actuator
	if act == nil {
		return
	}
	now := s.cfg.Clock.Now()
	var intents map[string]consensus.SwitchIntent
	if n := s.voter(); n != nil {
		intents = n.FSM().Switches()
	}
	s.fo.mu.Lock()
	var release []string
	for c, h := range s.fo.held {
		if in, ok := intents[c]; ok && in.ID == h.id {
			continue
		}
		if now.Sub(h.at) >= surveyHold {
			release = append(release, c)
			delete(s.fo.held, c)
		}
	}
	if len(release) > 0 {
		s.saveHolds()
	}
	s.fo.mu.Unlock()
	for _, c := range release {
		if err := act.ResumeReplication(ctx); err != nil {
			s.cfg.Log.Error("failover: replication stopped by a survey not started again", "cluster", c, "error", err)
			continue
		}
		s.cfg.Log.Warn("failover: replication started again: the failover that stopped it did not follow", "cluster", c)
	}
}

// failoverOthers are the servers a failover re-points: the cluster's db
// members but the target and the dead writer.
func failoverOthers(c *pool.Cluster, old, target string) []string {
	out := others(c, old, target)
	return out[1:]
}

// isFailover reports whether an intent is a failover's.
func isFailover(in consensus.SwitchIntent) bool {
	return strings.EqualFold(in.Kind, consensus.KindFailover)
}

// failoverCandidates are the servers a failover's survey may have
// stopped: the cluster's db members but the dead writer.
func (s *Switcher) failoverCandidates(p plan) []candidate {
	var out []candidate
	for _, m := range s.cfg.Members() {
		if m.Tags[tags.KeyRole] == tags.RoleDB && tags.Cluster(m.Tags) == p.cluster && m.Name != p.old && m.Status == pool.StatusAlive && m.Addr != "" {
			out = append(out, candidate{Name: m.Name, Addr: m.Addr})
		}
	}
	return out
}
