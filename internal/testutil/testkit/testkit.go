// Package testkit holds the small helpers many tests share: a bounded wait
// for a condition, a log buffer safe for concurrent writers, and the firing
// of a loop's timer on a fake clock.
package testkit

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// WaitFor polls cond until it holds, and fails the test if it does not
// within d. The poll starts at 1 ms and backs off to 50 ms, so a fast
// condition is seen at once and a slow one costs little CPU.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for poll := time.Millisecond; !cond(); poll = min(2*poll, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", d, what)
		}
		time.Sleep(poll)
	}
}

// SyncBuffer is a bytes.Buffer for many writers (a logger shared by
// goroutines) and a reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tick fires the one timer a loop waits on in clock, re-armed by the loop
// once it has handled it (as package sink/driver does): it waits for the
// timer, advances clock by d (at least the timer's interval), and returns
// once the loop has armed its timer again, so the tick's run is over. It
// fails the test if either wait takes more than 10 s. Nothing else may
// wait on clock.
func Tick(t testing.TB, clock *clockwork.FakeClock, d time.Duration) {
	t.Helper()
	tick(t, clock, d, 10*time.Second)
}

func tick(t testing.TB, clock *clockwork.FakeClock, d, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no timer waits on the clock after %s", within)
	}
	clock.Advance(d)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the loop did not arm its timer again within %s of the tick", within)
	}
}
