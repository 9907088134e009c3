package gossip

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/logging"
)

// Log throttle defaults: per kind of line, logThrottleBurst lines a
// logThrottleWindow, then one summary at the window's end.
const (
	logThrottleWindow = 10 * time.Second
	logThrottleBurst  = 3
	// maxThrottleKinds bounds the kinds tracked; lines of further kinds
	// share one.
	maxThrottleKinds = 64
	maxKindLen       = 80
	otherKind        = "memberlist: lines of other kinds"
)

// LogThrottle is an io.Writer in front of serf's and memberlist's log
// output (a standard logger's lines) that bounds the lines about what
// others sent: memberlist logs an ERROR for every packet or stream it
// cannot read, with the sender's address ("from=..."), and 20,000 garbage
// datagrams made 9,404 ERROR lines in 2 s. Lines at WARN or above with a
// "from=" address are grouped by kind (the message without the address,
// its error detail and its numbers): Burst of a kind pass each Window,
// the rest are counted in shoal_memberlist_log_suppressed_total and
// summed up in one WARN line when the window ends. Every other line
// passes as it is.
type LogThrottle struct {
	next   io.Writer
	window time.Duration
	burst  int
	clock  clockwork.Clock // the windows and their summaries

	mu    sync.Mutex
	kinds map[string]*throttleKind
}

type throttleKind struct {
	start      time.Time
	n          int // lines seen this window
	suppressed int
	flushing   bool // a summary is scheduled
}

// NewLogThrottle returns a throttle writing to next.
func NewLogThrottle(next io.Writer) *LogThrottle {
	return &LogThrottle{next: next, window: logThrottleWindow, burst: logThrottleBurst,
		clock: clockwork.NewRealClock(), kinds: map[string]*throttleKind{}}
}

// Write passes p on to the next writer unless it is a line to suppress.
// It never fails.
func (w *LogThrottle) Write(p []byte) (int, error) {
	kind, ok := throttleKindOf(string(p))
	if !ok || w.allow(kind) {
		_, _ = w.next.Write(p)
	}
	return len(p), nil
}

// allow counts a line of kind and reports whether it is to be logged.
func (w *LogThrottle) allow(kind string) bool {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kinds[kind]
	if k == nil && len(w.kinds) >= maxThrottleKinds-1 { // one is kept for otherKind
		w.forgetIdle(now)
		if len(w.kinds) >= maxThrottleKinds-1 {
			kind = otherKind
			k = w.kinds[kind]
		}
	}
	if k == nil {
		k = &throttleKind{start: now}
		w.kinds[kind] = k
	}
	if !k.flushing && now.Sub(k.start) >= w.window {
		k.start, k.n = now, 0
	}
	k.n++
	if k.n <= w.burst {
		return true
	}
	k.suppressed++
	metrics.IncrCounter([]string{"memberlist", "log", "suppressed"}, 1)
	if !k.flushing {
		k.flushing = true
		w.clock.AfterFunc(k.start.Add(w.window).Sub(now), func() { w.flush(kind) })
	}
	return false
}

// forgetIdle drops the kinds whose window ended without a summary due.
func (w *LogThrottle) forgetIdle(now time.Time) {
	for kind, k := range w.kinds {
		if !k.flushing && now.Sub(k.start) >= w.window {
			delete(w.kinds, kind)
		}
	}
}

// flush logs the summary of kind's window and forgets the kind.
func (w *LogThrottle) flush(kind string) {
	w.mu.Lock()
	k := w.kinds[kind]
	delete(w.kinds, kind)
	w.mu.Unlock()
	if k == nil || k.suppressed == 0 {
		return
	}
	component, msg, _ := strings.Cut(kind, ": ")
	line := fmt.Sprintf("[WARN] %s: suppressed %d similar log lines in %s: %s\n", component, k.suppressed, w.window, msg)
	_, _ = w.next.Write([]byte(line))
}

// throttleKindOf is the kind of a log line to throttle: "component:
// message" with the sender's address, the error detail after the first
// ": " and the digits dropped. ok is false for a line not to throttle:
// below WARN, or not about something a sender sent.
func throttleKindOf(line string) (string, bool) {
	// Most lines name no sender: they are not parsed here (StdWriter
	// parses every line anyway).
	if !strings.Contains(line, "from=") {
		return "", false
	}
	line = strings.TrimRight(line, "\n")
	lv, component, msg := logging.ParseStdLine(line)
	if lv < slog.LevelWarn || !strings.Contains(msg, "from=") {
		return "", false
	}
	msg, _, _ = strings.Cut(msg, " from=")
	msg, _, _ = strings.Cut(msg, ": ")
	var b strings.Builder
	b.WriteString(component)
	b.WriteString(": ")
	for _, r := range msg {
		if b.Len() >= maxKindLen {
			break
		}
		if r >= '0' && r <= '9' {
			r = '#'
		}
		b.WriteRune(r)
	}
	return b.String(), true
}
