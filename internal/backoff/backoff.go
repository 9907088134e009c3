// Package backoff is the one exponential back-off of shoal's retry loops
// (join, peers-file rejoin, tag publishing, the probe's reconnects): a wait
// that doubles from Initial up to Max, with equal jitter (half the wait
// fixed, half random) where many agents could otherwise retry in step, and
// the clock injected so that tests advance time instead of sleeping.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"
)

// Policy says how waits grow.
type Policy struct {
	Initial time.Duration // the first wait; must be > 0
	Max     time.Duration // the longest wait; <= 0 or < Initial: Initial
	// Jitter spreads each wait over [w/2, w] ("equal jitter"), so that many
	// agents restarted together never retry at once, and never sooner than
	// half the planned wait.
	Jitter bool
}

// Delay is the planned wait before retry n (n >= 1), without jitter:
// Initial·2^(n-1), at most Max.
func (p Policy) Delay(n int) time.Duration {
	if p.Initial <= 0 {
		return 0
	}
	limit := max(p.Max, p.Initial)
	d := p.Initial
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Backoff is the state of one retry loop; it is not safe for concurrent use.
type Backoff struct {
	p     Policy
	clock clockwork.Clock
	n     int // retries planned since the last Reset
	rand  func(int64) int64
}

// New returns a back-off at its first wait. A nil clock is the real clock.
func New(p Policy, clock clockwork.Clock) *Backoff {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Backoff{p: p, clock: clock, rand: rand.Int64N}
}

// Next returns the wait before the next retry, jittered when the policy
// says so, and moves on to the following one.
func (b *Backoff) Next() time.Duration {
	b.n++
	d := b.p.Delay(b.n)
	if b.p.Jitter && d > 1 {
		half := d / 2
		d = half + time.Duration(b.rand(int64(d-half)+1))
	}
	return d
}

// Reset goes back to the first wait, after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Retries is how many waits Next has handed out since the last Reset.
func (b *Backoff) Retries() int { return b.n }

// Wait sleeps for Next() on the clock. It returns the wait and false when
// ctx ended first.
func (b *Backoff) Wait(ctx context.Context) (time.Duration, bool) {
	d := b.Next()
	t := b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return d, false
	case <-t.Chan():
		return d, true
	}
}

// Accept is the wait after a failed Accept (too many open files) before the
// next one: 5 ms doubling up to 1 s, as net/http and memberlist do.
var Accept = Policy{Initial: 5 * time.Millisecond, Max: time.Second}
