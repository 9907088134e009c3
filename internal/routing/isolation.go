package routing

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

// Isolation, as the router applies it (the rule is in pool/isolation.go).
//
// When a node the routed pool had in a role goes out because its agent
// failed, the router holds it in that role and asks Reach for a round of
// pings that includes it. A round that started after the failure decides
// (a member reached counts whether it answered this agent or a peer asked
// to relay the ping, see pool.JudgeReach):
//   - connected, and the node was not reached: the failure is verified, the
//     node leaves the routed pool;
//   - connected, and the node was reached: it is alive and this agent's view
//     is behind (a heal); it is held until gossip shows it alive, at most
//     pool.SettleMax after the answer;
//   - not connected: this agent is isolated; the node is held, and a new
//     round asked at every resync, until a round finds the fleet again.
//
// No node is held longer than IsolationMax after its failure, and the writer
// of a cluster that follows a writer term no longer than WriterLease. Only
// nodes the routed pool had in a role are held: what was out stays out.

// reprobeEvery is the least time between rounds asked while a node is held.
const reprobeEvery = time.Second

type holdKey struct{ cluster, node string }

// hold is one node held while its failure is unverified.
type hold struct {
	pool.Held
	failedAt   time.Time // the step that saw it out
	answeredAt time.Time // the first connected round it answered; zero before
}

// isolation is the router's isolation state; the router goroutine owns it.
type isolation struct {
	holds    map[holdKey]*hold
	isolated bool
	since    time.Time
	reach    pool.Reach
	asked    time.Time  // when the latest round was asked
	judged   time.Time  // when the latest round judged had finished
	fleet    pool.Fleet // while isolated: the fleet when it began
}

// sampleMax is how many db agents, and how many other members, a round asks
// at most.
const sampleMax = 16

// holdUnverified updates the holds for the step at now, from the routed pool
// before it (prev) and the computed pool (next), and returns the holds to
// apply and the isolation state.
func (r *Router) holdUnverified(now time.Time, prev, next *pool.Pool, fleet pool.Fleet) ([]pool.Held, pool.IsolationState) {
	iso := &r.iso
	failed := agentFailed(next)
	for k := range iso.holds {
		if !failed[k] {
			delete(iso.holds, k) // alive again, out for another reason, or gone
		}
	}
	if r.cfg.Reach == nil {
		return nil, pool.IsolationState{}
	}
	for k := range failed {
		if _, ok := iso.holds[k]; ok {
			continue
		}
		if w, rd := roleIn(prev, k); w || rd {
			iso.holds[k] = &hold{Held: pool.Held{Cluster: k.cluster, Name: k.node, Writer: w, Reader: rd,
				Detail: "held: checking whether this agent can still reach the fleet"}, failedAt: now}
		}
	}
	if iso.isolated {
		fleet = r.fleet.Still(iso.fleet)
	}
	round := r.cfg.Reach.Latest()
	if round.Done() && round.Finished.After(iso.judged) {
		iso.judged = round.Finished
		r.judge(round, fleet)
	}
	releasedEarly := false
	askNow, ask := false, iso.isolated // while isolated, keep asking: the fleet may be back
	var verify []string                // held nodes to ping: their answer decides
	for k, h := range iso.holds {
		covered := round.Done() && !round.Started.Before(h.failedAt)
		switch {
		case h.Writer && r.cfg.WriterLease > 0 && next.Cluster(k.cluster).Term != nil && now.Sub(h.failedAt) > r.cfg.WriterLease:
			// The writer of a cluster that follows a writer term is held
			// no longer than the writer's lease: if it is cut off from the
			// quorum its own agent fences it by then; if its agent is dead
			// while its server runs on, nothing fences it, and writes from
			// this side must stop rather than diverge.
			releasedEarly = true
			r.log.Warn("held writer released: its failure was not verified within the writer's lease", "cluster", k.cluster,
				"node", k.node, "held", now.Sub(h.failedAt).Round(time.Millisecond).String(), "lease", r.cfg.WriterLease.String())
			delete(iso.holds, k)
			continue
		case now.Sub(h.failedAt) > r.cfg.IsolationMax:
			releasedEarly = true
			r.log.Warn("held node released: its failure was not verified within the isolation bound", "cluster", k.cluster,
				"node", k.node, "held", now.Sub(h.failedAt).Round(time.Millisecond).String())
			delete(iso.holds, k)
			continue
		case !covered:
			// A fresh failure: only whether this agent reaches the fleet
			// decides; the node counts as not reached.
			ask = true
			askNow = askNow || iso.asked.Before(h.failedAt)
			continue
		case iso.isolated:
			h.Detail = "held: agent-failed while this agent cannot reach the fleet (" + reachText(iso.reach) + ")"
			verify = append(verify, k.node)
			continue
		}
		switch answered := round.Reached(k.node); {
		case !answered:
			r.log.Info("held node verified failed: it answers neither this agent's pings nor the peers' it reaches, and the fleet does",
				"cluster", k.cluster, "node", k.node, "held", now.Sub(h.failedAt).Round(time.Millisecond).String())
			delete(iso.holds, k)
			continue
		case h.answeredAt.IsZero():
			h.answeredAt = round.Finished
		}
		if now.Sub(h.answeredAt) > pool.SettleMax {
			r.log.Warn("held node released: it answers this agent's pings but gossip still has it failed", "cluster", k.cluster,
				"node", k.node, "answering_for", now.Sub(h.answeredAt).Round(time.Millisecond).String())
			delete(iso.holds, k)
			continue
		}
		h.Detail = "held: it answers this agent's pings (directly or through a peer); waiting for gossip to show it alive"
		verify, ask = append(verify, k.node), true
	}
	if ask && (askNow || now.Sub(iso.asked) >= reprobeEvery) &&
		r.cfg.Reach.Probe(pool.Sample(fleet, r.cfg.Self, verify, sampleMax, iso.isolated, rand.IntN)) {
		// A refused probe (a round is running) is asked again when that
		// round ends and triggers the router.
		iso.asked = now
	}
	held := make([]pool.Held, 0, len(iso.holds))
	for _, h := range iso.holds {
		held = append(held, h.Held)
	}
	slices.SortFunc(held, func(a, b pool.Held) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Name, b.Name))
	})
	st := pool.IsolationState{Reach: iso.reach, Held: len(held)}
	if iso.isolated {
		st.Since = iso.since
		st.Expired = now.Sub(iso.since) > r.cfg.IsolationMax || releasedEarly && len(held) == 0
		st.Isolated = !st.Expired
	}
	return held, st
}

// judge updates the isolation state from a finished round.
func (r *Router) judge(round pool.ReachRound, fleet pool.Fleet) {
	iso := &r.iso
	iso.reach = pool.JudgeReach(fleet, r.cfg.Self, round)
	switch connected := iso.reach.Connected(); {
	case !connected && !iso.isolated:
		iso.isolated, iso.since, iso.fleet = true, round.Started, fleet
	case connected && iso.isolated:
		iso.isolated, iso.since, iso.fleet = false, time.Time{}, nil
	}
}

// reachText says what the latest round reached.
func reachText(r pool.Reach) string {
	return fmt.Sprintf("%d of %d members and %d of %d db agents answered", r.Reached, r.Fleet, r.ReachedDB, r.FleetDB)
}

// agentFailed returns the nodes out of p because their agent failed.
func agentFailed(p *pool.Pool) map[holdKey]bool {
	out := map[holdKey]bool{}
	for _, c := range p.Clusters {
		for _, n := range c.Out {
			if n.Reason == pool.ReasonAgentFailed {
				out[holdKey{c.Name, n.Name}] = true
			}
		}
	}
	return out
}

// roleIn reports the roles k has in p: writer, and reader other than as the
// writer's read fallback (which follows from the others, not a role to
// hold).
func roleIn(p *pool.Pool, k holdKey) (writer, reader bool) {
	c := p.Cluster(k.cluster)
	if c == nil {
		return false, false
	}
	writer = slices.ContainsFunc(c.Writers, func(n pool.Node) bool { return n.Name == k.node })
	reader = slices.ContainsFunc(c.Readers, func(n pool.Node) bool { return n.Name == k.node && n.Reason != pool.ReasonFallback })
	return writer, reader
}
