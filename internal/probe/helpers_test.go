package probe

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// Test account created on every test server.
const (
	probeUser     = "shoalprobe"
	probePassword = "probe-pw"
)

// stamped is an Event with the time the notifier received it.
type stamped struct {
	Event
	at time.Time
}

// recorder is a Notifier that keeps every event and lets tests wait for one.
type recorder struct {
	mu     sync.Mutex
	events []stamped
	wake   chan struct{} // closed and replaced at every event
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{})} }

func (r *recorder) Notify(e Event) {
	now := time.Now()
	r.mu.Lock()
	r.events = append(r.events, stamped{e, now})
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

// mark returns the index of the next event.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *recorder) since(from int) []stamped {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[from:])
}

// await returns the first event at index >= from for which cond holds,
// failing the test after timeout.
func (r *recorder) await(t testing.TB, from int, timeout time.Duration, what string, cond func(Event) bool) stamped {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for ; from < len(r.events); from++ {
			if cond(r.events[from].Event) {
				e := r.events[from]
				r.mu.Unlock()
				return e
			}
		}
		wake := r.wake
		var last Status
		if n := len(r.events); n > 0 {
			last = r.events[n-1].Status
		}
		r.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			t.Fatalf("no event with %s within %s; last status: %s %s (%s), last check %s %s: %s",
				what, timeout, last.State, last.Reason, last.Message, last.Last.Outcome, last.Last.Reason, last.Last.Message)
		}
	}
}

func isState(s State) func(Event) bool {
	return func(e Event) bool { return e.Status.State == s }
}

// testLogger logs through t.Log at info level (debug with SHOAL_TEST_DEBUG=1).
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("SHOAL_TEST_DEBUG") == "1" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// createProbeUser creates the probe's account on srv (at most 2
// connections, as a probe needs 1). grants may be empty.
func createProbeUser(t testing.TB, srv *mariadbtest.Server, user string, grants string) {
	t.Helper()
	srv.CreateUser(mariadbtest.User{Name: user, Password: probePassword, Grants: grants, MaxConns: 2})
}

// startProbe starts a probe on srv over TCP with default timing, as the
// test user; mod may change the config. The probe is closed in t.Cleanup.
func startProbe(t testing.TB, srv *mariadbtest.Server, mod func(*Config), opts ...func(*Probe)) (*Probe, *recorder) {
	t.Helper()
	cfg := Config{Host: "127.0.0.1", Port: srv.Port(), User: probeUser, Password: probePassword}
	if mod != nil {
		mod(&cfg)
	}
	rec := newRecorder()
	p, err := New(cfg, testLogger(t), rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(p)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, rec
}

// trials returns n, or SHOAL_PROBE_TRIALS if set, or 3 in -short mode.
func trials(n int) int {
	if v, err := strconv.Atoi(os.Getenv("SHOAL_PROBE_TRIALS")); err == nil && v > 0 {
		return v
	}
	if testing.Short() {
		return 3
	}
	return n
}

// distribution formats p50/p90/p99/max of ds.
func distribution(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	r := func(d time.Duration) time.Duration {
		if d < 10*time.Millisecond {
			return d.Round(10 * time.Microsecond)
		}
		return d.Round(time.Millisecond)
	}
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, min %s, max %s (%d trials)",
		r(q(0.50)), r(q(0.90)), r(q(0.99)), r(s[0]), r(s[len(s)-1]), len(s))
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// globalStatus reads some global status counters over one admin connection.
func globalStatus(t testing.TB, srv *mariadbtest.Server, names ...string) map[string]int64 {
	t.Helper()
	rows, err := srv.DB().Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(names, "','") + "')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}
