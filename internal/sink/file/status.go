package file

import "github.com/shoaldb/shoal/internal/view"

// Stats is the sink's status with the counters and lists only this sink
// has.
type Stats struct {
	view.SinkStatus

	Applies uint64 // applies run, failed ones included
	Writes  uint64 // files written
	Skipped uint64 // applies that succeeded without writing: nothing changed

	// From the last apply:
	Held []string // "cluster/node" kept in a list while frozen
	// NoLists says, for each cluster whose lists were not written because
	// its name cannot be part of a file name, why. This is not a failure.
	NoLists []string
}

// Stats returns a copy of the sink's status and counters.
func (s *Sink) Stats() Stats {
	r := s.rec.Snapshot()
	return Stats{SinkStatus: r.SinkStatus, Applies: r.Applies, Writes: s.writes.Load(), Skipped: s.skipped.Load(),
		Held: r.Items[noteHeld], NoLists: r.Items[noteNoLists]}
}
