package metrics

import "github.com/prometheus/client_golang/prometheus"

// SwitchoverCounts reads the counters of the agent's part in switchovers
// (package switchover).
type SwitchoverCounts struct {
	Taken, Refused, Resumed func() uint64
	// Failovers: dead writers this agent, as the raft leader, replaced
	// (promoted) or judged dead but did not replace (not going ahead).
	FailoversPromoted, FailoversNotDone func() uint64
	// LostTransactions: what returning old writers held beyond the
	// promotion position of the failover that replaced them.
	LostTransactions func() uint64
}

// NewSwitchoverCollectors returns the switchover counters.
func NewSwitchoverCollectors(c SwitchoverCounts) []prometheus.Collector {
	return counterFuncs(
		counter{"switchover_steps_total", "Switchover steps this agent took (on its own server, or in raft as the leader).", nil, c.Taken},
		counter{"switchover_steps_refused_total", "Switchover steps refused: not signed with a term key, expired, or of another raft group.", nil, c.Refused},
		counter{"switchover_resumed_total", "Switchovers this agent, as the raft leader, finished for a coordinator that died or passed its deadline: rolled back before the grant, completed after it.", nil, c.Resumed},
		counter{"failovers_total", "Failovers this agent ran as the raft leader, by outcome: promoted (a replica holds the next term), not_done (the writer was judged dead, but no replica was promoted: none could be without losing transactions, the writer came back, or no grant).", prometheus.Labels{"outcome": "promoted"}, c.FailoversPromoted},
		counter{"failovers_total", "Failovers this agent ran as the raft leader, by outcome: promoted (a replica holds the next term), not_done (the writer was judged dead, but no replica was promoted: none could be without losing transactions, the writer came back, or no grant).", prometheus.Labels{"outcome": "not_done"}, c.FailoversNotDone},
		counter{"failover_lost_transactions_total", "Transactions this agent's server held, when it came back after a failover replaced it as the writer, beyond the new writer's position at the promotion: never on the new writer, lost to the cluster. The server is then left read-only and replicating from nobody (diverged) until it is reseeded.", nil, c.LostTransactions},
	)
}
