package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

var consensusContact = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func sampleTerms() []client.Term {
	return []client.Term{
		{Cluster: "main", Term: 5, Writer: "db2", Addr: "10.0.0.12:3306", Granted: consensusContact.Add(-2 * time.Minute), Why: "db1 failed: writer lost"},
		{Cluster: "shard2", Term: 1, Writer: "s2a", Addr: "10.0.2.1:3306", Granted: consensusContact.Add(-48 * time.Hour), Why: "first writer"},
	}
}

// TestConsensusGolden: the consensus section of `shoal info` for each
// state of the agent: off, not a voter, a voter waiting to bootstrap, a
// follower, the leader with a failing voter.
func TestConsensusGolden(t *testing.T) {
	utcLocal(t)
	voters := []client.ConsensusVoter{
		{ID: "db1", Addr: "10.0.0.11:7950"},
		{ID: "db2", Addr: "10.0.0.12:7950", Leader: true},
		{ID: "db3", Addr: "10.0.0.13:7950"},
	}
	leaderVoters := []client.ConsensusVoter{
		{ID: "db1", Addr: "10.0.0.11:7950", Leader: true},
		{ID: "db2", Addr: "10.0.0.12:7950"},
		{ID: "db3", Addr: "10.0.0.13:7950", Failing: true, LastContact: consensusContact.Add(-40 * time.Second)},
	}
	for _, tc := range []struct {
		file string
		c    *client.Consensus
	}{
		{"consensus.off", nil},
		{"consensus.not-voter", &client.Consensus{BootstrapExpect: 3, Voters: []client.ConsensusVoter{}, Refused: map[string]uint64{}, Terms: sampleTerms(),
			TermKeys: []string{"MCowBQYDK2VwAyEAuNq8cvGMNm1DwQ0rNBe8P9ZCKnSqz9FYiY1g7Z0Q2g=", "line\nbreak\u001b[31m"}}},
		{"consensus.no-term-key", &client.Consensus{BootstrapExpect: 3, Voters: []client.ConsensusVoter{}, Refused: map[string]uint64{}, Terms: []client.Term{}, TermKeys: []string{}}},
		{"consensus.waiting", &client.Consensus{Voter: true, ID: "db1", Addr: "10.0.0.11:7950", BootstrapExpect: 3, State: "follower",
			Voters: []client.ConsensusVoter{}, Refused: map[string]uint64{"bad-key": 2}, Terms: []client.Term{}}},
		{"consensus.follower", &client.Consensus{Voter: true, ID: "db1", Addr: "10.0.0.11:7950", BootstrapExpect: 3, State: "follower",
			Leader: "db2", LeaderAddr: "10.0.0.12:7950", Bootstrapped: true, RaftTerm: 4, LastIndex: 57, AppliedIndex: 57,
			LastContact: consensusContact, Voters: voters, Refused: map[string]uint64{"timeout": 1, "bad-key": 3, "per-ip": 12}, Terms: sampleTerms(),
			Group: "0a1b2c3d", Groups: []client.ConsensusGroup{{ID: "0a1b2c3d", Voters: []string{"db1", "db2", "db3"}}},
			TermKeys: []string{"uNq8cvGMNm1DwQ0rNBe8P9ZCKnSqz9FYiY1g7Z0Q2gA="}}},
		{"consensus.leader", &client.Consensus{Failover: true, Failovers: map[string]string{"main": "failed over to db2 (term 5): db2 is the most advanced replica (0-1-120)"}, Voter: true, ID: "db1", Addr: "10.0.0.11:7950", BootstrapExpect: 3, State: "leader",
			Leader: "db1", LeaderAddr: "10.0.0.11:7950", Bootstrapped: true, RaftTerm: 5, LastIndex: 60, AppliedIndex: 59,
			Voters: leaderVoters, Refused: map[string]uint64{}, Terms: sampleTerms(), Group: "0a1b2c3d",
			Groups: []client.ConsensusGroup{{ID: "0a1b2c3d", Voters: []string{"db1", "db2", "db3"}}, {ID: "9f8e7d6c", Voters: []string{"db4"}}}}},
	} {
		var b bytes.Buffer
		in := &client.Info{Node: "db1", Addr: "10.0.0.11:7946", Status: "alive", Version: "1.2.3", GoVersion: "go1.26", Uptime: "1h0m0s",
			Tags: map[string]string{"role": "db", "cluster": "main"}, Encrypted: true, Profile: "lan",
			Timings: client.Timings{ProbeInterval: "1s", ProbeTimeout: "500ms", SuspicionMult: 4, GossipInterval: "200ms", RetransmitMult: 4},
			Serf:    client.SerfStats{Members: 5}, Publish: client.PublishStatus{OK: true}, Consensus: tc.c}
		if err := writeInfo(&b, in); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
}
