// Package poolschema is the JSON form of shoal's routing pool: the one
// schema that the pool-change hook payload, the pool file sink's document
// and GET /v1/pool all carry.
//
// # Stability
//
// Version 1. Every field below is stable: it keeps its name, type and
// meaning for as long as the version is 1. New fields may be added (readers
// must ignore fields they do not know); removing or changing one makes a
// new version. Lists are never null: a cluster with no writer has
// "writers": [], and "conflict" is always present ([] when there is none).
//
// Each use is this schema or a documented superset of it:
//   - the pool-change hook's data.pool is a Pool (docs/hooks.md);
//   - the pool file sink's document adds version, updated_at, node, frozen
//     and, per cluster, held (docs/pool.md);
//   - GET /v1/pool adds the flat writers/readers/out lists, isolation, the
//     sinks and, per node, cluster and until (docs/api.md).
//
// The golden files in testdata/ are the contract; the tests of each use
// check their output against them.
package poolschema

// Version is the schema version of the pool documents.
const Version = 1

// Pool is the routing pool: one entry per cluster, sorted by name.
type Pool struct {
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one cluster's pool.
type Cluster struct {
	Name string `json:"name"`
	// Writers has at most one node.
	Writers []Node `json:"writers"`
	// Readers are the nodes that serve reads, sorted by name.
	Readers []Node `json:"readers"`
	// Out are the nodes in no role, each with its reason.
	Out []Node `json:"out"`
	// Conflict names every node that was writable at once (two or more) while
	// a writer conflict lasts; empty otherwise.
	Conflict []string `json:"conflict"`
	// Term is the writer term the cluster's writer rule followed; absent
	// when the cluster requires none (no consensus voters among its db
	// members, or Galera: docs/pool.md).
	Term *Term `json:"term,omitempty"`
}

// Term is the writer term a cluster's writer rule followed: only the
// term's holder may be the writer (docs/consensus.md).
type Term struct {
	// Number is the term's number; 0 when the cluster requires a term and
	// the agent knows none (then the cluster has no writer).
	Number uint64 `json:"term"`
	// Writer is the name of the node the term was granted to; "" with
	// Number 0. Remote text: escape it when you show it.
	Writer string `json:"writer"`
}

// Node is a member's place in the pool.
type Node struct {
	Name string `json:"name"`
	// Addr is the MySQL address routers send traffic to, "host:port".
	Addr string `json:"addr"`
	// Reason says why a node is out (critical, lag, maintenance, ...; see
	// docs/pool.md), "floor" for a reader kept in only by the reader floor,
	// or "fallback" for the writer (or, with no writer, the read-only
	// writer-term holder) listed among the readers in place of stale
	// readers (pool.read_fallback: writer).
	Reason string `json:"reason,omitempty"`
	// Detail is free text that explains the reason (the probe's message,
	// the maintenance reason); remote text: escape it when you show it.
	Detail string `json:"detail,omitempty"`
}
