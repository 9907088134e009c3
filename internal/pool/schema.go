package pool

import (
	"slices"

	"github.com/shoaldb/shoal/pkg/poolschema"
)

// Schema returns p in the pool's JSON schema (package poolschema): lists
// never nil, conflict always present. p may be nil (no clusters).
func (p *Pool) Schema() poolschema.Pool {
	out := poolschema.Pool{Clusters: []poolschema.Cluster{}}
	if p == nil {
		return out
	}
	for _, c := range p.Clusters {
		out.Clusters = append(out.Clusters, c.Schema())
	}
	return out
}

// Schema returns c in the pool's JSON schema.
func (c Cluster) Schema() poolschema.Cluster {
	conflict := slices.Clone(c.Conflict)
	if conflict == nil {
		conflict = []string{}
	}
	return poolschema.Cluster{Name: c.Name, Writers: SchemaNodes(c.Writers), Readers: SchemaNodes(c.Readers),
		Out: SchemaNodes(c.Out), Conflict: conflict}
}

// SchemaNodes returns ns in the pool's JSON schema, never nil.
func SchemaNodes(ns []Node) []poolschema.Node {
	out := make([]poolschema.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, poolschema.Node{Name: n.Name, Addr: n.Addr, Reason: string(n.Reason), Detail: n.Detail})
	}
	return out
}
