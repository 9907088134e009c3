package gossip

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

func TestThrottleKindOf(t *testing.T) {
	for _, tc := range []struct {
		line, kind string
		ok         bool
	}{
		{"[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:5000\n",
			"memberlist: Decrypt packet failed", true},
		{"2026/01/02 15:04:05 [ERR] memberlist: msg type (17) not supported from=10.0.0.1:7946",
			"memberlist: msg type (%d) not supported", true},
		{"[WARN] memberlist: inbound stream rejected (per_ip) from=10.0.0.2:40000", "memberlist: inbound stream rejected (%s)", true},
		{"[ERR] memberlist: Failed to decode ping request: msgpack decode error from=10.0.0.1:7946", "memberlist: Failed to decode ping request", true},
		{"[ERR] memberlist: Failed to decode ping: msgpack decode error from=10.0.0.1:7946", "memberlist: Failed to decode ping", true},
		{`[ERR] memberlist: discarding packet with unacceptable label "Decrypt packet failed": from=10.0.0.1:7946`,
			"memberlist: discarding packet with unacceptable label", true},
		{"[ERR] memberlist: something new from=10.0.0.1:7946", "memberlist: lines of other kinds", true},
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5000", "", false},
		{"[WARN] serf: Shutdown without a Leave", "", false},
		{"[ERR] memberlist: Conflicting address for n1. Mine: 10.0.0.1:7946 Theirs: 10.0.0.2:7946", "", false},
	} {
		kind, ok := throttleKindOf(tc.line)
		if kind != tc.kind || ok != tc.ok {
			t.Errorf("throttleKindOf(%q) = %q, %v; want %q, %v", tc.line, kind, ok, tc.kind, tc.ok)
		}
	}
}

// TestLogThrottle: per kind, the burst passes, the rest is held back and
// summed up once at the window's end; other kinds and other lines pass;
// after the window the kind passes again.
func TestLogThrottle(t *testing.T) {
	var out testkit.SyncBuffer // summaries come from their timer's goroutine
	clock := clockwork.NewFakeClockAt(time.Unix(1000, 0))
	w := NewLogThrottle(&out)
	w.clock = clock

	for i := range 1000 {
		fmt.Fprintf(w, "[ERR] memberlist: Decrypt packet failed: bad %d from=127.0.0.1:%d\n", i, 1000+i)
	}
	fmt.Fprintf(w, "[ERR] memberlist: msg type (3) not supported from=127.0.0.1:1\n")
	fmt.Fprintf(w, "[INFO] serf: EventMemberJoin: n1 127.0.0.1\n")
	if got := strings.Count(out.String(), "Decrypt packet failed"); got != logThrottleBurst {
		t.Errorf("%d decrypt lines passed, want %d:\n%s", got, logThrottleBurst, out.String())
	}
	if !strings.Contains(out.String(), "not supported") || !strings.Contains(out.String(), "EventMemberJoin") {
		t.Errorf("other lines held back:\n%s", out.String())
	}
	// Summaries are scheduled as the lines are written: one timer on the
	// clock is one summary.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("not exactly 1 summary scheduled: %v", err)
	}
	clock.Advance(logThrottleWindow)
	want := fmt.Sprintf("[WARN] memberlist: suppressed %d similar log lines in 10s: Decrypt packet failed\n", 1000-logThrottleBurst)
	testkit.WaitFor(t, 10*time.Second, "the summary "+want, func() bool { return strings.Contains(out.String(), want) })
	before := len(out.String())
	fmt.Fprintf(w, "[ERR] memberlist: Decrypt packet failed: bad from=127.0.0.1:1\n")
	if !strings.Contains(out.String()[before:], "Decrypt packet failed") {
		t.Error("the kind is still held back after its window")
	}
}

// TestLogThrottleKindsBounded: lines of ever new kinds share one kind past
// maxThrottleKinds.
func TestLogThrottleKindsBounded(t *testing.T) {
	var out bytes.Buffer
	w := NewLogThrottle(&out)
	w.clock = clockwork.NewFakeClock() // the summaries never come due
	for i := range 10 * maxThrottleKinds {
		fmt.Fprintf(w, "[ERR] memberlist: kind%c%c failed from=127.0.0.1:1\n", 'a'+i%26, 'a'+i/26%26)
	}
	if len(w.kinds) > maxThrottleKinds {
		t.Errorf("%d kinds tracked, want at most %d", len(w.kinds), maxThrottleKinds)
	}
}

// TestLogThrottleRandomLabels: lines whose variable part a sender chooses
// (a packet label, a node name, an error's text) are one kind each, so a
// flood of ever new labels passes only the burst of that kind per window,
// window after window, and every line held back is counted in the
// summary. Before, each new label was a kind of its own: 63 of them passed
// each window (388 lines a minute in the report).
func TestLogThrottleRandomLabels(t *testing.T) {
	for _, tc := range []struct{ name, format, kind string }{
		{"packet label", "[ERR] memberlist: discarding packet with unacceptable label %q: from=10.0.0.9:7946\n", "discarding packet with unacceptable label"},
		{"stream label", "[ERR] memberlist: discarding stream with unacceptable label %q: from=10.0.0.9:7946\n", "discarding stream with unacceptable label"},
		{"node name", "[WARN] memberlist: Got ping for unexpected node %s from=10.0.0.9:7946\n", "Got ping for unexpected node"},
		{"quoted node name", "[WARN] memberlist: Got ping for unexpected node '%s' from=10.0.0.9:7946\n", "Got ping for unexpected node"},
		{"error text first", "[ERR] memberlist: %s from=10.0.0.9:7946\n", "lines of other kinds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out testkit.SyncBuffer
			clock := clockwork.NewFakeClockAt(time.Unix(1000, 0))
			w := NewLogThrottle(&out)
			w.clock = clock
			const windows, perWindow = 3, 1000
			for win := range windows {
				for i := range perWindow {
					fmt.Fprintf(w, tc.format, fmt.Sprintf("lbl-%d-%d x%c", win, i, 'a'+i%26))
				}
				if got := strings.Count(out.String(), "lbl-"); got > (win+1)*logThrottleBurst {
					t.Fatalf("%d lines with random labels passed in %d windows, want at most %d", got, win+1, (win+1)*logThrottleBurst)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := clock.BlockUntilContext(ctx, 1)
				cancel()
				if err != nil {
					t.Fatalf("window %d: not one summary scheduled: %v", win, err)
				}
				clock.Advance(logThrottleWindow)
				want := fmt.Sprintf("[WARN] memberlist: suppressed %d similar log lines in 10s: %s\n", perWindow-logThrottleBurst, tc.kind)
				testkit.WaitFor(t, 10*time.Second, "the summary "+want, func() bool { return strings.Count(out.String(), want) == win+1 })
			}
			if len(w.kinds) > 1 {
				t.Errorf("%d kinds tracked for one kind of line", len(w.kinds))
			}
		})
	}
}
