package hooks

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// DropLogInterval is the most often a handler's drops are logged: the
// first drop at once, then a summary at most once per interval.
const DropLogInterval = 10 * time.Second

// dropLog rate-limits the logging of one handler's drops without ever
// losing a count: what is not logged at once is logged by a timer.
type dropLog struct {
	interval time.Duration
	clock    clockwork.Clock
	// emit logs: first is the handler's first drop ever (event names the
	// dropped event), otherwise a summary of counts by class and reason
	// since since.
	emit func(first bool, event string, counts map[dropKey]uint64, since time.Time)

	mu      sync.Mutex
	logged  bool
	last    time.Time
	pending map[dropKey]uint64
	timer   clockwork.Timer
}

// dropKey is what drops are counted by.
type dropKey struct{ class, reason string }

// note records n drops of class for reason; event names one of them.
func (d *dropLog) note(class, reason, event string, n uint64) {
	d.mu.Lock()
	if d.pending == nil {
		d.pending = map[dropKey]uint64{}
	}
	d.pending[dropKey{class, reason}] += n
	now := d.clock.Now()
	if !d.logged || now.Sub(d.last) >= d.interval {
		first, since := !d.logged, d.last
		counts := d.take(now)
		d.mu.Unlock()
		d.emit(first, event, counts, since)
		return
	}
	if d.timer == nil {
		d.timer = d.clock.AfterFunc(d.last.Add(d.interval).Sub(now), d.flush)
	}
	d.mu.Unlock()
}

// take returns and resets the pending counts; d.mu is held.
func (d *dropLog) take(now time.Time) map[dropKey]uint64 {
	counts := d.pending
	d.pending = map[dropKey]uint64{}
	d.logged, d.last = true, now
	return counts
}

// flush logs the pending summary, if any, and stops the timer.
func (d *dropLog) flush() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if len(d.pending) == 0 {
		d.mu.Unlock()
		return
	}
	since := d.last
	counts := d.take(d.clock.Now())
	d.mu.Unlock()
	d.emit(false, "", counts, since)
}
