package view

import (
	"errors"
	"time"
)

// ErrSwitchover is wrapped by the agent's errors about a switchover that
// cannot start (unknown node, no term, target not a reader, not a voter):
// the HTTP API answers them 409, with what is wrong.
var ErrSwitchover = errors.New("switchover refused")

// SwitchoverRequest asks for a planned move of a cluster's writer.
type SwitchoverRequest struct {
	To      string // the node that becomes the writer
	Cluster string // "": the target's cluster
	// CatchUp bounds the wait for the target to apply the old writer's
	// last transaction; Applied the wait for every router to apply the
	// new term. Zero: the defaults.
	CatchUp, Applied time.Duration
}

// Switchover is what a switchover did, step by step.
type Switchover struct {
	ID      string
	Cluster string
	Old     string // the writer of term From
	Target  string
	From    uint64 // the term the switchover started from
	Term    uint64 // the term granted to Target; 0 when none was
	Steps   []SwitchStep
	// ReadOnly is how long no server of the cluster took writes: from the
	// old writer set read-only to the target made writable (or to the
	// rollback).
	ReadOnly time.Duration
	Routers  RoutersApplied
	Took     time.Duration
	// Error says why the switchover failed (and what it left); "" when it
	// completed. Routers that did not apply the term are in Routers.
	Error string
}

// SwitchStep is one step: its name, the node that took it, how long it
// took, and what it did or why it failed.
type SwitchStep struct {
	Name   string
	Node   string
	OK     bool
	Took   time.Duration
	Detail string
}

// RoutersApplied is what the routers (agents that drive a sink) said of
// the new term.
type RoutersApplied struct {
	Applied     []string          // applied the term, by name
	Pending     map[string]string // reachable, not applied in time: why
	Unreachable map[string]string // expected routers that are not alive: their status
	Took        time.Duration     // until the last router applied, or the timeout
}
