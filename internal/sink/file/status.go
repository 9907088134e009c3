package file

import (
	"slices"
	"strings"
	"time"
)

// Status is what the sink has done so far.
type Status struct {
	LastSuccess time.Time // end of the last apply without error
	LastError   string    // "" if none yet
	LastErrorAt time.Time

	Applies  uint64 // applies run, failed ones included
	Writes   uint64 // files written
	Skipped  uint64 // applies that succeeded without writing: nothing changed
	Failures uint64 // applies that failed, panics included

	// From the last apply:
	Frozen bool
	Held   []string // "cluster/node" kept in a list while frozen
	// NoLists says, for each cluster whose lists were not written because
	// its name cannot be part of a file name, why. This is not a failure.
	NoLists []string
}

// Status returns a copy of the sink's status.
func (s *Sink) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Held = slices.Clone(st.Held)
	st.NoLists = slices.Clone(st.NoLists)
	return st
}

// record counts a finished apply and logs its error. A failure that repeats
// the previous one is logged at debug level.
func (s *Sink) record(wrote int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.st.Applies++
	s.st.Writes += uint64(wrote)
	s.failed = err != nil
	if err == nil {
		s.st.LastSuccess = now
		if wrote == 0 {
			s.st.Skipped++
		}
		if s.errLog != "" {
			s.log.Info("file sink recovered", "after", s.errLog)
			s.errLog = ""
		}
		return
	}
	s.st.Failures++
	s.st.LastError, s.st.LastErrorAt = err.Error(), now
	if s.st.LastError == s.errLog {
		s.log.Debug("file sink apply failed again", "err", err)
		return
	}
	s.errLog = s.st.LastError
	s.log.Error("file sink apply failed", "err", err)
}

// report stores the frozen state, the held nodes and the skipped clusters in
// the status, and logs each change.
func (s *Sink) report(frozen bool, held, skipped []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.NoLists = skipped
	if key := strings.Join(skipped, "\n"); key != s.skipLog {
		s.skipLog = key
		if len(skipped) > 0 {
			s.log.Warn("clusters without list files", "count", len(skipped), "clusters", skipped)
		}
	}
	if frozen != s.frozeLog {
		s.frozeLog = frozen
		if frozen {
			s.log.Warn("file sink frozen: nodes are added to lists but never removed")
		} else {
			s.log.Info("file sink unfrozen: lists follow the pool again")
		}
	}
	s.st.Frozen, s.st.Held = frozen, held
	key := strings.Join(held, "\n")
	if key == s.heldLog {
		return
	}
	s.heldLog = key
	if len(held) == 0 {
		s.log.Info("file sink holds no nodes any more")
		return
	}
	s.log.Warn("nodes kept in lists while frozen", "count", len(held), "nodes", held)
}
