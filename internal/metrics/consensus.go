package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/view"
)

// ConsensusCollector reports the consensus layer at scrape time, from the
// same view `shoal info` prints. An agent without a consensus key (a nil
// view) reports none of it; one that does not vote reports only
// shoal_consensus_voter 0 and the writer terms it knows.
type ConsensusCollector struct {
	view func() *view.Consensus
	now  func() time.Time

	voter, leader, leaderKnown, bootstrapped, voters, failing   *prometheus.Desc
	raftTerm, applied, lastContact, refused, writerTerm, groups *prometheus.Desc
}

// NewConsensusCollector reads view when scraped; now is the agent's clock,
// for the time since a follower's last contact with the leader.
func NewConsensusCollector(view func() *view.Consensus, now func() time.Time) *ConsensusCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_consensus_"+name, help, labels, nil)
	}
	return &ConsensusCollector{
		view: view, now: now,
		voter:        d("voter", "1 when this agent is a raft voter, 0 when it has a consensus key but does not vote (absent without a consensus key)."),
		leader:       d("leader", "1 when this voter is the raft leader."),
		leaderKnown:  d("leader_known", "1 when this voter knows a raft leader (itself included)."),
		bootstrapped: d("bootstrapped", "1 when this voter is in a raft configuration (0 while it waits for bootstrap_expect voters)."),
		voters:       d("voters", "Voters in the raft configuration as this voter knows it."),
		failing:      d("voters_failing", "Voters whose heartbeats fail, as the leader sees them (the leader only)."),
		raftTerm:     d("raft_term", "This voter's current raft term."),
		applied:      d("applied_index", "The last raft log index this voter applied to its writer terms."),
		lastContact:  d("last_contact_seconds", "Seconds since this follower last heard from the leader (absent on the leader and before any contact)."),
		refused:      d("refused_total", "Raft connections this voter refused, by reason: bad-key (a peer without a consensus key), handshake, timeout, per-ip (too many handshakes in flight from one address), overload, callback-panic.", "reason"),
		writerTerm:   d("writer_term", "The writer term of each cluster this agent knows: its number, which grows with each writer the voters grant.", "cluster"),
		groups:       d("raft_groups", "Raft groups the alive voters' tags name (this voter's own included): 1 in a healthy fleet; more than 1 means voters bootstrapped apart, and no writes are routed where a writer term is required."),
	}
}

// Describe implements prometheus.Collector.
func (c *ConsensusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.voter, c.leader, c.leaderKnown, c.bootstrapped, c.voters, c.failing,
		c.raftTerm, c.applied, c.lastContact, c.refused, c.writerTerm, c.groups} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ConsensusCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.view()
	if v == nil {
		return
	}
	gauge := func(d *prometheus.Desc, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, safeLabels(labels)...)
	}
	gauge(c.voter, b2f(v.Voter))
	gauge(c.groups, float64(len(v.Groups)))
	// Cluster names come from gossip: two that show as the same label
	// are reported once (the first, in the view's order).
	seen := map[string]bool{}
	for _, t := range v.Terms {
		if l := Label(t.Cluster); !seen[l] {
			seen[l] = true
			gauge(c.writerTerm, float64(t.Number), l)
		}
	}
	if !v.Voter {
		return
	}
	// raft names its states in title case (Leader); the view may too.
	leads := strings.EqualFold(v.State, "leader")
	gauge(c.leader, b2f(leads))
	gauge(c.leaderKnown, b2f(v.Leader != "" || v.LeaderAddr != ""))
	gauge(c.bootstrapped, b2f(v.Bootstrapped))
	gauge(c.voters, float64(len(v.Voters)))
	if leads {
		n := 0
		for _, vo := range v.Voters {
			if vo.Failing {
				n++
			}
		}
		gauge(c.failing, float64(n))
	}
	gauge(c.raftTerm, float64(v.RaftTerm))
	gauge(c.applied, float64(v.AppliedIndex))
	if !leads && !v.LastContact.IsZero() {
		gauge(c.lastContact, max(0, c.now().Sub(v.LastContact).Seconds()))
	}
	// Reasons that show as the same label are added up.
	counted := map[string]uint64{}
	for reason, n := range v.Refused {
		counted[Label(reason)] += n
	}
	for reason, n := range counted {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n), reason)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
