// Package driver runs a pool sink's applies on a goroutine of its own, so
// that the router never waits for a router: one apply at once after each
// Update (updates that arrive during an apply coalesce into one more apply
// with the newest pool), and a periodic one an interval after the last.
//
// The period is a timer of the sink's clock, armed again once each periodic
// run is done (so a slow run is never followed at once by another). A test
// with a fake clock waits for the loop's timer
// (clockwork.FakeClock.BlockUntilContext with 1), advances the clock by the
// interval, and waits for the timer again: it is back only once the loop
// has handled the tick.
package driver

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/sink"
)

// RunFunc applies update u. tick is true for a periodic run, false for a
// run after an Update. It must recover its own panics.
type RunFunc func(ctx context.Context, u sink.Update, tick bool)

// Driver holds the newest pool and runs the sink's applies. Its methods are
// safe for concurrent use.
type Driver struct {
	interval time.Duration
	clock    clockwork.Clock
	run      RunFunc

	mu      sync.Mutex
	latest  sink.Update
	have    bool // Update was called
	started bool
	closed  bool
	cancel  context.CancelFunc

	kick chan struct{} // buffered 1: a pending Update
	done chan struct{} // closed when the loop ends
}

// New returns a driver that calls run, periodically every interval of
// clock; clock nil means the real clock.
func New(interval time.Duration, clock clockwork.Clock, run RunFunc) *Driver {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Driver{
		interval: interval, clock: clock, run: run,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// Start runs the loop until ctx ends or Close is called. Calls after the
// first, or after Close, do nothing.
func (d *Driver) Start(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return
	}
	d.started = true
	ctx, d.cancel = context.WithCancel(ctx)
	go d.loop(ctx)
}

// Update hands over a new pool and asks for an apply without waiting for
// it. u.Pool is copied.
func (d *Driver) Update(u sink.Update) {
	u.Pool = u.Pool.Clone()
	d.mu.Lock()
	d.latest, d.have = u, true
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default: // an apply is already pending; it will read the newest pool
	}
}

// Close stops the loop and waits for it. It is safe to call more than once.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	started, cancel := d.started, d.cancel
	d.mu.Unlock()
	if started {
		cancel()
		<-d.done
	}
	return nil
}

// Done is closed when the loop has ended.
func (d *Driver) Done() <-chan struct{} { return d.done }

func (d *Driver) loop(ctx context.Context) {
	defer close(d.done)
	t := d.clock.NewTimer(d.interval)
	defer t.Stop()
	for {
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-t.Chan():
			tick = true
		}
		if ctx.Err() != nil {
			return
		}
		d.mu.Lock()
		u, have := d.latest, d.have
		d.mu.Unlock()
		if have {
			d.run(ctx, u, tick)
		}
		if tick {
			t.Reset(d.interval) // the timer fired: Reset needs no drain
		}
	}
}
