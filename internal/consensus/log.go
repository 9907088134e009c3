package consensus

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// hclogger is the logger raft and its transport take.
type hclogger = hclog.Logger

// newHCLog returns an hclog logger whose lines go to log: raft writes
// JSON lines, each is decoded and logged at its level with its fields.
// Raft's debug chatter (heartbeats, pipelines) stays at debug.
func newHCLog(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: hclog.Debug, JSONFormat: true, DisableTime: true,
		Output: &slogWriter{log: log.With("component", "consensus")},
	})
}

// slogWriter turns hclog's JSON lines into slog records.
type slogWriter struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
	log *slog.Logger
}

// maxLogLine bounds a buffered partial line.
const maxLogLine = 64 << 10

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadBytes('\n')
		if err != nil {
			w.buf.Reset()
			if len(line) < maxLogLine {
				w.buf.Write(line) // a partial line waits for its end
			}
			return len(p), nil
		}
		w.emit(line)
	}
}

func (w *slogWriter) emit(line []byte) {
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		w.log.Info(string(bytes.TrimSpace(line)))
		return
	}
	level := slog.LevelInfo
	switch rec["@level"] {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	msg, _ := rec["@message"].(string)
	attrs := make([]slog.Attr, 0, len(rec))
	for k, v := range rec {
		if k != "" && k[0] != '@' {
			attrs = append(attrs, slog.Any(k, v))
		}
	}
	w.log.LogAttrs(context.Background(), level, msg, attrs...)
}
