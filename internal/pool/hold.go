package pool

import (
	"cmp"
	"slices"
)

// Held is a node an agent keeps in the role it had, because it could not
// verify the failure that took the node out (see Isolation).
type Held struct {
	Cluster, Name  string
	Writer, Reader bool   // the roles it had just before
	Detail         string // why it is held, for operators
}

// Hold returns cur with every node of held that is out of cur because its
// agent failed (ReasonAgentFailed) put back in the role it had. A writer is
// restored only when its cluster has no writer in cur, so the result never
// has two, and in a cluster that follows a writer term only when it still
// holds the term. Nodes out for any other reason stay out: a node that reported
// itself critical, in maintenance or lagging said so through gossip. cur is
// not modified; it may be nil.
func Hold(cur *Pool, held []Held) *Pool {
	out := cur.Clone()
	if out == nil || len(held) == 0 {
		return out
	}
	for i := range out.Clusters {
		c := &out.Clusters[i]
		var keep []Node
		for _, n := range c.Out {
			h, ok := findHeld(held, c.Name, n.Name)
			if !ok || n.Reason != ReasonAgentFailed {
				keep = append(keep, n)
				continue
			}
			in := n
			in.Reason, in.Detail = "", h.Detail
			restored := false
			if h.Writer && len(c.Writers) == 0 && holdsTerm(c, n) {
				c.Writers = append(c.Writers, in)
				restored = true
			}
			if h.Reader {
				c.Readers = append(c.Readers, in)
				restored = true
			}
			if !restored {
				keep = append(keep, n)
			}
		}
		c.Out = keep
		slices.SortFunc(c.Readers, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out
}

// holdsTerm reports whether n may be the writer of c by its writer term:
// always in a cluster without one, else only the term's holder (a held
// writer that lost the term meanwhile is not put back).
func holdsTerm(c *Cluster, n Node) bool {
	return c.Term == nil || c.Term.Number != 0 && c.Term.Writer == n.Name && c.Term.Addr == n.Addr
}

func findHeld(held []Held, cluster, name string) (Held, bool) {
	for _, h := range held {
		if h.Cluster == cluster && h.Name == name {
			return h, true
		}
	}
	return Held{}, false
}
