package pool

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Role is a node's place in one cluster's pool.
type Role string

// Roles.
const (
	RoleNone         Role = ""              // not in the pool: not a db member, or gone from the member list
	RoleOut          Role = "out"           // a db member that is out, with a reason
	RoleReader       Role = "reader"        //
	RoleWriter       Role = "writer"        //
	RoleWriterReader Role = "writer+reader" // the writer, also serving reads
)

// Change is one node's move between two pools.
type Change struct {
	Cluster string
	Node    string
	Addr    string // in the new pool, or the old one when the node is gone
	From    Role
	To      Role
	Reason  Reason // the node's reason in the new pool
	Detail  string // the node's detail in the new pool
}

// Diff returns the changes from old to next, sorted by cluster then node. A
// node changes when its role or its reason changes; a change of Detail alone
// (say, the lag figure) is not a change. A node that moves to another cluster
// is gone from one (To RoleNone) and new in the other (From RoleNone). Either
// pool may be nil.
func Diff(old, next *Pool) []Change {
	before, after := places(old), places(next)
	keys := slices.Collect(maps.Keys(before))
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b placeKey) int {
		return cmp.Or(strings.Compare(a.cluster, b.cluster), strings.Compare(a.node, b.node))
	})
	var changes []Change
	for _, k := range keys {
		b, a := before[k], after[k]
		if a.role == b.role && a.node.Reason == b.node.Reason {
			continue
		}
		addr := a.node.Addr
		if a.role == RoleNone {
			addr = b.node.Addr
		}
		changes = append(changes, Change{
			Cluster: k.cluster, Node: k.node, Addr: addr,
			From: b.role, To: a.role, Reason: a.node.Reason, Detail: a.node.Detail,
		})
	}
	return changes
}

type placeKey struct{ cluster, node string }

type place struct {
	role Role
	node Node
}

// places indexes a pool by cluster and node.
func places(p *Pool) map[placeKey]place {
	m := map[placeKey]place{}
	if p == nil {
		return m
	}
	for _, c := range p.Clusters {
		for _, n := range c.Out {
			m[placeKey{c.Name, n.Name}] = place{RoleOut, n}
		}
		for _, n := range c.Readers {
			m[placeKey{c.Name, n.Name}] = place{RoleReader, n}
		}
		for _, n := range c.Writers {
			k := placeKey{c.Name, n.Name}
			role := RoleWriter
			if r := m[k]; r.role == RoleReader {
				role = RoleWriterReader
				if r.node.Reason == ReasonFallback { // why the writer reads
					n.Reason, n.Detail = r.node.Reason, r.node.Detail
				}
			}
			m[k] = place{role, n}
		}
	}
	return m
}
