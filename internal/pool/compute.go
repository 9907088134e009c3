package pool

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// Compute returns the pool for members under policy, knowing no writer
// term (see ComputeFresh). prev is the previous pool (nil at start); it
// only decides which writer stays in a conflict in a cluster that requires
// no term.
// The Galera writer never depends on prev: see pickWriter.
// Compute does not modify its arguments, and its result does not depend on
// the order of members. If members holds the same name twice (serf never
// does), one of them is used, chosen by content, not by position.
func Compute(members []Member, policy Policy, prev *Pool) *Pool {
	p, _ := ComputeFresh(members, policy, prev, Freshness{}, TermView{})
	return p
}

// ComputeFresh is Compute that also judges each replica's freshness against
// the writer's GTID position (f; see judgeFreshness), follows the writer
// terms this agent knows (tv; see pickTermWriter) in the clusters that
// require one, and returns the lags it judged by.
func ComputeFresh(members []Member, policy Policy, prev *Pool, f Freshness, tv TermView) (*Pool, Lags) {
	byCluster := map[string][]eval{}
	for _, m := range dedupe(members) {
		if m.Tags[tags.KeyRole] != tags.RoleDB {
			continue
		}
		c := tags.Cluster(m.Tags)
		byCluster[c] = append(byCluster[c], evaluate(m, policy))
	}
	p := &Pool{}
	lags := Lags{Nodes: map[string]map[string]Lag{}}
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		lags.Nodes[name] = map[string]Lag{}
		p.Clusters = append(p.Clusters, buildCluster(name, byCluster[name], policy, prev.Cluster(name).Writer(), f, tv, lags.Nodes[name], &lags.Recheck))
	}
	return p, lags
}

// buildCluster applies the cluster-wide rules: writer selection (by the
// writer term when the cluster requires one) and conflict, the replicas'
// source, writer serving reads, and the floors.
func buildCluster(name string, evals []eval, policy Policy, prevWriter string, f Freshness, tv TermView, lags map[string]Lag, recheck *time.Time) Cluster {
	c := Cluster{Name: name}
	var writers, softWriters, readers, softReaders []eval
	for _, e := range evals {
		switch e.kind {
		case kindOut:
			c.Out = append(c.Out, e.node)
		case kindWriter:
			writers = append(writers, e)
		case kindSoftWriter:
			softWriters = append(softWriters, e)
		case kindReader:
			readers = append(readers, e)
		case kindSoftReader:
			softReaders = append(softReaders, e)
		}
	}

	var writer, holder *eval
	if requiresTerm(evals) {
		writer = c.pickTermWriter(slices.Concat(writers, softWriters), evals, tv)
		if writer == nil && tv.blocked() == "" {
			holder = readOnlyHolder(*c.Term, slices.Concat(readers, softReaders))
		}
	} else {
		if noWriterTerm(evals) {
			c.Unsafe = UnsafeNoTerm
		}
		// Writer, with the writer floor when no passing candidate exists.
		floored := false
		if len(writers) == 0 {
			writers, softWriters, floored = softWriters, nil, true
		}
		for _, e := range softWriters {
			c.Out = append(c.Out, e.node)
		}
		softReaders = append(softReaders, pickWriter(&c, writers, floored, prevWriter)...)
		if w := c.Writer(); w != "" {
			writer = &writers[slices.IndexFunc(writers, func(e eval) bool { return e.node.Name == w })]
		}
	}
	if writer != nil {
		readers = c.dropWrongSource(readers, writer.serverID)
		softReaders = c.dropWrongSource(softReaders, writer.serverID)
	}
	// Freshness is judged against the writer, or, while the term holder is
	// read-only (fenced when cut off from the quorum, demoted by a
	// switchover), against the holder: it has every write the fleet took,
	// and replicas that miss them must not serve reads just because no
	// server is writable.
	ref := writer
	if ref == nil {
		ref = holder
	}
	judgeFreshness(readers, ref, f, policy, lags, recheck)
	judgeFreshness(softReaders, ref, f, policy, lags, recheck)
	// A reader judged stale moves to the soft readers, a soft one judged
	// fresh to the readers.
	var fresh, soft []eval
	for _, e := range slices.Concat(readers, softReaders) {
		if e.kind == kindReader {
			fresh = append(fresh, e)
		} else {
			soft = append(soft, e)
		}
	}
	readers, softReaders = fresh, soft
	for _, e := range readers {
		c.Readers = append(c.Readers, e.node)
	}
	if policy.WriterServesReads && len(c.Writers) == 1 {
		c.Readers = append(c.Readers, c.Writers[0])
	}

	c.readerFloor(softReaders, policy, holder)

	sortNodes(c.Readers)
	sortNodes(c.Out)
	return c
}

// pickWriter sets c's writer from the candidates (all passing, or all in
// warning when floored) and applies the conflict and Galera rules. Synced
// Galera nodes not chosen go to c.Readers, or are returned as floor candidates
// when floored.
//
// The Galera writer is the first candidate by name, whatever prevWriter
// says. A "keep the previous writer" rule would make the choice depend on
// each agent's own history, and histories differ: agents that start
// together each see their own node synced first and keep it (a real
// 3-node cluster ended with three different writers, for good), an agent
// restarted or cut off and healed has no previous writer or another one.
// Only a rule that reads nothing but the gossiped members gives the same
// writer on every agent. The price: when the first node by name comes back
// synced, writes move back to it.
func pickWriter(c *Cluster, writers []eval, floored bool, prevWriter string) (softReaders []eval) {
	sortEvals(writers)
	switch {
	case len(writers) == 0:
	case len(writers) == 1 || allGalera(writers):
		for j, e := range writers {
			switch {
			case j == 0:
				c.Writers = []Node{writerNode(e, floored, "")}
			case floored:
				softReaders = append(softReaders, e)
			default:
				e.node.Reason, e.node.Detail = ReasonNone, ""
				c.Readers = append(c.Readers, e.node)
			}
		}
	default:
		for _, e := range writers {
			c.Conflict = append(c.Conflict, e.node.Name)
		}
		list := strings.Join(c.Conflict, ", ")
		for _, e := range writers {
			if e.node.Name == prevWriter {
				c.Writers = []Node{writerNode(e, floored, "conflict: kept as the previous writer; writable: "+list)}
				continue
			}
			c.Out = append(c.Out, Node{Name: e.node.Name, Addr: e.node.Addr, Reason: ReasonConflict, Detail: "writable: " + list})
		}
	}
	return softReaders
}

// dropWrongSource moves to c.Out, with reason wrong-source, every replica of
// es whose source server_id is known and is not writerID, the server_id of
// c's writer, and returns the others. A replica replicates the writer's
// data or it does not: this is a hard reason, never floored (docs/pool.md).
// A replica of a replica (chained replication) is wrong-source too: its
// source is not the writer. An unknown source (0) or writer server_id keeps
// today's rules.
func (c *Cluster) dropWrongSource(es []eval, writerID uint32) []eval {
	if writerID == 0 {
		return es
	}
	return slices.DeleteFunc(es, func(e eval) bool {
		if e.sourceID == 0 || e.sourceID == writerID {
			return false
		}
		c.Out = append(c.Out, Node{Name: e.node.Name, Addr: e.node.Addr, Reason: ReasonWrongSource,
			Detail: fmt.Sprintf("replicates from server_id %d, writer has %d", e.sourceID, writerID)})
		return true
	})
}

// readerFloor keeps soft-out readers in, the least bad first (leastBad),
// while fewer readers than the policy's minimum remain. A stale candidate
// (lag, replication-stopped) is kept only as policy.ReadFallback says: with
// stale-reader (or the zero value) like any other; with none never; with
// writer never while the cluster has a passing writer, which serves reads
// instead (reason fallback) if the floor lacked readers that only stale
// candidates could give, and like stale-reader while it has none.
//
// holder, when not nil, is the cluster's term holder while it is read-only
// and there is no writer (see readOnlyHolder): with writer, it takes the
// writer's place, serving reads instead of stale readers, as it has every
// write the fleet took.
func (c *Cluster) readerFloor(soft []eval, policy Policy, holder *eval) {
	fallback := policy.ReadFallback
	var fb Node // who serves reads instead of stale readers, and why
	switch {
	case fallback != ReadFallbackWriter:
	case c.passingWriter():
		fb = Node{Name: c.Writers[0].Name, Addr: c.Writers[0].Addr, Detail: "the writer serves reads instead of stale readers: "}
	case holder != nil && len(c.Writers) == 0:
		fb = Node{Name: holder.node.Name, Addr: holder.node.Addr,
			Detail: fmt.Sprintf("the read-only holder of term %d serves reads instead of stale readers: ", c.Term.Number)}
	}
	if fallback == "" || fallback == ReadFallbackWriter && fb.Name == "" {
		fallback = ReadFallbackStaleReader
	}
	slices.SortFunc(soft, leastBad)
	need := policy.minReaders() - len(c.Readers)
	var stale []eval
	for _, e := range soft {
		switch {
		case fallback != ReadFallbackStaleReader && e.node.Name == fb.Name:
			// The holder: in below if it must serve reads, out otherwise.
			stale = append(stale, e)
		case fallback != ReadFallbackStaleReader && e.node.Reason.stale():
			stale = append(stale, e)
		case need > 0:
			need--
			c.Readers = append(c.Readers, floorNode(e))
		default:
			c.Out = append(c.Out, e.node)
		}
	}
	var names []string
	var self *eval // the holder, when it is among the candidates
	for i, e := range stale {
		if e.node.Name == fb.Name {
			self = &stale[i]
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s)", e.node.Name, e.node.Reason))
	}
	in := slices.ContainsFunc(c.Readers, func(n Node) bool { return n.Name == fb.Name })
	switch {
	case need <= 0 || fallback != ReadFallbackWriter || in:
	case len(names) > 0:
		fb.Reason = ReasonFallback
		fb.Detail += strings.Join(names, ", ")
		c.Readers = append(c.Readers, fb)
		in = true
	case self != nil:
		// No stale reader to stand in for: the holder is kept by the floor
		// like any read-only server.
		c.Readers = append(c.Readers, floorNode(*self))
		in = true
	}
	for _, e := range stale {
		if e.node.Name != fb.Name || !in {
			c.Out = append(c.Out, e.node)
		}
	}
}

// readOnlyHolder returns the term t's holder among the cluster's read-only
// servers (not out for a hard reason), or nil: the server named and
// addressed as t says, when its GTID position is known.
func readOnlyHolder(t Term, ro []eval) *eval {
	if t.Number == 0 {
		return nil
	}
	for i := range ro {
		if e := ro[i]; e.node.Name == t.Writer && e.node.Addr == t.Addr && e.pos.Known() {
			return &e
		}
	}
	return nil
}

// passingWriter reports whether c has a writer that is not kept by the floor.
func (c *Cluster) passingWriter() bool {
	return len(c.Writers) == 1 && c.Writers[0].Reason == ReasonNone
}

func writerNode(e eval, floored bool, detail string) Node {
	if floored {
		n := floorNode(e)
		if detail != "" {
			n.Detail += "; " + detail
		}
		return n
	}
	e.node.Reason, e.node.Detail = ReasonNone, detail
	return e.node
}

// floorNode is a soft-out node kept in by the floor; Detail keeps the soft reason.
func floorNode(e eval) Node {
	n := e.node
	n.Reason = ReasonFloor
	n.Detail = string(e.node.Reason)
	if e.node.Detail != "" {
		n.Detail = fmt.Sprintf("%s: %s", e.node.Reason, e.node.Detail)
	}
	return n
}

func allGalera(es []eval) bool {
	for _, e := range es {
		if !e.galera {
			return false
		}
	}
	return true
}

// leastBad orders floor candidates: known lag before unknown, less lag first,
// then by name.
func leastBad(a, b eval) int {
	if a.lagKnown != b.lagKnown {
		if a.lagKnown {
			return -1
		}
		return 1
	}
	if a.lagKnown {
		if c := cmp.Compare(a.lag, b.lag); c != 0 {
			return c
		}
	}
	return strings.Compare(a.node.Name, b.node.Name)
}

func sortEvals(es []eval) {
	slices.SortFunc(es, func(a, b eval) int { return strings.Compare(a.node.Name, b.node.Name) })
}

func sortNodes(ns []Node) {
	slices.SortFunc(ns, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
}
