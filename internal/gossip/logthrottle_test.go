package gossip

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
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
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	var pending []func()
	w := NewLogThrottle(&out)
	w.now = func() time.Time { return now }
	w.after = func(_ time.Duration, f func()) { pending = append(pending, f) }

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
	if len(pending) != 1 {
		t.Fatalf("%d summaries scheduled, want 1", len(pending))
	}
	now = now.Add(logThrottleWindow)
	pending[0]()
	want := fmt.Sprintf("[WARN] memberlist: suppressed %d similar log lines in 10s: Decrypt packet failed\n", 1000-logThrottleBurst)
	if !strings.Contains(out.String(), want) {
		t.Errorf("no summary %q:\n%s", want, out.String())
	}
	out.Reset()
	fmt.Fprintf(w, "[ERR] memberlist: Decrypt packet failed: bad from=127.0.0.1:1\n")
	if !strings.Contains(out.String(), "Decrypt packet failed") {
		t.Error("the kind is still held back after its window")
	}
}

// TestLogThrottleKindsBounded: lines of ever new kinds share one kind past
// maxThrottleKinds.
func TestLogThrottleKindsBounded(t *testing.T) {
	var out bytes.Buffer
	w := NewLogThrottle(&out)
	w.after = func(time.Duration, func()) {}
	for i := range 10 * maxThrottleKinds {
		fmt.Fprintf(w, "[ERR] memberlist: kind%c%c failed from=127.0.0.1:1\n", 'a'+i%26, 'a'+i/26%26)
	}
	if len(w.kinds) > maxThrottleKinds {
		t.Errorf("%d kinds tracked, want at most %d", len(w.kinds), maxThrottleKinds)
	}
}
