package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/view"
)

// PoolCollector reports the routing pool, isolation and the sinks at scrape
// time, from the same view `shoal pool` prints.
type PoolCollector struct {
	view                                 func() view.Pool
	nodes, in, out, conflict, isolated   *prometheus.Desc
	term                                 *prometheus.Desc
	held                                 *prometheus.Desc
	generation, sinkApplied              *prometheus.Desc
	sinkOK, sinkLastSuccess, sinkFailure *prometheus.Desc
	behindTx, lagSeconds                 *prometheus.Desc
}

// NewPoolCollector reads view when scraped.
func NewPoolCollector(view func() view.Pool) *PoolCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &PoolCollector{
		view:            view,
		nodes:           d("pool_nodes", "Database nodes per cluster and role (writer, reader, out) in this agent's pool.", "cluster", "role"),
		in:              d("pool_in", "1 for each node in the pool, by cluster and role (writer or reader).", "cluster", "role", "node"),
		out:             d("pool_out", "1 for each database node out of the pool, with the reason.", "cluster", "node", "reason"),
		conflict:        d("pool_writer_conflict", "1 while two or more nodes of the cluster are writable (at most one is routed to).", "cluster"),
		term:            d("pool_writer_term", "The writer term this agent routes the cluster's writes by: only its holder may be the writer (0: the cluster requires a term and none is known, so it has no writer). No series for a cluster that requires none (no voters, or Galera).", "cluster"),
		isolated:        d("pool_isolated", "1 while this agent cannot reach the fleet and holds what it routed.", nil...),
		held:            d("pool_held_nodes", "Nodes kept in their role because this agent cannot verify their failure.", nil...),
		generation:      d("pool_generation", "The router's generation: the number of the latest pool it computed (0: none yet).", nil...),
		sinkApplied:     d("sink_applied_generation", "Generation of the last pool the sink fully applied: succeeded and not frozen (0: none yet); behind shoal_pool_generation while it fails or holds removals.", "sink"),
		sinkOK:          d("sink_up", "1 when the sink's last apply succeeded.", "sink"),
		sinkLastSuccess: d("sink_last_success_timestamp_seconds", "Unix time of the sink's last successful apply (0: none yet).", "sink"),
		sinkFailure:     d("sink_failures_total", "Failed applies of the sink since the agent started.", "sink"),
		behindTx: d("replica_behind_transactions", "Transactions the cluster's writer has that the replica lacks, by their GTID positions as this agent last saw them (replicas whose lag is measured by GTID only).",
			"cluster", "node"),
		lagSeconds: d("replica_lag_seconds", "Replication lag of each replica as this agent judges it: source gtid, how long ago this agent saw the writer pass the replica's GTID position; source sbm, the replica's Seconds_Behind_Master (absent when unknown).",
			"cluster", "node", "source"),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.nodes, c.in, c.out, c.conflict, c.term, c.isolated, c.held, c.generation, c.sinkApplied, c.sinkOK, c.sinkLastSuccess, c.sinkFailure, c.behindTx, c.lagSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.view()
	gauge := func(d *prometheus.Desc, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, safeLabels(labels)...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, cl := range v.Clusters {
		gauge(c.nodes, float64(len(cl.Writers)), cl.Name, "writer")
		gauge(c.nodes, float64(len(cl.Readers)), cl.Name, "reader")
		gauge(c.nodes, float64(len(cl.Out)), cl.Name, "out")
		for _, n := range cl.Writers {
			gauge(c.in, 1, cl.Name, "writer", n.Name)
		}
		for _, n := range cl.Readers {
			gauge(c.in, 1, cl.Name, "reader", n.Name)
		}
		for _, n := range cl.Out {
			gauge(c.out, 1, cl.Name, n.Name, n.Reason)
		}
		gauge(c.conflict, b2f(len(cl.Conflict) > 0), cl.Name)
		if cl.Term != nil {
			gauge(c.term, float64(cl.Term.Number), cl.Name)
		}
		c.collectLags(cl, gauge)
	}
	gauge(c.isolated, b2f(v.Isolated))
	gauge(c.held, float64(v.Held))
	gauge(c.generation, float64(v.Generation))
	for _, s := range v.Sinks {
		gauge(c.sinkOK, b2f(s.State == view.SinkOK), s.Name)
		gauge(c.sinkApplied, float64(s.AppliedGeneration), s.Name)
		var last float64
		if !s.LastSuccess.IsZero() {
			last = float64(s.LastSuccess.UnixNano()) / 1e9
		}
		gauge(c.sinkLastSuccess, last, s.Name)
		ch <- prometheus.MustNewConstMetric(c.sinkFailure, prometheus.CounterValue, float64(s.Failures), Label(s.Name))
	}
}

// safeLabels makes every label value safe (Label), in place.
func safeLabels(vs []string) []string {
	for i, v := range vs {
		vs[i] = Label(v)
	}
	return vs
}

// collectLags reports the lag of each replica of cl that has one. The
// series are built at each scrape from the router's current lags, so a
// node that no longer has a lag (gone, or out for a hard reason) has no
// series left behind.
func (c *PoolCollector) collectLags(cl view.ClusterPool, gauge func(*prometheus.Desc, float64, ...string)) {
	// A node in two lists (writer and reader) is reported once; names are
	// compared as labels, which is what must be unique.
	seen := map[string]bool{}
	for _, ns := range [][]view.PoolNode{cl.Writers, cl.Readers, cl.Out} {
		for _, n := range ns {
			if n.Lag == nil || seen[Label(n.Name)] {
				continue
			}
			seen[Label(n.Name)] = true
			if n.Lag.Transactions != nil {
				gauge(c.behindTx, float64(*n.Lag.Transactions), cl.Name, n.Name)
			}
			if n.Lag.Seconds != nil {
				gauge(c.lagSeconds, *n.Lag.Seconds, cl.Name, n.Name, n.Lag.Source)
			}
		}
	}
}
