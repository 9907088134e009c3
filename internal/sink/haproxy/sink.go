package haproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

// runTimeoutMult bounds one reconcile to this many command timeouts. A
// transport error also ends a reconcile at once.
const runTimeoutMult = 10

// Ticker is the part of *time.Ticker the sink uses, so tests can drive it.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type timeTicker struct{ *time.Ticker }

func (t timeTicker) C() <-chan time.Time { return t.Ticker.C }

// Options are the sink's collaborators. Zero fields take the defaults.
type Options struct {
	Logger    *slog.Logger               // default slog.Default()
	Now       func() time.Time           // default time.Now
	NewTicker func(time.Duration) Ticker // default a *time.Ticker
}

// runtimeAPI is the part of Client the sink uses.
type runtimeAPI interface {
	ServersState(ctx context.Context) ([]Server, error)
	Exec(ctx context.Context, cmd string) error
}

// Sink makes a local HAProxy follow the pool. Create it with New; its
// methods are safe for concurrent use.
type Sink struct {
	cfg       Config
	planner   *Planner
	api       runtimeAPI
	log       *slog.Logger
	now       func() time.Time
	newTicker func(time.Duration) Ticker

	applyMu sync.Mutex // one reconcile at a time

	mu      sync.Mutex // guards the fields below
	latest  *pool.Pool
	frozen  bool
	have    bool // Update was called
	started bool
	closed  bool
	cancel  context.CancelFunc
	st      Status
	reports map[string]string // last logged report per kind
	errLog  string            // last logged error, to log repeats at debug

	kick chan struct{} // buffered 1: a pending Update
	done chan struct{} // closed when the loop ends
}

// New validates cfg and returns a sink. It does no I/O; call Start to run
// the loop, or Apply to reconcile once.
func New(cfg Config, opts Options) (*Sink, error) {
	planner, err := NewPlanner(cfg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	client, err := NewClient(cfg.Address, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewTicker == nil {
		opts.NewTicker = func(d time.Duration) Ticker { return timeTicker{time.NewTicker(d)} }
	}
	return &Sink{
		cfg:       cfg,
		planner:   planner,
		api:       client,
		log:       opts.Logger.With("component", "haproxy-sink"),
		now:       opts.Now,
		newTicker: opts.NewTicker,
		reports:   map[string]string{},
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}, nil
}

// Apply reconciles HAProxy with pool p once and returns what failed. It
// does not change the pool the loop uses (see Update). Reconciles never
// overlap: Apply waits for a running one.
func (s *Sink) Apply(ctx context.Context, p *pool.Pool, frozen bool) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	sent, failed, err := s.reconcile(ctx, p, frozen)
	s.record(sent, failed, err)
	return err
}

// reconcile reads the servers' state, plans and sends the commands. It
// returns how many commands it sent and how many of those failed.
func (s *Sink) reconcile(ctx context.Context, p *pool.Pool, frozen bool) (sent, failed int, err error) {
	servers, err := s.api.ServersState(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read servers state: %w", err)
	}
	plan := s.planner.Plan(servers, p, frozen)
	s.report(plan, frozen)
	var errs []error
	// After a failed state command, skip the server's other commands (no
	// shutdown sessions of a server that did not go out). A failed weight
	// (say, a static balance algorithm) does not keep a server out.
	bad := map[ServerRef]bool{}
	for i, cmd := range plan.Commands {
		ref := ServerRef{cmd.Backend, cmd.Server}
		if bad[ref] {
			continue
		}
		sent++
		err := s.api.Exec(ctx, cmd.String())
		if err == nil {
			s.log.Info("haproxy command sent", "backend", cmd.Backend, "server", cmd.Server, "node", cmd.Node,
				"command", cmd.String(), "from", cmd.From)
			continue
		}
		failed++
		bad[ref] = cmd.Action == ActionState
		errs = append(errs, err)
		var refused *ResponseError
		if !errors.As(err, &refused) {
			if left := len(plan.Commands) - i - 1; left > 0 {
				errs = append(errs, fmt.Errorf("%d more commands not sent", left))
			}
			break
		}
	}
	for _, e := range plan.Errors {
		errs = append(errs, errors.New(e))
	}
	return sent, failed, errors.Join(errs...)
}

// Start runs the loop until ctx ends or Close is called: a reconcile at once
// after each Update, and one every Config.Interval with the last pool once
// there is one. Calls after the first, or after Close, do nothing.
func (s *Sink) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	go s.loop(ctx)
}

// Update hands the sink a new pool and asks for a reconcile without waiting
// for it. Updates that arrive while a reconcile runs are coalesced into one
// more reconcile with the newest pool. p is copied.
func (s *Sink) Update(p *pool.Pool, frozen bool) {
	p = p.Clone()
	s.mu.Lock()
	s.latest, s.frozen, s.have = p, frozen, true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // a reconcile is already pending; it will read the newest pool
	}
}

// Close stops the loop and waits for it. It is safe to call more than once.
func (s *Sink) Close() error {
	s.mu.Lock()
	s.closed = true
	started, cancel := s.started, s.cancel
	s.mu.Unlock()
	if started {
		cancel()
		<-s.done
	}
	return nil
}

func (s *Sink) loop(ctx context.Context) {
	defer close(s.done)
	t := s.newTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C():
		}
		if ctx.Err() != nil {
			return
		}
		s.runLatest(ctx)
	}
}

// runLatest reconciles with the newest pool, if any, turning a panic into a
// failed reconcile.
func (s *Sink) runLatest(ctx context.Context) {
	s.mu.Lock()
	p, frozen, have := s.latest, s.frozen, s.have
	s.mu.Unlock()
	if !have {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, runTimeoutMult*s.cfg.Timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("haproxy reconcile panicked", "panic", r, "stack", string(debug.Stack()))
			s.record(0, 0, fmt.Errorf("reconcile panicked: %v", r))
		}
	}()
	_ = s.Apply(ctx, p, frozen)
}
