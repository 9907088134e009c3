package view

import "errors"

// ErrFailover is wrapped by the agent's errors about a failover it
// refuses for the fleet's state (no writer term, the writer not dead by
// its witnesses, not a voter, one running): the HTTP API answers 409.
var ErrFailover = errors.New("failover refused")

// ErrFailoverRequest is wrapped by the errors about the request itself
// (an unknown cluster, none named where several have a term): 400.
var ErrFailoverRequest = errors.New("failover request")

// FailoverRequest asks for the failover of a cluster whose writer is dead
// (docs/consensus.md, "Failover"), or, with DryRun, what one would do.
type FailoverRequest struct {
	Cluster string // "": the only cluster with a writer term
	DryRun  bool
}

// Failover is what a failover found and did.
type Failover struct {
	Cluster string
	Writer  string // the writer of term Term, judged
	Term    uint64
	// Dead and Death: the witnesses' verdict on the writer, and why.
	Dead  bool
	Death string
	// DryRun: Candidates, Pick and Why are from the gossiped positions
	// (hints); a run surveys each candidate first.
	DryRun     bool
	Candidates []FailoverCandidate
	Pick       string // "" when none may be promoted
	Why        string
	// Done: the run moved the term to Pick (NewTerm); Outcome is the
	// leader's decision either way.
	Done    bool
	NewTerm uint64
	Outcome string
}

// FailoverCandidate is one replica a failover considered.
type FailoverCandidate struct {
	Node     string
	Position string // its GTID position as known ("domain:seq", or MariaDB's list)
	Out      string // why it is passed over; "" for the pick
}
