package view

import (
	"errors"
	"fmt"
	"time"
)

// ErrSwitchover is wrapped by the agent's errors about a switchover that
// cannot start (unknown node, no term, target not a reader, not a voter):
// the HTTP API answers them 409, with what is wrong, or 400 when the error
// is a *SwitchoverRequestError.
var ErrSwitchover = errors.New("switchover refused")

// Switchover waits: the defaults a zero wait stands for, and the bounds of
// any other (docs/consensus.md, "Switchover"). pkg/client keeps the same
// numbers in seconds for its request timeout (a test holds them equal).
const (
	// DefaultSwitchoverCatchUp bounds the wait for the target to apply
	// the old writer's last transaction; the writes wait as long.
	DefaultSwitchoverCatchUp = 30 * time.Second
	// DefaultSwitchoverApplied bounds the wait for every router to apply
	// the new term.
	DefaultSwitchoverApplied = 10 * time.Second
	// MinSwitchoverWait and MaxSwitchoverWait bound either wait.
	MinSwitchoverWait = time.Second
	MaxSwitchoverWait = 2 * time.Minute
)

// Switchover request fields, as SwitchoverRequestError.Field names them.
const (
	SwitchoverFieldTo      = "to"
	SwitchoverFieldCluster = "cluster"
	SwitchoverFieldCatchUp = "catch_up"
	SwitchoverFieldApplied = "applied"
)

// SwitchoverRequestError is a switchover refused because of the request
// itself (no target, an unknown node or cluster, a wait out of bounds):
// asking again unchanged fails again. The HTTP API answers it 400 and the
// CLI exits 2. It wraps ErrSwitchover: nothing was done.
type SwitchoverRequestError struct {
	Field  string // one of the SwitchoverField constants
	Value  string // the value given, as the user wrote it (names quoted)
	Reason string // what is wrong with it, or what is wanted
}

func (e *SwitchoverRequestError) Error() string {
	return fmt.Sprintf("%v: %s %s: %s", ErrSwitchover, e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrSwitchover.
func (e *SwitchoverRequestError) Unwrap() error { return ErrSwitchover }

// SwitchoverRequest asks for a planned move of a cluster's writer.
type SwitchoverRequest struct {
	To      string // the node that becomes the writer
	Cluster string // "": the target's cluster
	// CatchUp bounds the wait for the target to apply the old writer's
	// last transaction; Applied the wait for every router to apply the
	// new term. Zero: the defaults.
	CatchUp, Applied time.Duration
	// Force: switch over to a target behind the writer by more than
	// MaxSwitchoverLag (every write waits while it catches up).
	Force bool
}

// MaxSwitchoverLag is the most a switchover's target may be behind the
// writer without Force: every write waits while it catches up, and a
// replica behind by seconds may take many more to apply the backlog.
const MaxSwitchoverLag = 2 * time.Second

// Normalize checks the request on its own (without the pool) and returns
// it with the defaults for zero waits: To must be set, each wait zero or
// from MinSwitchoverWait to MaxSwitchoverWait. The error is a
// *SwitchoverRequestError naming the field and its value.
func (r SwitchoverRequest) Normalize() (SwitchoverRequest, error) {
	if r.To == "" {
		return r, &SwitchoverRequestError{Field: SwitchoverFieldTo, Value: `""`, Reason: "required: the node that becomes the writer"}
	}
	for _, w := range []struct {
		field string
		d     *time.Duration
		def   time.Duration
	}{{SwitchoverFieldCatchUp, &r.CatchUp, DefaultSwitchoverCatchUp}, {SwitchoverFieldApplied, &r.Applied, DefaultSwitchoverApplied}} {
		switch {
		case *w.d == 0:
			*w.d = w.def
		case *w.d < MinSwitchoverWait || *w.d > MaxSwitchoverWait:
			return r, &SwitchoverRequestError{Field: w.field, Value: w.d.String(),
				Reason: fmt.Sprintf("must be from %s to %s (0: the default, %s)", MinSwitchoverWait, MaxSwitchoverWait, w.def)}
		}
	}
	return r, nil
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
