package consensus

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logRecorder keeps the consensus log lines of one test node ("consensus:"
// messages, debug included), so that a test waits on what the node did
// rather than on wall time.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	msg   string
	attrs map[string]string
}

// count counts the lines whose message starts with prefix and whose
// attributes hold every key, value pair of kv.
func (r *logRecorder) count(prefix string, kv ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if !strings.HasPrefix(rec.msg, prefix) {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if rec.attrs[kv[i]] != kv[i+1] {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// recHandler records into rec and hands every record on to next.
type recHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
	next  slog.Handler
}

func (h *recHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "consensus:") {
		attrs := map[string]string{}
		add := func(a slog.Attr) bool {
			attrs[a.Key] = fmt.Sprint(a.Value.Any())
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		h.rec.mu.Lock()
		h.rec.recs = append(h.rec.recs, logRecord{msg: r.Message, attrs: attrs})
		h.rec.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recHandler{rec: h.rec, attrs: append(append([]slog.Attr(nil), h.attrs...), as...), next: h.next.WithAttrs(as)}
}

func (h *recHandler) WithGroup(name string) slog.Handler {
	return &recHandler{rec: h.rec, attrs: h.attrs, next: h.next.WithGroup(name)}
}

// testLog logs a node's info lines to the test log (go test -v shows them)
// and records its consensus lines (recorderOf).
func testLog(t *testing.T, id string) *slog.Logger {
	next := slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(&recHandler{rec: &logRecorder{}, next: next}).With("node", id)
}

// recorderOf is the recorder of a logger testLog made.
func recorderOf(t *testing.T, l *slog.Logger) *logRecorder {
	t.Helper()
	h, ok := l.Handler().(*recHandler)
	if !ok {
		t.Fatalf("logger %T is not testLog's", l.Handler())
	}
	return h.rec
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
