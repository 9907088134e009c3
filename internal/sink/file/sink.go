package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/sink/driver"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// The kinds of notes in the status.
const (
	noteHeld    = "held"
	noteNoLists = "no-lists"
)

// fileState is what the sink knows of one file it writes.
type fileState struct {
	key     []byte // the content, without updated_at for the JSON file
	known   bool   // key is what the file holds
	rewrite bool   // the file has the wrong mode: write it even if unchanged
}

// Sink writes the pool to files. It is a sink.Sink. Create it with New;
// its methods are safe for concurrent use.
type Sink struct {
	cfg       Config
	mode      os.FileMode
	node      string
	log       *slog.Logger
	clock     clockwork.Clock
	writeFile func(path string, data []byte, mode os.FileMode) error

	applyMu sync.Mutex           // one apply at a time; guards the fields below
	files   map[string]fileState // by path; absent until read from disk once
	listed  map[string]bool      // clusters whose lists were written or kept, until removed

	drv *driver.Driver
	rec *sink.Recorder

	writes  atomic.Uint64 // files written
	skipped atomic.Uint64 // applies that succeeded without writing
}

// New validates cfg and returns a sink for the agent named node. It writes
// nothing; call Start to run the loop, or Apply to write once.
func New(cfg Config, node string, opts sink.Options) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	mode, err := parseMode(cfg.Mode)
	if err != nil {
		return nil, err // checked by Validate
	}
	opts = opts.WithDefaults()
	s := &Sink{
		cfg:       cfg,
		mode:      mode,
		node:      node,
		log:       opts.Logger.With("component", "file-sink"),
		clock:     opts.Clock,
		writeFile: fsutil.WriteFileAtomic,
		files:     map[string]fileState{},
		listed:    map[string]bool{},
	}
	s.rec = sink.NewRecorder(sink.Info{
		Name: "file", Target: cfg.Path,
		Failed: "file sink apply failed", Recovered: "file sink recovered",
		Frozen:   "file sink frozen: nodes are added to lists, removed only when they report themselves out or a writer term moves",
		Unfrozen: "file sink unfrozen: lists follow the pool again",
		Notes: []sink.NoteKind{
			{Kind: noteHeld, Prefix: "kept in its list while frozen: ", Msg: "nodes kept in lists while frozen",
				Cleared: "file sink holds no nodes any more"},
			{Kind: noteNoLists, Msg: "clusters without list files"},
		},
	}, s.log, s.clock)
	s.drv = driver.New(cfg.Interval, opts.Clock, s.runLatest)
	return s, nil
}

// Apply writes u's pool to the files that differ from it and returns what
// failed. u.Pool may be nil (no clusters). It does not change the pool the
// loop uses (see Update). Applies never overlap: Apply waits for a running
// one.
func (s *Sink) Apply(u sink.Update) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	wrote, held, skipped, err := s.apply(u.Pool, u.Frozen)
	s.rec.Report(u.Frozen, held, skipped)
	s.writes.Add(uint64(wrote))
	if err == nil && wrote == 0 {
		s.skipped.Add(1)
	}
	s.rec.Record(u, err)
	return err
}

// apply writes the lists, then the JSON file, each only if its content
// changed, and removes the lists of clusters gone from the pool. A failed
// file does not stop the others. It returns how many files it wrote, the
// held nodes as "cluster/node" and the clusters whose lists it skipped, with
// the reason. s.applyMu must be held.
func (s *Sink) apply(p *pool.Pool, frozen bool) (wrote int, held, skipped []string, err error) {
	if p == nil {
		p = &pool.Pool{}
	}
	var errs []error
	write := func(path string, key, data []byte, keyOf func([]byte) ([]byte, bool)) {
		ok, err := s.writeIfChanged(path, key, data, keyOf)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			wrote++
		}
	}

	heldNames := map[string][]string{}
	if s.cfg.ListsDir != "" {
		present := map[string]bool{}
		for i := range p.Clusters {
			c := &p.Clusters[i]
			if !tags.ValidCluster(c.Name) {
				skipped = append(skipped, fmt.Sprintf("cluster %s: not a valid cluster name (1-%d bytes of [A-Za-z0-9._-]); no list files",
					member.Safe(c.Name), tags.MaxClusterLen))
				continue
			}
			present[c.Name] = true
			var names []string
			for _, role := range []struct {
				suffix string
				nodes  []pool.Node
			}{{writersSuffix, c.Writers}, {readersSuffix, c.Readers}} {
				path := filepath.Join(s.cfg.ListsDir, c.Name+role.suffix)
				list := roleList(role.nodes)
				if frozen {
					var h []string
					if st := s.state(path, listKey); st.known {
						list, h = hold(list, parseList(st.key), func(addr string) bool {
							return sink.Withholds(frozen, c, role.suffix == writersSuffix, nameOf(c, addr))
						})
					}
					for _, a := range h {
						names = append(names, nameOf(c, a))
					}
				}
				data := formatList(list)
				write(path, data, data, listKey)
			}
			slices.Sort(names)
			names = slices.Compact(names)
			if len(names) > 0 {
				heldNames[c.Name] = names
			}
			for _, n := range names {
				held = append(held, c.Name+"/"+n)
			}
		}
		errs = append(errs, s.removeStale(present, frozen)...)
	}

	doc := newDocument(p, s.node, frozen, heldNames)
	key := contentKey(doc)
	doc.UpdatedAt = s.clock.Now().UTC()
	write(s.cfg.Path, key, encode(doc), fileKey)
	return wrote, held, skipped, errors.Join(errs...)
}

// removeStale removes the list files of each cluster whose lists this sink
// wrote or kept and that is no longer in the pool (present), then records
// the present clusters as listed. It removes only regular files named by the
// sink's own pattern, <cluster>-writers.txt and <cluster>-readers.txt, in
// lists_dir, and nothing while frozen (a frozen sink never drops a node; the
// files go once it is unfrozen). s.applyMu must be held.
func (s *Sink) removeStale(present map[string]bool, frozen bool) (errs []error) {
	for _, name := range slices.Sorted(maps.Keys(s.listed)) {
		if present[name] || frozen {
			continue
		}
		done := true
		for _, suffix := range []string{writersSuffix, readersSuffix} {
			path := filepath.Join(s.cfg.ListsDir, name+suffix)
			if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
				delete(s.files, path) // gone already, or not a file of ours
				continue
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove list of a cluster gone from the pool: %w", err))
				done = false
				continue
			}
			delete(s.files, path)
		}
		if done {
			s.log.Info("cluster left the pool; its list files were removed", "cluster", name)
			delete(s.listed, name)
		}
	}
	for name := range present {
		s.listed[name] = true
	}
	return errs
}

// writeIfChanged writes data to path unless the file already holds key, and
// reports whether it wrote. keyOf gives the key of the file's data as read
// from disk. s.applyMu must be held.
func (s *Sink) writeIfChanged(path string, key, data []byte, keyOf func([]byte) ([]byte, bool)) (bool, error) {
	st := s.state(path, keyOf)
	if st.known && !st.rewrite && bytes.Equal(st.key, key) {
		// Unchanged, unless removed behind our back (or its directory was).
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	}
	if err := s.writeFile(path, data, s.mode); err != nil {
		// The file, if any, still holds what st says: rename is atomic.
		return false, writeError(path, err)
	}
	s.files[path] = fileState{key: key, known: true}
	s.log.Info("file written", "path", path, "bytes", len(data))
	return true, nil
}

// writeError returns err, from writing path, without the temp file's random
// name, so that a repeated failure reads the same.
func writeError(path string, err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("write %s: %s temp file: %w", path, le.Op, le.Err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.HasPrefix(filepath.Base(pe.Path), ".") {
		op := pe.Op
		if op == "open" {
			op = "create"
		}
		return fmt.Errorf("write %s: %s temp file: %w", path, op, pe.Err)
	}
	return err
}

// state returns what the sink knows of path, reading the file the first
// time. A missing or unreadable file, or one keyOf rejects, is unknown.
// s.applyMu must be held.
func (s *Sink) state(path string, keyOf func([]byte) ([]byte, bool)) fileState {
	if st, ok := s.files[path]; ok {
		return st
	}
	var st fileState
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		if data, err := os.ReadFile(path); err == nil {
			st.key, st.known = keyOf(data)
			st.rewrite = fi.Mode().Perm() != s.mode
		}
	}
	s.files[path] = st
	return st
}

// listKey is the key of a list file: its content.
func listKey(data []byte) ([]byte, bool) { return data, true }

// Start runs the loop until ctx ends or Close is called: an apply at once
// after each Update, and, while the last apply failed, a retry with the
// newest pool every Config.Interval. Calls after the first, or after Close,
// do nothing.
func (s *Sink) Start(ctx context.Context) { s.drv.Start(ctx) }

// Update hands the sink a new pool and asks for an apply without waiting
// for it. Updates that arrive while an apply runs are coalesced into one
// more apply with the newest pool. u.Pool is copied.
func (s *Sink) Update(u sink.Update) { s.drv.Update(u) }

// Close stops the loop and waits for it. It is safe to call more than once.
func (s *Sink) Close() error { return s.drv.Close() }

// Status is what the sink has done so far. Its notes are the nodes kept in
// a list while frozen and the clusters without list files (Stats).
func (s *Sink) Status() view.SinkStatus { return s.rec.Status() }

// runLatest applies the newest pool, turning a panic into a failed apply. A
// periodic run (a retry) applies only when the last apply failed.
func (s *Sink) runLatest(_ context.Context, u sink.Update, retry bool) {
	if retry && !s.rec.Failed() {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("file sink apply panicked", "panic", r, "stack", string(debug.Stack()))
			s.rec.Record(u, fmt.Errorf("apply panicked: %v", r))
		}
	}()
	_ = s.Apply(u)
}
