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

// Schema returns c in the pool's JSON schema, with its term's number and
// writer when it requires a term.
func (c Cluster) Schema() poolschema.Cluster {
	conflict := slices.Clone(c.Conflict)
	if conflict == nil {
		conflict = []string{}
	}
	out := poolschema.Cluster{Name: c.Name, Writers: SchemaNodes(c.Writers), Readers: SchemaNodes(c.Readers),
		Out: SchemaNodes(c.Out), Conflict: conflict}
	if c.Term != nil {
		out.Term = &poolschema.Term{Number: c.Term.Number, Writer: c.Term.Writer}
	}
	return out
}

// SchemaNodes returns ns in the pool's JSON schema, never nil.
func SchemaNodes(ns []Node) []poolschema.Node {
	out := make([]poolschema.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, poolschema.Node{Name: n.Name, Addr: n.Addr, Reason: string(n.Reason), Detail: n.Detail})
	}
	return out
}
