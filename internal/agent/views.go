package agent

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/internal/agent/poolevent"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// poolNodes converts a cluster's nodes, each with its lag in lags (the
// cluster's part of routing.Update.Lags) when it has one.
func poolNodes(ns []pool.Node, lags map[string]pool.Lag) []view.PoolNode {
	out := make([]view.PoolNode, 0, len(ns))
	for _, n := range ns {
		v := view.PoolNode{Name: n.Name, Addr: n.Addr, Reason: string(n.Reason), Detail: n.Detail, Until: n.Until}
		if l, ok := lags[n.Name]; ok {
			v.Lag = poolevent.LagView(l)
		}
		out = append(out, v)
	}
	return out
}

// clusterPools returns p's clusters (only the named one unless cluster is
// "") as the API shows them: the pool schema (package poolschema), with
// until on damped nodes, the whole writer term, and each replica's lag from lags. The lag is not
// in the pool schema: it changes without the pool changing, and the pool
// file and the hooks' payloads must change only with the pool.
func clusterPools(p *pool.Pool, lags pool.Lags, cluster string) []view.ClusterPool {
	out := []view.ClusterPool{}
	if p == nil {
		return out
	}
	for _, c := range p.Clusters {
		if cluster != "" && c.Name != cluster {
			continue
		}
		l := lags.Nodes[c.Name]
		out = append(out, view.ClusterPool{
			Name: c.Name, Writers: poolNodes(c.Writers, l), Readers: poolNodes(c.Readers, l), Out: poolNodes(c.Out, l),
			Conflict: c.Schema().Conflict, Term: viewTerm(c.Term), Unsafe: c.Unsafe,
		})
	}
	return out
}

// viewTerm is a writer term as the API shows it; nil when the cluster
// requires none.
func viewTerm(t *pool.Term) *view.Term {
	if t == nil {
		return nil
	}
	return &view.Term{Cluster: t.Cluster, Number: t.Number, Writer: t.Writer, Addr: t.Addr, Granted: t.Granted, Why: t.Why}
}

// PoolView returns the current pool as the API and the metrics show it;
// cluster "" means all.
func (a *Agent) PoolView(cluster string) (view.Pool, error) {
	sinks := a.sinkStatus() // before the pool: no sink is ahead of its generation
	u := a.pool.router.Current()
	r := view.Pool{Clusters: []view.ClusterPool{}, Isolated: u.Isolated, UpdatedAt: u.At, Generation: u.Generation}
	r.Isolation, r.Held = poolevent.IsolationText(u.Isolation), u.Isolation.Held
	// The routed pool: what the sinks apply, with held nodes in their role.
	r.Clusters = clusterPools(u.Routed, u.Lags, cluster)
	if cluster != "" && len(r.Clusters) == 0 {
		return r, fmt.Errorf("no cluster %q in the pool", cluster)
	}
	r.Writers, r.Readers, r.Out = []view.PoolNode{}, []view.PoolNode{}, []view.PoolNode{}
	for _, c := range r.Clusters {
		r.Writers = append(r.Writers, withCluster(c.Name, c.Writers)...)
		r.Readers = append(r.Readers, withCluster(c.Name, c.Readers)...)
		r.Out = append(r.Out, withCluster(c.Name, c.Out)...)
	}
	r.Sinks = sinks
	return r, nil
}

// ReplicaLags returns each replica's lag as this agent judges it now, by
// node name (node names are unique in the gossip cluster).
func (a *Agent) ReplicaLags() map[string]view.Lag {
	u := a.pool.router.Current()
	out := map[string]view.Lag{}
	for _, nodes := range u.Lags.Nodes {
		for name, l := range nodes {
			out[name] = *poolevent.LagView(l)
		}
	}
	return out
}

// LocalHealth returns the role and, on db agents, the probe's state.
func (a *Agent) LocalHealth() (string, *view.LocalHealth) {
	st, ok := a.ProbeStatus()
	if !ok {
		return a.cfg.EffectiveRole(), nil
	}
	h := &view.LocalHealth{
		State: st.State.String(), Reason: string(st.Reason), Message: st.Message, Since: st.Since,
		Target: a.probe.Config().Target(), LastCheck: st.Last.Start, Checks: st.Checks, Connects: st.Connects,
		Reachable: st.Last.Facts.Reachable, Version: st.Known.Version,
		LastIOError: st.Known.Replication.LastIOError, LastSQLError: st.Known.Replication.LastSQLError,
		PositionNote: st.Known.PositionNote,
		Health:       st.Health(a.mysqlPort()),
		Published:    a.Serf().LocalMember().Tags[tags.KeyHealth],
		Fence:        a.cons.fence.Status(),
	}
	if st.Last.Duration > 0 {
		h.LastDuration = st.Last.Duration
	}
	return a.cfg.EffectiveRole(), h
}

func withCluster(cluster string, ns []view.PoolNode) []view.PoolNode {
	out := make([]view.PoolNode, len(ns))
	for i, n := range ns {
		n.Cluster = cluster
		out[i] = n
	}
	return out
}

// MemberRTT is the round trip to the member name that serf's network
// coordinates estimate; false for this agent itself and for a member
// without a coordinate yet.
func (a *Agent) MemberRTT(name string) (time.Duration, bool) {
	s := a.Serf()
	if name == s.LocalMember().Name {
		return 0, false
	}
	me, err := s.GetCoordinate()
	if err != nil {
		return 0, false
	}
	them, ok := s.GetCachedCoordinate(name)
	if !ok {
		return 0, false
	}
	return me.DistanceTo(them), true
}
