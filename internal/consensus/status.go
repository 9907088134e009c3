package consensus

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shoaldb/shoal/internal/pool"
)

// Status is what `shoal info`, /metrics and the status page show of the
// consensus layer.
type Status struct {
	ID         string `json:"id"`
	Addr       string `json:"addr"`
	State      string `json:"state"` // leader, follower, candidate, shutdown
	Leader     string `json:"leader"`
	LeaderAddr string `json:"leader_addr"`
	// Bootstrapped: this node is in a raft configuration.
	Bootstrapped bool   `json:"bootstrapped"`
	RaftTerm     uint64 `json:"raft_term"`
	LastIndex    uint64 `json:"last_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// LastContact is a follower's last contact with the leader (zero: none
	// or this node leads).
	LastContact time.Time `json:"last_contact,omitzero"`
	Voters      []Voter   `json:"voters"`
	// Refused counts the raft connections refused, by reason.
	Refused map[string]uint64 `json:"refused"`
	Terms   []pool.Term       `json:"terms"`
}

// Voter is one server of the configuration.
type Voter struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Leader bool   `json:"leader"`
	// Failing (on the leader): its heartbeats fail; LastContact is when
	// it last answered.
	Failing     bool      `json:"failing"`
	LastContact time.Time `json:"last_contact,omitzero"`
}

// Status reports the node's state now.
func (n *Node) Status() Status {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	stats := n.raft.Stats()
	s := Status{
		ID: n.cfg.ID, Addr: n.cfg.Advertise, State: strings.ToLower(n.raft.State().String()),
		Leader: string(leaderID), LeaderAddr: string(leaderAddr), Bootstrapped: n.HasState(),
		RaftTerm: parseUint(stats["term"]), LastIndex: parseUint(stats["last_log_index"]),
		AppliedIndex: parseUint(stats["applied_index"]), Refused: n.stream.Refused(),
	}
	if n.raft.State() != raft.Leader {
		if lc := n.raft.LastContact(); !lc.IsZero() {
			s.LastContact = lc
		}
	}
	failing := n.peers.Failing()
	voters := n.Voters()
	for _, id := range slices.Sorted(maps.Keys(voters)) {
		v := Voter{ID: id, Addr: voters[id], Leader: id == string(leaderID)}
		if lc, ok := failing[id]; ok && n.raft.State() == raft.Leader {
			v.Failing, v.LastContact = true, lc
		}
		s.Voters = append(s.Voters, v)
	}
	terms := n.fsm.Terms()
	for _, c := range slices.Sorted(maps.Keys(terms)) {
		s.Terms = append(s.Terms, terms[c])
	}
	return s
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
