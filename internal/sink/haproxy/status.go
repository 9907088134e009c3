package haproxy

import (
	"fmt"

	"github.com/shoaldb/shoal/internal/view"
)

// The kinds of notes in the status.
const (
	noteHeld     = "held"
	noteUnmapped = "unmapped"
	noteMissing  = "missing"
	noteNaming   = "naming"
)

// Stats is the sink's status with the counters and lists only this sink
// has.
type Stats struct {
	view.SinkStatus

	Reconciles    uint64 // reconciles run, failed ones included
	Commands      uint64 // commands sent
	CommandErrors uint64 // commands that failed

	// From the last reconcile that read HAProxy's state:
	Held     []string // commands withheld because frozen
	Unmapped []string // "backend/server" mapping to no pool node
	Missing  []string // "backend: cluster/node" with no server
	Naming   []string // naming problems
}

// Stats returns a copy of the sink's status and counters.
func (s *Sink) Stats() Stats {
	r := s.rec.Snapshot()
	return Stats{SinkStatus: r.SinkStatus, Reconciles: r.Applies,
		Commands: s.commands.Load(), CommandErrors: s.commandErrors.Load(),
		Held: r.Items[noteHeld], Unmapped: r.Items[noteUnmapped], Missing: r.Items[noteMissing], Naming: r.Items[noteNaming]}
}

func stringsOf[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
