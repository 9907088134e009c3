package logging

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestParseStdLine(t *testing.T) {
	for _, tc := range []struct {
		line      string
		lv        slog.Level
		component string
		msg       string
	}{
		{"2026/11/22 08:40:58 [INFO] serf: EventMemberJoin: n2 127.0.0.1", slog.LevelInfo, "serf", "EventMemberJoin: n2 127.0.0.1"},
		{"2026/11/22 08:40:58 [DEBUG] memberlist: Stream connection from=127.0.0.1:1", slog.LevelDebug, "memberlist", "Stream connection from=127.0.0.1:1"},
		{"2026/11/22 08:40:58 [ERR] agent: boom", slog.LevelError, "agent", "boom"},
		{"2026/11/22 08:40:58 [WARN] memberlist: Was able to connect to x but other probes failed", slog.LevelWarn, "memberlist", "Was able to connect to x but other probes failed"},
		{"2026/11/22 08:40:58.123456 [TRACE] serf: t", LevelTrace, "serf", "t"},
		{"no level at all", slog.LevelInfo, "", "no level at all"},
		{"[INFO] a sentence with: colon later", slog.LevelInfo, "", "a sentence with: colon later"},
	} {
		lv, c, m := ParseStdLine(tc.line)
		if lv != tc.lv || c != tc.component || m != tc.msg {
			t.Errorf("%q → %v %q %q", tc.line, lv, c, m)
		}
	}
}

type lines struct {
	mu sync.Mutex
	l  []string
}

func (w *lines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.l = append(w.l, string(p))
	return len(p), nil
}

// TestStdLoggerToSlogAndMonitor checks a serf-style logger line reaches the
// main output at its level and the monitor stream in serf's format, and
// that the level filter applies to the main output only.
func TestStdLoggerToSlogAndMonitor(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "json", slog.LevelInfo)
	mon := &lines{}
	l.SetMonitor(mon)
	std := log.New(&StdWriter{Logger: l.Logger}, "", log.LstdFlags)
	std.Printf("[WARN] memberlist: Suspect %s has failed, no acks received", "db2")
	std.Printf("[DEBUG] memberlist: chatty")
	l.Logger.With("component", "agent").Info("joined", "n", 2)

	s := out.String()
	if !strings.Contains(s, `"level":"WARN"`) || !strings.Contains(s, `"component":"memberlist"`) || !strings.Contains(s, `"msg":"Suspect db2 has failed, no acks received"`) {
		t.Errorf("main output:\n%s", s)
	}
	if strings.Contains(s, "chatty") {
		t.Error("debug line passed the info filter")
	}
	joined := strings.Join(mon.l, "")
	for _, want := range []string{"[WARN] memberlist: Suspect db2 has failed", "[DEBUG] memberlist: chatty", "[INFO] agent: joined n=2"} {
		if !strings.Contains(joined, want) {
			t.Errorf("monitor stream lacks %q:\n%s", want, joined)
		}
	}
	l.Level.Set(slog.LevelDebug)
	std.Printf("[DEBUG] memberlist: now visible")
	if !strings.Contains(out.String(), "now visible") {
		t.Error("level change not applied")
	}
}
