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
	maxComponentLen  = 24 // logging.ParseStdLine's longest component
	otherKind        = "memberlist: " + otherLines
)

// LogThrottle is an io.Writer in front of serf's and memberlist's log
// output (a standard logger's lines) that bounds the lines about what
// others sent: memberlist logs an ERROR for every packet or stream it
// cannot read, with the sender's address ("from=..."), and 20,000 garbage
// datagrams made 9,404 ERROR lines in 2 s. Lines at WARN or above with a
// "from=" address are grouped by kind (the fixed start of the line's
// format, throttleKindOf): Burst of a kind pass each Window,
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

// throttleKinds are the kinds of the lines to throttle: the fixed text of
// the format of each memberlist line at WARN or above that names a sender
// (memberlist v0.7.0, and the transport's own), up to its first verb (%).
// The rest of a line (an error, a packet label, a node name, numbers) is
// chosen by whoever sent the packet: it never makes a kind of its own, or
// a flood of random labels would pass a burst per label.
var throttleKinds = []string{
	"Compound request had %d truncated messages",
	"Decrypt packet failed",
	"Failed push/pull merge",
	"Failed to decode ack response",
	"Failed to decode alive message",
	"Failed to decode compound request",
	"Failed to decode dead message",
	"Failed to decode indirect ping request",
	"Failed to decode nack response",
	"Failed to decode ping request",
	"Failed to decode ping",
	"Failed to decode suspect message",
	"Failed to decompress payload",
	"Failed to forward ack",
	"Failed to push local state",
	"Failed to read remote state",
	"Failed to receive user message",
	"Failed to send ack",
	"Failed to send error",
	"Failed to send indirect ping",
	"Failed to send nack",
	"Got ping for unexpected node",
	"Message type (%d) not supported",
	"Received invalid msgType (%d)",
	"cannot decode label; packet has been truncated",
	"discarding packet with unacceptable label",
	"discarding stream with unacceptable label",
	"failed to receive and remove the stream label header",
	"failed to receive",
	"handler queue full, dropping message (%d)",
	"inbound stream rejected (%s)",
	"label header cannot be empty when present",
	"missing message type byte",
	"msg type (%d) not supported",
	"unexpected double packet label header",
	"unexpected double stream label header",
}

// otherLines is the kind of the lines to throttle that start with none of
// throttleKinds (a memberlist release's new line, an error's text first).
const otherLines = "lines of other kinds"

// throttleKindOf is the kind of a log line to throttle: "component: " and
// the longest of throttleKinds whose fixed start (up to its first verb)
// starts the message, else otherLines. Nothing a sender chose is in a
// kind, so there are at most len(throttleKinds)+1 kinds per component. ok
// is false for a line not to throttle: below WARN, or not about something
// a sender sent ("from=").
func throttleKindOf(line string) (string, bool) {
	// Most lines name no sender: they are not parsed here (StdWriter
	// parses every line anyway).
	if !strings.Contains(line, "from=") {
		return "", false
	}
	lv, component, msg := logging.ParseStdLine(strings.TrimRight(line, "\n"))
	if lv < slog.LevelWarn || !strings.Contains(msg, "from=") {
		return "", false
	}
	kind, fixed := otherLines, 0
	for _, k := range throttleKinds {
		prefix, _, _ := strings.Cut(k, "%")
		if len(prefix) > fixed && strings.HasPrefix(msg, prefix) {
			kind, fixed = k, len(prefix)
		}
	}
	if len(component) > maxComponentLen {
		component = component[:maxComponentLen]
	}
	return component + ": " + kind, true
}
