package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shoaldb/shoal/internal/view"
)

var consensusNow = time.Unix(1700000000, 0)

func consensusTerms() []view.Term {
	return []view.Term{{Cluster: "main", Number: 5, Writer: "db2"}, {Cluster: "shard2", Number: 1, Writer: "s2a"}}
}

func TestConsensusCollector(t *testing.T) {
	follower := &view.Consensus{
		Voter: true, ID: "db1", State: "follower", Leader: "db2", LeaderAddr: "10.0.0.12:7950", Bootstrapped: true,
		RaftTerm: 4, LastIndex: 58, AppliedIndex: 57, LastContact: consensusNow.Add(-1500 * time.Millisecond),
		Voters:  []view.ConsensusVoter{{ID: "db1"}, {ID: "db2", Leader: true}, {ID: "db3"}},
		Refused: map[string]uint64{"bad-key": 3, "timeout": 1},
		Terms:   consensusTerms(),
		Groups:  []view.ConsensusGroup{{ID: "0a1b2c3d", Voters: []string{"db1", "db2", "db3"}}},
	}
	// The leader's state as raft spells it.
	leader := &view.Consensus{
		Voter: true, ID: "db1", State: "Leader", Leader: "db1", LeaderAddr: "10.0.0.11:7950", Bootstrapped: true,
		RaftTerm: 5, AppliedIndex: 60,
		Voters:  []view.ConsensusVoter{{ID: "db1", Leader: true}, {ID: "db2"}, {ID: "db3", Failing: true, LastContact: consensusNow.Add(-time.Minute)}},
		Refused: map[string]uint64{},
		Groups:  []view.ConsensusGroup{{ID: "0a1b2c3d", Voters: []string{"db1", "db2", "db3"}}, {ID: "9f8e7d6c", Voters: []string{"db4"}}},
	}
	waiting := &view.Consensus{Voter: true, ID: "db1", State: "follower", BootstrapExpect: 3}
	for _, tc := range []struct {
		name string
		v    *view.Consensus
		want string
	}{
		{"no consensus key", nil, ""},
		{"not a voter", &view.Consensus{BootstrapExpect: 3, Terms: consensusTerms()[:1]}, `
shoal_consensus_raft_groups 0
shoal_consensus_voter 0
shoal_consensus_writer_term{cluster="main"} 5
`},
		{"follower", follower, `
shoal_consensus_applied_index 57
shoal_consensus_bootstrapped 1
shoal_consensus_last_contact_seconds 1.5
shoal_consensus_leader 0
shoal_consensus_leader_known 1
shoal_consensus_raft_groups 1
shoal_consensus_raft_term 4
shoal_consensus_refused_total{reason="bad-key"} 3
shoal_consensus_refused_total{reason="timeout"} 1
shoal_consensus_voter 1
shoal_consensus_voters 3
shoal_consensus_writer_term{cluster="main"} 5
shoal_consensus_writer_term{cluster="shard2"} 1
`},
		{"leader", leader, `
shoal_consensus_applied_index 60
shoal_consensus_bootstrapped 1
shoal_consensus_leader 1
shoal_consensus_leader_known 1
shoal_consensus_raft_groups 2
shoal_consensus_raft_term 5
shoal_consensus_voter 1
shoal_consensus_voters 3
shoal_consensus_voters_failing 1
`},
		{"waiting for bootstrap", waiting, `
shoal_consensus_applied_index 0
shoal_consensus_bootstrapped 0
shoal_consensus_leader 0
shoal_consensus_leader_known 0
shoal_consensus_raft_groups 0
shoal_consensus_raft_term 0
shoal_consensus_voter 1
shoal_consensus_voters 0
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConsensusCollector(func() *view.Consensus { return tc.v }, func() time.Time { return consensusNow })
			if err := testutil.CollectAndCompare(c, strings.NewReader(withMeta(t, c, tc.want))); err != nil {
				t.Error(err)
			}
			if n, err := testutil.CollectAndLint(c); err != nil || len(n) > 0 {
				t.Errorf("lint: %v %v", n, err)
			}
		})
	}
}

// withMeta adds the HELP and TYPE lines of c's families, as c gathers
// them, to samples: the exposition CollectAndCompare wants.
func withMeta(t *testing.T, c prometheus.Collector, samples string) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	for _, mf := range mfs {
		meta[mf.GetName()] = "# HELP " + mf.GetName() + " " + mf.GetHelp() + "\n# TYPE " + mf.GetName() + " " +
			strings.ToLower(mf.GetType().String()) + "\n"
	}
	var b strings.Builder
	done := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(samples), "\n") {
		if line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if !done[name] {
			done[name] = true
			b.WriteString(meta[name])
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// Cluster names and refused reasons reach labels escaped: the scrape
// gathers with hostile names, every label is printable UTF-8, and two
// names that show as the same label give one series.
func TestConsensusCollectorHostileNames(t *testing.T) {
	v := &view.Consensus{Voter: true, State: "leader", Refused: map[string]uint64{}}
	for _, s := range append(hostile, "main", "main") {
		v.Terms = append(v.Terms, view.Term{Cluster: s, Number: 2})
		v.Refused[s+"r"]++
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewConsensusCollector(func() *view.Consensus { return v }, time.Now))
	if n := checkLabelsPrintable(t, reg); n < len(hostile) {
		t.Fatalf("only %d labels gathered", n)
	}
}
