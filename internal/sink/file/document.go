package file

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/pkg/poolschema"
)

// SchemaVersion is the version of the JSON document this package writes:
// the pool schema's.
const SchemaVersion = poolschema.Version

// Document is the JSON file: the pool schema (package poolschema) with the
// document's own fields around it and, per cluster, the held nodes. See the
// package documentation.
type Document struct {
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	Node      string    `json:"node"`
	Frozen    bool      `json:"frozen"`
	Clusters  []Cluster `json:"clusters"`
}

// Cluster is one cluster of the pool in the schema, and Held.
type Cluster struct {
	poolschema.Cluster
	// Held names the nodes kept in a writers or readers list they have left,
	// because the agent is frozen.
	Held []string `json:"held,omitempty"`
}

// Role list file suffixes.
const (
	writersSuffix = "-writers.txt"
	readersSuffix = "-readers.txt"
)

// newDocument returns the document for p, without UpdatedAt. held maps a
// cluster name to the names of its held nodes. p may be nil.
func newDocument(p *pool.Pool, node string, frozen bool, held map[string][]string) Document {
	d := Document{Version: SchemaVersion, Node: node, Frozen: frozen, Clusters: []Cluster{}}
	if p == nil {
		return d
	}
	for _, c := range p.Clusters {
		d.Clusters = append(d.Clusters, Cluster{Cluster: c.Schema(), Held: held[c.Name]})
	}
	return d
}

// encode returns d as indented JSON ending in a newline.
func encode(d Document) []byte {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		// A Document holds only strings, ints, bools and a time.
		panic("encode pool document: " + err.Error())
	}
	return append(b, '\n')
}

// contentKey returns the content of d that decides whether the file must be
// rewritten: d encoded without UpdatedAt.
func contentKey(d Document) []byte {
	d.UpdatedAt = time.Time{}
	return encode(d)
}

// fileKey returns the contentKey of a JSON file's data, and false when data
// is not a document.
func fileKey(data []byte) ([]byte, bool) {
	var d Document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, false
	}
	return contentKey(d), true
}

// roleList returns the sorted, distinct addresses of ns. Nodes without an
// address are left out.
func roleList(ns []pool.Node) []string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		if n.Addr != "" {
			out = append(out, n.Addr)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hold returns list plus the addresses of prev missing from it whose removal
// is withheld, sorted, and those addresses: the list a frozen sink writes.
func hold(list, prev []string, withheld func(addr string) bool) (kept, held []string) {
	for _, a := range prev {
		if !slices.Contains(list, a) && withheld(a) {
			held = append(held, a)
		}
	}
	if len(held) == 0 {
		return list, nil
	}
	kept = append(slices.Clone(list), held...)
	slices.Sort(kept)
	return slices.Compact(kept), held
}

// formatList returns addrs one a line; no addresses give no bytes.
func formatList(addrs []string) []byte {
	if len(addrs) == 0 {
		return []byte{}
	}
	return []byte(strings.Join(addrs, "\n") + "\n")
}

// parseList returns the addresses of a list file's data.
func parseList(data []byte) []string {
	var out []string
	for line := range bytes.Lines(data) {
		if a := strings.TrimSpace(string(line)); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// nameOf returns the name of c's node with address addr, or addr when none
// has it.
func nameOf(c *pool.Cluster, addr string) string {
	for _, ns := range [][]pool.Node{c.Writers, c.Readers, c.Out} {
		for _, n := range ns {
			if n.Addr == addr {
				return n.Name
			}
		}
	}
	return addr
}
