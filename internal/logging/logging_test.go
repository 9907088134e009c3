package logging

import (
	"bytes"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
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

// TestMonitorEscapesRemoteText: serf logs node names, which other machines
// choose. In the monitor stream a record stays one line, and no control
// sequence, bidi override or invalid UTF-8 gets through to `shoal monitor`
// or a serf monitor client.
func TestMonitorEscapesRemoteText(t *testing.T) {
	const evil = "db9\x1b]0;pwned\x07\nFORGED row\r\xff\u202e"
	l := New(io.Discard, "text", slog.LevelInfo)
	mon := &lines{}
	l.SetMonitor(mon)
	std := log.New(&StdWriter{Logger: l.Logger}, "", log.LstdFlags)
	std.Printf("[INFO] serf: EventMemberJoin: %s 10.0.0.9", evil)
	l.Logger.With("component", "agent").Info("member "+evil, "node", evil, evil, "x")
	l.Logger.WithGroup(evil).Info("grouped", "k", "plain")
	if len(mon.l) != 3 {
		t.Fatalf("%d records, want 3", len(mon.l))
	}
	for _, rec := range mon.l {
		if strings.Count(rec, "\n") != 1 || !strings.HasSuffix(rec, "\n") {
			t.Errorf("record is not one line: %q", rec)
		}
		if !utf8.ValidString(rec) || strings.ContainsFunc(strings.TrimSuffix(rec, "\n"), func(r rune) bool {
			return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
		}) {
			t.Errorf("raw control or invalid UTF-8 in %q", rec)
		}
	}
	if want := `serf: EventMemberJoin: db9\x1b]0;pwned\a\nFORGED row\r\xff\u202e 10.0.0.9`; !strings.Contains(mon.l[0], want) {
		t.Errorf("record %q lacks %q", mon.l[0], want)
	}
	l.Logger.Info("plain message", "node", "db1")
	if got := mon.l[3]; !strings.HasSuffix(got, "[INFO] plain message node=db1\n") {
		t.Errorf("ordinary record changed: %q", got)
	}
}
