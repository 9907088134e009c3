//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// ConsensusFlags are the db agents' flags for the consensus layer: the
// key, a keyring file and raft data in each agent's directory, and the
// number of voters that form the first quorum.
func ConsensusFlags(key string, expect int) []string {
	return []string{"--consensus-key", key, "--consensus-keyring-file", "{dir}/consensus.keyring",
		"--consensus-bootstrap-expect", fmt.Sprint(expect)}
}

// ConsensusInfo is the consensus part of an agent's /v1/agent/self.
type ConsensusInfo client.Consensus

// ConsensusTerm is a cluster's writer term as an agent shows it.
type ConsensusTerm = client.Term

// Consensus reads an agent's consensus state (nil: the agent has none).
func (c *Cluster) Consensus(a *Agent) (*ConsensusInfo, error) {
	var self struct {
		Consensus *ConsensusInfo `json:"consensus"`
	}
	if err := c.Get(a, "/v1/agent/self", &self); err != nil {
		return nil, err
	}
	return self.Consensus, nil
}

// Term is the term of cluster on ci (Term 0: none).
func (ci *ConsensusInfo) Term(cluster string) ConsensusTerm {
	if ci != nil {
		for _, t := range ci.Terms {
			if t.Cluster == cluster {
				return t
			}
		}
	}
	return ConsensusTerm{}
}

// WaitConsensus polls every agent in agents until cond holds for all of
// them, or limit passes; it returns how long it took and the last state
// seen of each, by name.
func (c *Cluster) WaitConsensus(agents []*Agent, limit time.Duration, cond func(*ConsensusInfo) bool) (time.Duration, map[string]*ConsensusInfo, bool) {
	start := time.Now()
	last := map[string]*ConsensusInfo{}
	for {
		all := true
		for _, a := range agents {
			ci, err := c.Consensus(a)
			last[a.Name] = ci
			if err != nil || !cond(ci) {
				all = false
			}
		}
		if all {
			return time.Since(start), last, true
		}
		if time.Since(start) > limit {
			return time.Since(start), last, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ConsensusLeader asks the first of agents who leads, and returns that
// agent and the others.
func (c *Cluster) ConsensusLeader(agents []*Agent) (leader *Agent, rest []*Agent, err error) {
	ci, err := c.Consensus(agents[0])
	if err != nil || ci == nil || ci.Leader == "" {
		return nil, nil, fmt.Errorf("no leader known to %s: %+v, %v", agents[0].Name, ci, err)
	}
	for _, a := range agents {
		if a.Name == ci.Leader {
			leader = a
		} else {
			rest = append(rest, a)
		}
	}
	if leader == nil {
		return nil, nil, fmt.Errorf("leader %q is none of the agents given", ci.Leader)
	}
	return leader, rest, nil
}

// intruderHost starts a new host with a writable MariaDB server of its own
// (named name, with the client schema), as a key holder would, and returns
// it with the db hosts' IPs to join through.
func (c *Cluster) intruderHost(t testing.TB, name string) (*Host, []string) {
	h := c.AddHost(t)
	srv := startServer(t, name, h)
	for _, q := range clientSchema()[:2] {
		srv.MustExec(q)
	}
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	return h, seeds
}
