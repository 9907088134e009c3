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
			"memberlist: msg type (##) not supported", true},
		{"[WARN] memberlist: inbound stream rejected (per_ip) from=10.0.0.2:40000", "memberlist: inbound stream rejected (per_ip)", true},
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
