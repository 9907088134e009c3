// Package file writes the routing pool to files that other tools read:
// MySQL Router `destinations`, scripts, configuration management.
//
// # Files
//
// Config.Path receives the whole pool as one JSON document (below). When
// Config.ListsDir is set, it also receives two plain-text lists per cluster,
// <cluster>-writers.txt and <cluster>-readers.txt: the "host:port" of each
// node in that role, one a line, sorted, each line ending in a newline. Out
// nodes are never listed. A role with no node gives an empty file (zero
// bytes): tools must see that the role is empty.
//
// Every file is replaced atomically (temp file, fsync, rename), so a reader
// sees the old content or the new, never a mix. Files get Config.Mode.
//
// A file is written only when its content changes; the JSON file's
// updated_at is not part of the comparison, so recomputing the same pool
// rewrites nothing and leaves the mtime alone. Each file is compared and
// written on its own. At the first apply the sink reads each file once, and
// keeps one that already has the content (and the mode). A file removed
// behind the sink's back is written again at the next apply.
//
// Cluster names come from other machines' tags. Only a valid cluster name
// (tags.ValidCluster: 1 to 64 bytes of [A-Za-z0-9._-]) is ever part of a
// file name; the lists of any other cluster (one that only an invalid
// member can name, see package member) are not written, which the status
// notes (and Stats.NoLists) say. That is not a failure: the sink stays healthy and the JSON file
// still has the cluster.
//
// When a cluster leaves the pool (its last member is reaped or pruned), its
// two list files are removed, and this is logged. The sink removes only
// regular files of its own naming pattern in ListsDir that it wrote, or
// found with its content, since it started, and nothing while frozen (the
// files go once it is unfrozen). Lists left by an earlier run for a cluster
// that no longer exists are not touched.
//
// # JSON schema, version 1
//
// Each cluster is the pool schema (package poolschema) plus held:
//
//	{
//	  "version": 1,                  // SchemaVersion; changes only when readers must change
//	  "updated_at": "RFC 3339 time", // when the content last changed, nanoseconds, UTC
//	  "node": "db1",                 // the agent that wrote the file
//	  "frozen": false,               // the agent thinks it is cut off (see Frozen)
//	  "clusters": [                  // sorted by name
//	    {
//	      "name": "main",
//	      "writers": [{"name": "db1", "addr": "10.0.0.1:3306"}],
//	      "readers": [{"name": "db2", "addr": "10.0.0.2:3306"}],
//	      "out": [{"name": "db3", "addr": "10.0.0.3:3306", "reason": "lag", "detail": "..."}],
//	      "conflict": ["db1", "db4"], // writer candidates in conflict; [] when none
//	      "term": {"term": 3, "writer": "db1"}, // the writer term followed; omitted when none is required
//	      "held": ["db5"]             // nodes kept in lists while frozen; omitted when none
//	    }
//	  ]
//	}
//
// writers, readers, out and conflict are always arrays, maybe empty, each sorted by
// name; a writer that serves reads is in both writers and readers. Every
// node has a name and an addr ("host:port"); reason and detail are omitted
// when empty, which is the case for nodes in the pool. term is present
// when the cluster's writer follows a writer term (docs/pool.md), with
// term 0 and writer "" when none is known yet. Readers should ignore keys
// they do not know.
//
// # Frozen
//
// The sink follows the frozen rule of package sink, which every sink
// shares: when the agent thinks it is cut off from the cluster (frozen),
// the lists never lose a node: a node in a list as last written that the
// pool would now remove stays in it, and new nodes are added. The JSON document still
// records the pool as computed, with "frozen": true and, per cluster,
// "held": the names of the nodes kept in a list they have left (a kept
// address that no node of the cluster has any more is named by its address).
// The writers list of a cluster that follows a writer term is the
// exception: it follows the pool exactly (never two writers). When the
// agent is no longer frozen, the lists follow the pool again. A frozen apply
// does not advance the applied generation (package sink).
//
// # Errors
//
// A failed write is logged (a repeat of the same error at debug level) and
// counted in Status (kept by a sink.Recorder); the file keeps its old content and is tried again at
// the next Update, and every Config.Interval while the last apply failed.
package file
