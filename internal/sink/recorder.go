package sink

import (
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/view"
)

// Info names a sink and says what its logs and notes call things.
type Info struct {
	Name   string // view.SinkStatus.Name: "file", "haproxy"
	Target string // what it drives: a file path, a runtime API address
	// Logged when an apply fails (at debug, with " again", when it fails
	// as the one before did), when one succeeds after a failure, and when
	// the frozen state changes.
	Failed, Recovered, Frozen, Unfrozen string
	// The kinds of notes the sink reports, in the order its status lists
	// them.
	Notes []NoteKind
}

// NoteKind is one kind of note: items a sink reports in its status, not a
// failure (a node held while frozen, a server that maps to no node).
type NoteKind struct {
	Kind   string // the "kind" key of its log records
	Prefix string // before each item in view.SinkStatus.Notes
	Msg    string // logged at warn, with the count and the items, when the items change
	// Logged at info when the items clear; default "<Name> report cleared".
	Cleared string
}

// Recorder keeps a sink's status and logs its changes: each apply's result
// (a failure that repeats the previous one at debug level), the frozen
// state, and each kind of note once per change. Its methods are safe for
// concurrent use.
type Recorder struct {
	info  Info
	log   *slog.Logger
	clock clockwork.Clock

	mu      sync.Mutex // guards the fields below
	st      view.SinkStatus
	applies uint64              // applies recorded, failed ones included
	failed  bool                // the last apply failed
	errLog  string              // last logged error, to log repeats at debug
	items   map[string][]string // the current items of each kind of note
	logged  map[string]string   // the last logged items of each kind
}

// NewRecorder returns the recorder of the sink info names; log and clock
// are the sink's (Options.WithDefaults).
func NewRecorder(info Info, log *slog.Logger, clock clockwork.Clock) *Recorder {
	return &Recorder{
		info: info, log: log, clock: clock,
		st:    view.SinkStatus{Name: info.Name, Target: info.Target},
		items: map[string][]string{}, logged: map[string]string{},
	}
}

// Record counts a finished apply of u, failed if err is not nil, and logs
// its error or the recovery from one. A successful apply that was not
// frozen advances the applied generation to u's (see the package doc).
func (r *Recorder) Record(u Update, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	r.applies++
	r.failed = err != nil
	if err == nil {
		r.st.LastSuccess = now
		if !u.Frozen {
			r.st.AppliedGeneration = max(r.st.AppliedGeneration, u.Generation)
		}
		if r.errLog != "" {
			r.log.Info(r.info.Recovered, "after", r.errLog)
			r.errLog = ""
		}
		return
	}
	r.st.Failures++
	r.st.LastError, r.st.LastErrorAt = err.Error(), now
	if r.st.LastError == r.errLog {
		r.log.Debug(r.info.Failed+" again", "err", err)
		return
	}
	r.errLog = r.st.LastError
	r.log.Error(r.info.Failed, "err", err)
}

// Report stores the frozen state and the notes in the status, and logs
// each change. items[i] are the items of Info.Notes[i]; missing ones are
// none.
func (r *Recorder) Report(frozen bool, items ...[]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if frozen != r.st.Frozen {
		if frozen {
			r.log.Warn(r.info.Frozen)
		} else {
			r.log.Info(r.info.Unfrozen)
		}
	}
	r.st.Frozen = frozen
	for i, k := range r.info.Notes {
		var it []string
		if i < len(items) {
			it = slices.Clone(items[i])
		}
		r.items[k.Kind] = it
		r.logOnce(k, it)
	}
}

// logOnce logs the items of kind k when they differ from the last logged,
// and once more when they clear. r.mu must be held.
func (r *Recorder) logOnce(k NoteKind, items []string) {
	key := strings.Join(items, "\n")
	if r.logged[k.Kind] == key {
		return
	}
	r.logged[k.Kind] = key
	if len(items) == 0 {
		msg := k.Cleared
		if msg == "" {
			msg = r.info.Name + " report cleared"
		}
		r.log.Info(msg, "kind", k.Kind)
		return
	}
	r.log.Warn(k.Msg, "kind", k.Kind, "count", len(items), "items", items)
}

// Snapshot is a recorder's state at one instant.
type Snapshot struct {
	view.SinkStatus
	Applies uint64              // applies recorded, failed ones included
	Items   map[string][]string // the items of the last report, by kind
}

// Status returns the status: State from the last apply, and the notes of
// the last report, each kind's items with its prefix.
func (r *Recorder) Status() view.SinkStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status()
}

// Snapshot returns a copy of the status, the count of applies and the
// items of each kind of note, all at one instant.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	items := make(map[string][]string, len(r.items))
	for k, it := range r.items {
		items[k] = slices.Clone(it)
	}
	return Snapshot{SinkStatus: r.status(), Applies: r.applies, Items: items}
}

// status builds the status. r.mu must be held.
func (r *Recorder) status() view.SinkStatus {
	st := r.st
	switch {
	case r.applies == 0:
		st.State = view.SinkPending
	case r.failed:
		st.State = view.SinkFailing
	default:
		st.State = view.SinkOK
	}
	for _, k := range r.info.Notes {
		for _, it := range r.items[k.Kind] {
			st.Notes = append(st.Notes, k.Prefix+it)
		}
	}
	return st
}

// Failed reports whether the last apply failed.
func (r *Recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
