// Package testkit holds the small helpers many tests share: a bounded wait
// for a condition, a log buffer safe for concurrent writers, and a ticker
// a test fires by hand.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
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

// FakeTicker is a ticker (C and Stop, as the sinks take) that ticks only
// when the test sends on Ch.
type FakeTicker struct{ Ch chan time.Time }

// NewFakeTicker returns a FakeTicker with an unbuffered channel.
func NewFakeTicker() *FakeTicker { return &FakeTicker{Ch: make(chan time.Time)} }

func (f *FakeTicker) C() <-chan time.Time { return f.Ch }
func (f *FakeTicker) Stop()               {}
