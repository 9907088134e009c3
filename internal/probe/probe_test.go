package probe

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// These tests need no MySQL server: a closed port (refused) and a listener
// that never answers (hung server).

func newTestProbe(t *testing.T, port int, n Notifier) *Probe {
	t.Helper()
	p, err := New(Config{Host: "127.0.0.1", Port: port, User: "u", Password: "p"}, testLogger(t), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// closedPort returns a TCP port on which nothing listens.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestRefusedIsCriticalAtOnceWithBackoff(t *testing.T) {
	rec := newRecorder()
	clk := clockwork.NewFakeClock()
	p, err := New(Config{Host: "127.0.0.1", Port: closedPort(t), User: "u", Password: "p"}, testLogger(t), rec, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if st := p.Status(); st.State != StateCritical || st.Reason != ReasonStarting {
		t.Fatalf("before start: %+v", st)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
	e := rec.await(t, 0, 5*time.Second, "a check", func(Event) bool { return true })
	if e.Status.Last.Outcome != OutcomeHardFail || e.Status.Reason != ReasonRefused || e.Status.Last.Facts.Reachable {
		t.Errorf("first check: %+v", e.Status)
	}
	// 3 s of probe time, one interval at a time, each once the loop waits
	// for its next check: checks at 0, 250 ms, ..., 3 s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 12 {
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("the probe loop never waited for its next check: %v", err)
		}
		clk.Advance(p.cfg.Interval)
	}
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	// Attempts at 0, 250 ms, 750 ms, 1.75 s, 2.75 s: back-off doubles up to
	// ReconnectMax (1 s), so a dead server is not stormed; the checks in
	// between repeat the last failure.
	if st.Attempts != 5 {
		t.Errorf("%d connection attempts in 3 s, want 5", st.Attempts)
	}
	if st.Checks != 13 {
		t.Errorf("%d checks in 3 s, want 13", st.Checks)
	}
	if st.State != StateCritical || st.Connects != 0 {
		t.Errorf("status: %+v", st)
	}
}

// TestReconnectScheduleInChecks: after n failed connects in a row,
// 2^(n-1)-1 checks are skipped, up to ReconnectMax (here 2 s, 8 checks of
// 250 ms: 7 skipped), and the first attempt after a success is immediate.
func TestReconnectScheduleInChecks(t *testing.T) {
	p, err := New(Config{Host: "127.0.0.1", Port: closedPort(t), User: "u", Password: "p", ReconnectMax: 2 * time.Second},
		testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var skips []int
	for range 6 {
		if _, ok := p.connect(context.Background(), ""); ok {
			t.Fatal("connected to a closed port")
		}
		skips = append(skips, p.skip)
	}
	if want := []int{0, 1, 3, 7, 7, 7}; !slices.Equal(skips, want) {
		t.Errorf("checks skipped after each failure: %v, want %v", skips, want)
	}
}

func TestHungServerTimesOut(t *testing.T) {
	// The kernel completes the TCP handshake into the backlog; nobody ever
	// accepts or answers, like a SIGSTOPped mysqld.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := newRecorder()
	p := newTestProbe(t, l.Addr().(*net.TCPAddr).Port, rec)
	t0 := time.Now()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := rec.await(t, 0, 5*time.Second, "a check", func(Event) bool { return true })
	d := e.at.Sub(t0)
	if e.Status.Last.Reason != ReasonTimeout || e.Status.Last.Outcome != OutcomeFail {
		t.Errorf("first check: %s %s (%s)", e.Status.Last.Outcome, e.Status.Last.Reason, e.Status.Last.Message)
	}
	if d < p.cfg.Timeout || d > p.cfg.Timeout+time.Second {
		t.Errorf("first check ended after %s, want about the %s timeout", d, p.cfg.Timeout)
	}
	// Close must not wait for a connect in progress beyond the timeout.
	time.Sleep(100 * time.Millisecond)
	t1 := time.Now()
	p.Close()
	if d := time.Since(t1); d > p.cfg.Timeout+200*time.Millisecond {
		t.Errorf("Close took %s", d)
	}
}

func TestPanicsAreFailedChecks(t *testing.T) {
	var checks atomic.Int32
	rec := newRecorder()
	var notified atomic.Int32
	n := NotifierFunc(func(e Event) {
		rec.Notify(e)
		if notified.Add(1) == 2 {
			panic("notifier bug")
		}
	})
	p := newTestProbe(t, closedPort(t), n)
	p.beforeCheck = func() {
		if checks.Add(1) == 1 {
			panic("check bug")
		}
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := rec.await(t, 0, 5*time.Second, "a check", func(Event) bool { return true })
	if e.Status.Last.Reason != ReasonPanic || e.Status.Last.Outcome != OutcomeFail {
		t.Errorf("panicking check: %+v", e.Status.Last)
	}
	// The loop goes on after both panics.
	rec.await(t, 0, 5*time.Second, "a third check", func(e Event) bool { return e.Status.Checks >= 3 })
}

func TestStartContextCancel(t *testing.T) {
	rec := newRecorder()
	p := newTestProbe(t, closedPort(t), rec)
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec.await(t, 0, 5*time.Second, "a check", func(Event) bool { return true })
	cancel()
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		t.Fatal("loop still running after its context was cancelled")
	}
	p.Close()
	p.Close()
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{User: "u", Interval: time.Millisecond, Port: 3306}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "interval = 1ms") {
		t.Errorf("New: %v", err)
	}
	p, err := New(Config{User: "u", Socket: "/tmp/x.sock"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Target() != "/tmp/x.sock" || p.cfg.Port != 0 {
		t.Errorf("socket config: %+v", p.cfg)
	}
	p.Close() // never started: must not block
	if got := (Config{Host: "::1", Port: 3307}).Target(); got != "[::1]:"+strconv.Itoa(3307) {
		t.Errorf("Target %q", got)
	}
}
