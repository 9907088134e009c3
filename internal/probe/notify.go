package probe

import "time"

// Status is the probe's current view of the server.
type Status struct {
	State   State     `json:"state"`
	Reason  Reason    `json:"reason"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"` // when State was entered

	// Last is the latest check: its outcome, facts, start and duration.
	// Its facts are only what that check read (nothing but Reachable when
	// it failed early): what the server is, is Known, and what it publishes
	// is Health.
	Last Result `json:"last"`
	// Known is the latest facts read from the server (Result.FactsRead). A
	// check that failed before reading any leaves them as they were: a
	// replica that misses one check while its state stays passing is still
	// read-only, not a server of unknown role that looks writable.
	Known Facts `json:"known"`
	// Consecutive results: Passes counts passes, Failures counts failures
	// (hard or not); a warning resets both.
	Passes   int `json:"passes"`
	Failures int `json:"failures"`

	Checks   uint64 `json:"checks"`   // checks completed
	Connects uint64 `json:"connects"` // connections opened
	Attempts uint64 `json:"attempts"` // connection attempts, failed ones included
}

// Event is delivered to the Notifier after every check.
type Event struct {
	Status Status
	// PrevState is the state before this check.
	PrevState State
	// StateChanged: Status.State differs from PrevState.
	StateChanged bool
	// FactsChanged: the facts differ from the previous check's (e.g.
	// read_only flipped, lag moved, a replication thread stopped).
	FactsChanged bool
}

// Notifier receives an Event after every check, in order, from the probe's
// goroutine. It must return quickly (hand work to another goroutine): the
// next check waits for it. A panic in Notify is recovered and logged.
type Notifier interface {
	Notify(Event)
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(Event)

// Notify calls f(e).
func (f NotifierFunc) Notify(e Event) { f(e) }
