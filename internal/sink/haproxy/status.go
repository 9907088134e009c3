package haproxy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is what the sink has done so far.
type Status struct {
	LastSuccess time.Time // end of the last reconcile without error
	LastError   string    // "" if none yet
	LastErrorAt time.Time

	Reconciles    uint64 // reconciles run, failed ones included
	Failures      uint64 // reconciles that failed, panics included
	Commands      uint64 // commands sent
	CommandErrors uint64 // commands that failed

	// From the last reconcile that read HAProxy's state:
	Frozen   bool
	Held     []string // commands withheld because frozen
	Unmapped []string // "backend/server" mapping to no pool node
	Missing  []string // "backend: cluster/node" with no server
	Naming   []string // naming problems
}

// Status returns a copy of the sink's status.
func (s *Sink) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Held = slices.Clone(st.Held)
	st.Unmapped = slices.Clone(st.Unmapped)
	st.Missing = slices.Clone(st.Missing)
	st.Naming = slices.Clone(st.Naming)
	return st
}

// record counts a finished reconcile and logs its error. A failure that
// repeats the previous one is logged at debug level.
func (s *Sink) record(sent, failed int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.st.Reconciles++
	s.st.Commands += uint64(sent)
	s.st.CommandErrors += uint64(failed)
	if err == nil {
		s.st.LastSuccess = now
		if s.errLog != "" {
			s.log.Info("haproxy reconcile recovered", "after", s.errLog)
			s.errLog = ""
		}
		return
	}
	s.st.Failures++
	s.st.LastError, s.st.LastErrorAt = err.Error(), now
	if s.st.LastError == s.errLog {
		s.log.Debug("haproxy reconcile failed again", "err", err)
		return
	}
	s.errLog = s.st.LastError
	s.log.Error("haproxy reconcile failed", "err", err)
}

// report stores a plan's findings in the status and logs each kind once
// per change.
func (s *Sink) report(plan Plan, frozen bool) {
	held := make([]string, len(plan.Held))
	for i, c := range plan.Held {
		held[i] = c.String()
	}
	unmapped := stringsOf(plan.Unmapped)
	missing := stringsOf(plan.Missing)

	s.mu.Lock()
	defer s.mu.Unlock()
	if frozen != s.st.Frozen {
		if frozen {
			s.log.Warn("haproxy sink frozen: servers are put in but never taken out")
		} else {
			s.log.Info("haproxy sink unfrozen")
		}
	}
	s.st.Frozen = frozen
	s.st.Held, s.st.Unmapped, s.st.Missing, s.st.Naming = held, unmapped, missing, plan.Naming
	s.reportOnce("held", "haproxy commands withheld while frozen", held)
	s.reportOnce("unmapped", "haproxy servers map to no pool node; left alone", unmapped)
	s.reportOnce("missing", "pool nodes have no haproxy server", missing)
	s.reportOnce("naming", "pool nodes cannot be mapped to haproxy servers", plan.Naming)
}

// reportOnce logs items under msg when they differ from the last report of
// kind, and once more when they clear. s.mu must be held.
func (s *Sink) reportOnce(kind, msg string, items []string) {
	key := strings.Join(items, "\n")
	if s.reports[kind] == key {
		return
	}
	s.reports[kind] = key
	if len(items) == 0 {
		s.log.Info("haproxy report cleared", "kind", kind)
		return
	}
	s.log.Warn(msg, "kind", kind, "count", len(items), "items", items)
}

func stringsOf[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
