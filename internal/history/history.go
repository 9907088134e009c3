package history

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/setting"
)

// Kind is what an entry is about.
type Kind string

// Kinds.
const (
	KindPool      Kind = "pool"      // a node's role in a cluster's pool changed
	KindHealth    Kind = "health"    // a node's health changed
	KindIsolation Kind = "isolation" // this agent's isolation state changed
	KindConflict  Kind = "conflict"  // a conflict (say, two writers) began or ended
	KindTerm      Kind = "term"      // the writer term a cluster's writer rule follows changed
	KindMaint     Kind = "maint"     // this node's maintenance mode was turned on or off
	KindFence     Kind = "fence"     // this db agent fenced its own server (set it read-only, killed its clients)
)

// Kinds lists every kind, in the order the documentation gives them.
var Kinds = []Kind{KindPool, KindHealth, KindConflict, KindTerm, KindIsolation, KindMaint, KindFence}

// KindNames is Kinds as one comma-separated string, for help and errors.
func KindNames() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// ParseKind returns the kind named s; "" is no kind (every kind). Any
// other name is an error listing the valid kinds.
func ParseKind(s string) (Kind, error) {
	if s == "" || slices.Contains(Kinds, Kind(s)) {
		return Kind(s), nil
	}
	return "", fmt.Errorf("unknown kind %q: want one of %s", s, KindNames())
}

// Entry is one transition. From and To are free text (a role, a health
// state); Seq is set by Add.
type Entry struct {
	Seq     uint64    `json:"seq"` // 1, 2, … in the order Add was called, for this run
	Time    time.Time `json:"time"`
	Kind    Kind      `json:"kind"`
	Cluster string    `json:"cluster,omitempty"`
	Node    string    `json:"node,omitempty"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// Filter selects entries. A zero field selects everything; set fields must
// all match.
type Filter struct {
	Node    string
	Cluster string
	Kind    Kind
	Since   time.Time // entries at or after Since
	Limit   int       // keep only the newest Limit matches; 0 (or less) keeps all
}

func (f Filter) match(e *Entry) bool {
	return (f.Node == "" || e.Node == f.Node) &&
		(f.Cluster == "" || e.Cluster == f.Cluster) &&
		(f.Kind == "" || e.Kind == f.Kind) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// Stats describes a Log.
type Stats struct {
	Entries    int    `json:"entries"`     // in the ring now
	Capacity   int    `json:"capacity"`    // of the ring (Config.Size)
	Total      uint64 `json:"total"`       // added since Open
	Evicted    uint64 `json:"evicted"`     // overwritten in the ring
	FileErrors uint64 `json:"file_errors"` // failed file operations (open, write, rotate)
	FileBytes  int64  `json:"file_bytes"`  // size of the current file
	Rotations  uint64 `json:"rotations"`   // of the file
}

// Log is a bounded ring of entries with an optional JSON-lines file. It is
// safe for concurrent use: Query never waits for file I/O.
type Log struct {
	clock clockwork.Clock // stamps entries added without a time

	// fileMu serializes Add when there is a file, so lines are written in
	// Seq order; it is taken before mu and never by Query or Stats.
	fileMu sync.Mutex
	file   *fileWriter // nil: ring only

	mu      sync.RWMutex
	ring    []Entry // grows to size, then wraps
	start   int     // index of the oldest entry once the ring is full
	size    int
	seq     uint64
	evicted uint64
}

// Open validates cfg (after defaults) and returns a Log. With a File, the
// file is opened, or created, for appending; an error opening it is
// returned. A nil logger discards. The logger gets component=history.
func Open(cfg Config, log *slog.Logger) (*Log, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, setting.Prefix("history.", err) // the agent's keys
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "history")
	l := &Log{clock: clockwork.NewRealClock(), size: cfg.Size}
	if cfg.File != "" {
		w := newFileWriter(cfg, log)
		if err := w.open(); err != nil {
			return nil, fmt.Errorf("history.file: %w", err)
		}
		l.file = w
	}
	return l, nil
}

// Add stores e and returns it with Seq set, and Time set to now when zero.
// With a file, the entry is also appended to it (one write, no fsync); a
// file failure is counted and logged, never returned, and the ring keeps
// working. Add after Close still fills the ring but writes no file.
func (l *Log) Add(e Entry) Entry {
	if l.file != nil {
		l.fileMu.Lock()
		defer l.fileMu.Unlock()
	}
	if e.Time.IsZero() {
		e.Time = l.clock.Now()
	}
	l.mu.Lock()
	l.seq++
	e.Seq = l.seq
	if len(l.ring) < l.size {
		l.ring = append(l.ring, e)
	} else {
		l.ring[l.start] = e
		l.start = (l.start + 1) % l.size
		l.evicted++
	}
	l.mu.Unlock()
	if l.file != nil {
		l.file.write(e)
	}
	return e
}

// Query returns copies of the entries that match f, oldest first. With a
// Limit, they are the newest Limit matches. The result is never nil.
func (l *Log) Query(f Filter) []Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := []Entry{}
	n := len(l.ring)
	// Newest first, so a Limit stops early, then reversed.
	for i := n - 1; i >= 0; i-- {
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
		e := &l.ring[(l.start+i)%n]
		if f.match(e) {
			out = append(out, *e)
		}
	}
	slices.Reverse(out)
	return out
}

// Stats returns the current counts.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	s := Stats{Entries: len(l.ring), Capacity: l.size, Total: l.seq, Evicted: l.evicted}
	l.mu.RUnlock()
	if l.file != nil {
		s.FileErrors = l.file.errors.Load()
		s.FileBytes = l.file.bytes.Load()
		s.Rotations = l.file.rotations.Load()
	}
	return s
}

// Close fsyncs and closes the file. It is safe to call more than once;
// only the first call can return an error.
func (l *Log) Close() error {
	if l.file == nil {
		return nil
	}
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	return l.file.close()
}
