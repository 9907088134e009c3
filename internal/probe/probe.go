package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Probe checks the local MySQL/MariaDB server in a loop over one persistent
// connection and keeps a health state with hysteresis. Create it with New,
// run it with Start, stop it with Close.
type Probe struct {
	cfg      Config
	log      *slog.Logger
	notifier Notifier
	conn     *connector
	clock    clockwork.Clock // the check schedule, back-off and hysteresis

	// noIdleWatch disables the dead-connection watch between checks (for
	// measurements that compare against waiting for the next tick).
	noIdleWatch bool
	// beforeCheck, if set, runs at the start of every check (tests inject
	// panics with it).
	beforeCheck func()

	// Owned by the loop goroutine.
	sess         *session
	connects     uint64
	attempts     uint64 // connection attempts
	connFailures int    // consecutive failed connection attempts
	skip         int    // checks left to wait before the next attempt
	lastConnFail Result // repeated while waiting
	lostIdle     error  // why the idle watch dropped the connection
	stall        stallGauge
	rx           struct {
		token string    // what the replica had received at the last check
		at    time.Time // when it last moved
	}

	mu     sync.Mutex
	h      *hysteresis
	status Status

	kickMu sync.Mutex // guards: kick, kicked
	// kick ends the current wait between checks (nil outside one);
	// kicked says CheckNow was called since the last check began.
	kick   context.CancelFunc
	kicked bool

	life      sync.Mutex
	started   bool
	closed    bool
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// Option changes how a Probe is built.
type Option func(*Probe)

// WithClock runs the probe's schedule (check times, back-off, hysteresis
// durations) on c instead of the real clock, or instead of Config.Clock.
// Check timeouts and the idle connection's read deadline stay on real time:
// they bound network I/O.
func WithClock(c clockwork.Clock) Option { return func(p *Probe) { p.clock = c } }

// WithPressureDir reads the host's pressure stall information from dir
// instead of DefaultPressureDir; "" measures no host stalls, so every
// timeout counts as a hung server.
func WithPressureDir(dir string) Option { return func(p *Probe) { p.stall.dir = dir } }

// New validates cfg (after defaults) and returns a Probe that is not yet
// running. logger may be nil (discard); notifier may be nil.
func New(cfg Config, logger *slog.Logger, notifier Notifier, opts ...Option) (*Probe, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid probe config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "probe", "target", cfg.Target())
	conn, err := newConnector(cfg, logger)
	if err != nil {
		return nil, err
	}
	p := &Probe{
		cfg:      cfg,
		log:      logger,
		notifier: notifier,
		conn:     conn,
		clock:    cfg.Clock,
		stall:    stallGauge{dir: DefaultPressureDir},
		done:     make(chan struct{}),
	}
	if p.clock == nil {
		p.clock = clockwork.NewRealClock()
	}
	for _, o := range opts {
		o(p)
	}
	now := p.clock.Now()
	p.h = newHysteresis(cfg.Rise, cfg.Fall, cfg.Interval, now)
	p.status = Status{State: StateCritical, Reason: ReasonStarting, Message: "no check completed yet", Since: now}
	return p, nil
}

// Start runs the check loop until ctx is done or Close is called. The first
// check runs at once. Start may be called only once.
func (p *Probe) Start(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	switch {
	case p.closed:
		return errors.New("start probe: already closed")
	case p.started:
		return errors.New("start probe: already started")
	}
	p.started = true
	ctx, p.cancel = context.WithCancel(ctx)
	p.log.Info("probe starting", "config", p.cfg)
	go p.run(ctx)
	return nil
}

// Close stops the loop, waits for it, and closes the connection. It is
// idempotent and safe to call concurrently; every call returns after the
// loop has stopped.
func (p *Probe) Close() error {
	p.closeOnce.Do(func() {
		p.life.Lock()
		p.closed = true
		started := p.started
		if started {
			p.cancel()
		}
		p.life.Unlock()
		if started {
			<-p.done
		}
		if p.sess != nil {
			p.sess.release()
			p.sess = nil
		}
		if err := p.conn.close(); err != nil {
			p.log.Debug("close connection pool", "err", err)
		}
	})
	return nil
}

// CheckNow asks for a check at once: between checks the wait ends; during
// one, the next starts right after it. The agent calls it when it changed
// its server itself (a switchover step set read_only), so that the new
// state is published without waiting for the interval.
func (p *Probe) CheckNow() {
	p.kickMu.Lock()
	defer p.kickMu.Unlock()
	p.kicked = true
	if p.kick != nil {
		p.kick()
	}
}

// waitCtx is the context of one wait between checks: CheckNow cancels it.
// The second result reports a kick already asked for (the check is due at
// once); done must be called when the wait ends.
func (p *Probe) waitCtx(ctx context.Context) (wctx context.Context, kicked bool, done func()) {
	p.kickMu.Lock()
	defer p.kickMu.Unlock()
	if p.kicked {
		p.kicked = false
		return ctx, true, func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	p.kick = cancel
	return wctx, false, func() {
		p.kickMu.Lock()
		p.kick = nil
		p.kickMu.Unlock()
		cancel()
	}
}

// Status returns the current state, reason, latest facts and counters.
func (p *Probe) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// run is the loop goroutine's root.
func (p *Probe) run(ctx context.Context) {
	defer close(p.done)
	for ctx.Err() == nil {
		p.loop(ctx)
	}
	p.log.Info("probe stopped")
}

// loop checks, records and waits until ctx is done. A panic outside a check
// (a bug) is logged, and the loop is restarted after one interval.
func (p *Probe) loop(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("probe loop panic; restarting", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p.dropSession()
			t := p.clock.NewTimer(p.cfg.Interval)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.Chan():
			}
		}
	}()
	// Checks are due on a fixed schedule (late wake-ups on a busy machine
	// do not accumulate), never overlap, and never burst to catch up.
	next := p.clock.Now()
	for {
		start := p.clock.Now()
		res := p.safeCheck(ctx, start)
		if ctx.Err() != nil {
			return // closed during the check: not a verdict on the server
		}
		p.record(res)
		next = next.Add(p.cfg.Interval)
		if now := p.clock.Now(); next.Before(now) {
			next = now
		}
		due, early := p.idle(ctx, next)
		if !due {
			return
		}
		if early {
			next = p.clock.Now()
		}
	}
}

// idle waits until the next check is due, watching the idle connection so
// that a server that dies in between is checked at once (early). due is
// false when ctx is done.
func (p *Probe) idle(ctx context.Context, until time.Time) (due, early bool) {
	for {
		if ctx.Err() != nil {
			return false, false
		}
		left := until.Sub(p.clock.Now())
		if left <= 0 {
			return true, false
		}
		wctx, kicked, done := p.waitCtx(ctx)
		if kicked {
			return true, true
		}
		if p.sess == nil || p.sess.nc == nil || p.noIdleWatch {
			t := p.clock.NewTimer(left)
			select {
			case <-wctx.Done():
				t.Stop()
				done()
				continue // closed, or CheckNow: re-evaluate
			case <-t.Chan():
				done()
				return true, false
			}
		}
		// The read deadline is the kernel's (real time); a timer of the
		// probe's clock ends the watch too, so that the clock drives the
		// schedule (a fake one, advanced, wakes it at once).
		tctx, stop := context.WithCancel(wctx)
		t := p.clock.AfterFunc(left, stop)
		err := watchIdle(tctx, p.sess.nc, time.Now().Add(left))
		t.Stop()
		stop()
		done()
		switch {
		case err == nil:
			continue // deadline reached, ctx done or CheckNow: re-evaluate
		case errors.Is(err, errNoWatch):
			p.sess.nc = nil
		default:
			p.log.Warn("connection closed by the server while idle; checking now", "err", err)
			p.lostIdle = err
			p.dropSession()
			return true, true
		}
	}
}

// record feeds a result to the state machine, updates Status, logs state
// changes and notifies.
func (p *Probe) record(res Result) {
	p.mu.Lock()
	prev := p.status
	changed := p.h.observe(res)
	known := prev.Known
	if res.FactsRead {
		known = res.Facts
	}
	p.status = Status{
		State:    p.h.state,
		Reason:   p.h.reason,
		Message:  p.h.message,
		Since:    p.h.since,
		Last:     res,
		Known:    known,
		Passes:   p.h.passes,
		Failures: p.h.fails,
		Checks:   prev.Checks + 1,
		Connects: p.connects,
		Attempts: p.attempts,
	}
	st := p.status
	p.mu.Unlock()

	ev := Event{
		Status:       st,
		PrevState:    prev.State,
		StateChanged: changed,
		FactsChanged: prev.Checks == 0 || res.Facts != prev.Last.Facts,
	}
	if changed {
		level := slog.LevelInfo
		if st.State != StatePassing {
			level = slog.LevelWarn
		}
		p.log.Log(context.Background(), level, "health changed",
			"from", prev.State.String(), "to", st.State.String(), "reason", string(st.Reason),
			"message", st.Message, "check_duration", res.Duration)
	} else if p.log.Enabled(context.Background(), slog.LevelDebug) {
		p.log.Debug("check", "outcome", res.Outcome.String(), "reason", string(res.Reason),
			"message", res.Message, "duration", res.Duration, "state", st.State.String())
	}
	p.safeNotify(ev)
}

func (p *Probe) safeNotify(ev Event) {
	if p.notifier == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("notifier panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	p.notifier.Notify(ev)
}

// dropSession discards the current connection, if any.
func (p *Probe) dropSession() {
	if p.sess != nil {
		p.sess.discard()
		p.sess = nil
	}
}

// Config returns the probe's configuration (with defaults applied).
func (p *Probe) Config() Config { return p.cfg }
