package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
)

// maxSeen bounds the distinct error messages remembered for logging once.
const maxSeen = 64

// fileWriter appends entries to a JSON-lines file and rotates it. Its
// methods are called with Log.fileMu held; the counters are read without.
type fileWriter struct {
	path     string
	maxBytes int64
	keep     int
	log      *slog.Logger

	f      *os.File    // nil between a failure and the next successful open
	id     os.FileInfo // of f, to notice the path now names another file
	size   int64
	needNL bool // the file ends in a cut-short line: terminate it first
	closed bool

	broken bool                // the last open or write failed
	seen   map[string]struct{} // error messages logged since the file last recovered

	errors    atomic.Uint64
	bytes     atomic.Int64
	rotations atomic.Uint64
}

func newFileWriter(cfg Config, log *slog.Logger) *fileWriter {
	return &fileWriter{
		path:     cfg.File,
		maxBytes: cfg.MaxBytes,
		keep:     cfg.Keep,
		log:      log.With("file", cfg.File),
		seen:     map[string]struct{}{},
	}
}

// open opens the file for appending, creating it with mode 0640.
func (w *fileWriter) open() error {
	f, err := os.OpenFile(w.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", w.path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%s is not a regular file", w.path)
	}
	w.needNL = false
	if st.Size() > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
			f.Close()
			return fmt.Errorf("read %s: %w", w.path, err)
		}
		w.needNL = last[0] != '\n'
	}
	w.f, w.id, w.size = f, st, st.Size()
	w.bytes.Store(w.size)
	return nil
}

// write appends e as one line, rotating first when the line would make
// the file larger than maxBytes. Failures are reported, not returned.
func (w *fileWriter) write(e Entry) {
	if w.closed {
		return
	}
	line, err := json.Marshal(e)
	if err != nil {
		w.fail(fmt.Errorf("encode entry %d: %w", e.Seq, err))
		return
	}
	line = append(line, '\n')

	if w.f != nil && !w.samePath() {
		// Removed or moved away (an external rotator): start a new file.
		w.f.Close()
		w.f = nil
	}
	if w.f == nil {
		if err := w.open(); err != nil {
			w.broken = true
			w.fail(err)
			return
		}
	}
	n := int64(len(line))
	if w.needNL {
		n++
	}
	if w.size > 0 && w.size+n > w.maxBytes {
		w.rotate()
		if w.f == nil {
			if err := w.open(); err != nil {
				w.broken = true
				w.fail(err)
				return
			}
		}
	}
	if w.needNL {
		line = append([]byte{'\n'}, line...)
	}
	written, err := w.f.Write(line)
	w.size += int64(written)
	w.bytes.Store(w.size)
	if err != nil {
		// Part of the line may be in the file; reopening checks the last
		// byte and terminates it.
		w.f.Close()
		w.f = nil
		w.broken = true
		w.fail(err)
		return
	}
	w.needNL = false
	if w.broken {
		w.broken = false
		clear(w.seen)
		w.log.Info("history file writable again")
	}
}

// samePath reports whether the path still names the open file.
func (w *fileWriter) samePath() bool {
	st, err := os.Stat(w.path)
	return err == nil && os.SameFile(st, w.id)
}

// rotate closes the file and shifts the numbered files: path.(keep-1) →
// path.keep, …, path → path.1. The caller opens a fresh file. Failed
// renames are counted; if path could not be moved away, the caller opens
// it again and appends, and the next write tries again.
func (w *fileWriter) rotate() {
	if err := w.f.Sync(); err != nil {
		w.fail(fmt.Errorf("sync %s: %w", w.path, err))
	}
	if err := w.f.Close(); err != nil {
		w.fail(fmt.Errorf("close %s: %w", w.path, err))
	}
	w.f = nil
	// Files beyond keep, left by an earlier, larger keep.
	for i := w.keep + 1; i <= w.keep+MaxKeep; i++ {
		if err := os.Remove(w.numbered(i)); err != nil {
			break
		}
	}
	for i := w.keep - 1; i >= 1; i-- {
		if err := os.Rename(w.numbered(i), w.numbered(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.fail(err)
		}
	}
	if err := os.Rename(w.path, w.numbered(1)); err != nil {
		w.fail(err)
		return
	}
	w.rotations.Add(1)
	if d, err := os.Open(filepath.Dir(w.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

func (w *fileWriter) numbered(i int) string {
	return w.path + "." + strconv.Itoa(i)
}

// fail counts err and logs it unless the same message was logged before
// (since the file last recovered from a failed open or write).
func (w *fileWriter) fail(err error) {
	w.errors.Add(1)
	msg := err.Error()
	if _, ok := w.seen[msg]; ok || len(w.seen) >= maxSeen {
		return
	}
	w.seen[msg] = struct{}{}
	w.log.Warn("history file error; the ring keeps every entry", "err", err)
}

// close fsyncs and closes the file; later writes are dropped.
func (w *fileWriter) close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f = nil
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close history file %s: %w", w.path, err)
	}
	return nil
}
