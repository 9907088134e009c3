package pool

import (
	"cmp"
	"slices"
)

// HoldFailed returns the pool an isolated agent should route to: cur, with
// every node that is out of cur because its agent failed (ReasonAgentFailed)
// put back in the role it had in base, the pool from before the failures.
// Restored nodes keep the detail "held: agent-failed while isolated".
//
// Isolation is detected only once more than half of the cluster has failed,
// one member at a time, so the first failures have already been removed
// when it is; base (the pool in effect before the isolation window) is what
// the agent routed to before it was cut off. Only agent failures are undone:
// a node that reported itself critical, in maintenance or lagging said so
// through gossip and stays out. A writer is restored only when cur has no
// writer in that cluster, so the result never has two. cur and base are not
// modified; either may be nil.
func HoldFailed(cur, base *Pool) *Pool {
	out := cur.Clone()
	if out == nil {
		return nil
	}
	for i := range out.Clusters {
		c := &out.Clusters[i]
		b := base.Cluster(c.Name)
		if b == nil {
			continue
		}
		var keep []Node
		for _, n := range c.Out {
			if n.Reason != ReasonAgentFailed {
				keep = append(keep, n)
				continue
			}
			held := n
			held.Detail = "held: agent-failed while isolated"
			restored := false
			if len(c.Writers) == 0 && b.Writer() == n.Name {
				held.Reason = ""
				c.Writers = append(c.Writers, held)
				restored = true
			}
			if slices.ContainsFunc(b.Readers, func(r Node) bool { return r.Name == n.Name }) {
				held.Reason = ""
				c.Readers = append(c.Readers, held)
				restored = true
			}
			if !restored {
				keep = append(keep, n)
			}
		}
		c.Out = keep
		byName := func(a, b Node) int { return cmp.Compare(a.Name, b.Name) }
		slices.SortFunc(c.Readers, byName)
	}
	return out
}
