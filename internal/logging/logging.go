// Package logging sets up the agent's log/slog logger, adapts the standard
// library loggers of serf and memberlist to it, and tees every record into
// the monitor stream used by `shoal monitor` and `serf monitor`.
package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// LevelTrace is below slog's Debug, for serf's and memberlist's [TRACE] lines.
const LevelTrace = slog.Level(-8)

// ParseLevel parses trace, debug, info, warn, error (any case, and serf's
// "err").
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "trace":
		return LevelTrace, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "err":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want trace, debug, info, warn or error)", s)
}

// Logging owns the agent's loggers.
type Logging struct {
	// Level is the level of the main output; change it to reload.
	Level *slog.LevelVar
	// Logger writes to the main output and to the monitor stream.
	Logger *slog.Logger
	// Plain writes only to the main output. Components that are themselves
	// part of the monitor stream (the RPC log streamer) log here to avoid
	// feeding back into it.
	Plain *slog.Logger

	monitor atomic.Pointer[monitorTarget]
}

type monitorTarget struct{ w io.Writer }

// New builds loggers writing to w in format "text" or "json".
func New(w io.Writer, format string, level slog.Level) *Logging {
	l := &Logging{Level: new(slog.LevelVar)}
	l.Level.Set(level)
	opts := &slog.HandlerOptions{Level: l.Level, ReplaceAttr: replaceLevel}
	var main slog.Handler
	if format == "json" {
		main = slog.NewJSONHandler(w, opts)
	} else {
		main = slog.NewTextHandler(w, opts)
	}
	l.Plain = slog.New(main)
	l.Logger = slog.New(&teeHandler{main: main, mon: &monitorHandler{l: l, mu: new(sync.Mutex)}})
	return l
}

func replaceLevel(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey && len(groups) == 0 {
		if lv, ok := a.Value.Any().(slog.Level); ok && lv < slog.LevelDebug {
			a.Value = slog.StringValue("TRACE")
		}
	}
	return a
}

// SetMonitor directs the monitor stream to w (serf's log writer ring).
func (l *Logging) SetMonitor(w io.Writer) {
	if w == nil {
		l.monitor.Store(nil)
		return
	}
	l.monitor.Store(&monitorTarget{w: w})
}

// teeHandler sends records to the main handler (level-filtered) and to the
// monitor handler (always from trace up; monitor clients filter themselves).
type teeHandler struct {
	main slog.Handler
	mon  *monitorHandler
}

func (t *teeHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return t.main.Enabled(ctx, lv) || t.mon.Enabled(ctx, lv)
}

func (t *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if t.main.Enabled(ctx, r.Level) {
		_ = t.main.Handle(ctx, r.Clone())
	}
	return t.mon.Handle(ctx, r)
}

func (t *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &teeHandler{main: t.main.WithAttrs(as), mon: t.mon.WithAttrs(as).(*monitorHandler)}
}

func (t *teeHandler) WithGroup(name string) slog.Handler {
	return &teeHandler{main: t.main.WithGroup(name), mon: t.mon.WithGroup(name).(*monitorHandler)}
}

// monitorHandler formats records the way serf's monitor clients expect:
// "TIME [LEVEL] component: message key=value ...".
type monitorHandler struct {
	l     *Logging
	mu    *sync.Mutex
	attrs []slog.Attr
	group string
}

func (m *monitorHandler) Enabled(context.Context, slog.Level) bool {
	return m.l.monitor.Load() != nil
}

func (m *monitorHandler) Handle(_ context.Context, r slog.Record) error {
	t := m.l.monitor.Load()
	if t == nil {
		return nil
	}
	var b bytes.Buffer
	b.WriteString(r.Time.UTC().Format("2006/01/02 15:04:05.000"))
	b.WriteString(" [")
	b.WriteString(serfLevel(r.Level))
	b.WriteString("] ")
	component := ""
	var rest []slog.Attr
	collect := func(a slog.Attr) bool {
		if a.Key == "component" && component == "" {
			component = a.Value.String()
		} else {
			rest = append(rest, a)
		}
		return true
	}
	for _, a := range m.attrs {
		collect(a)
	}
	r.Attrs(collect)
	// Messages and values quote other machines (serf logs node names):
	// escaped, a record stays one line and holds no terminal control.
	if component != "" {
		b.WriteString(escapeText(component))
		b.WriteString(": ")
	}
	b.WriteString(escapeText(r.Message))
	for _, a := range rest {
		b.WriteByte(' ')
		if m.group != "" {
			b.WriteString(escapeText(m.group) + ".")
		}
		b.WriteString(escapeText(a.Key))
		b.WriteByte('=')
		v := a.Value.Resolve().String()
		if strings.ContainsAny(v, " \t\n\"") || !printable(v) {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	b.WriteByte('\n')
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := t.w.Write(b.Bytes())
	return err
}

// printable reports whether s is valid UTF-8 of printable characters
// (strconv.IsPrint: no control, format or separator character but space).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// escapeText returns s, or when it is not printable, s with Go escapes
// (\n, \x1b, \u202e, \xff) and no surrounding quotes.
func escapeText(s string) string {
	if printable(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func (m *monitorHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *m
	n.attrs = append(append([]slog.Attr(nil), m.attrs...), as...)
	return &n
}

func (m *monitorHandler) WithGroup(name string) slog.Handler {
	n := *m
	n.group = name
	return &n
}

func serfLevel(lv slog.Level) string {
	switch {
	case lv < slog.LevelDebug:
		return "TRACE"
	case lv < slog.LevelInfo:
		return "DEBUG"
	case lv < slog.LevelWarn:
		return "INFO"
	case lv < slog.LevelError:
		return "WARN"
	}
	return "ERR"
}

// StdWriter adapts the line-oriented output of a standard library logger
// (serf's and memberlist's "2006/01/02 15:04:05 [INFO] serf: message")
// to logger, keeping the level and using the prefix before ':' as the
// component. Observe, if set, sees every parsed line first. Relevel, if
// set, gives the level a line is logged at (say, to demote a routine line
// logged at INFO every second).
type StdWriter struct {
	Logger  *slog.Logger
	Observe func(level slog.Level, component, msg string)
	Relevel func(level slog.Level, component, msg string) slog.Level
}

// Write implements io.Writer. It never fails. A standard logger writes one
// message per call; a message spanning several lines stays one record.
func (w *StdWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if line == "" {
		return len(p), nil
	}
	lv, component, msg := ParseStdLine(line)
	if w.Observe != nil {
		w.Observe(lv, component, msg)
	}
	if w.Relevel != nil {
		lv = w.Relevel(lv, component, msg)
	}
	if component != "" {
		w.Logger.Log(context.Background(), lv, msg, "component", component)
	} else {
		w.Logger.Log(context.Background(), lv, msg)
	}
	return len(p), nil
}

// ParseStdLine splits a serf/memberlist log line into level, component and
// message. Lines without a recognised [LEVEL] are logged at info.
func ParseStdLine(line string) (slog.Level, string, string) {
	// Strip the standard logger's date and time prefix.
	if len(line) >= 20 && line[4] == '/' && line[7] == '/' && line[10] == ' ' && line[13] == ':' {
		if _, err := time.Parse("2006/01/02 15:04:05", line[:19]); err == nil {
			line = strings.TrimLeft(line[19:], " ")
			// Microseconds, if the logger had them.
			if len(line) > 0 && line[0] == '.' {
				if i := strings.IndexByte(line, ' '); i > 0 {
					line = line[i+1:]
				}
			}
		}
	}
	lv := slog.LevelInfo
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			if parsed, err := ParseLevel(line[1:end]); err == nil {
				lv = parsed
				line = strings.TrimLeft(line[end+1:], " ")
			}
		}
	}
	component := ""
	if i := strings.Index(line, ": "); i > 0 && i < 24 && !strings.ContainsAny(line[:i], " \t") {
		component, line = line[:i], line[i+2:]
	}
	return lv, component, line
}
