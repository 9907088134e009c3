package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"
)

// Defaults and limits of Config.
const (
	DefaultQueueSize          = 1000
	DefaultTimeout            = 30 * time.Second
	DefaultKillGrace          = 5 * time.Second
	DefaultOutputLimit        = 64 << 10
	DefaultQueryResponseLimit = 1024 // serf's QueryResponseSizeLimit default
	DefaultCoalescePeriod     = 3 * time.Second
	DefaultQuiescentPeriod    = time.Second

	// MinTimeout is the smallest handler timeout accepted.
	MinTimeout = 100 * time.Millisecond
)

// Drop reasons, the keys of HandlerStats.DroppedByReason.
const (
	DropQueueFull = "queue_full" // the handler's queue was full
	// DropSuperseded: the queue's state part was full and a newer event of
	// the same member (or a newer pool-change or health-change) replaced it.
	DropSuperseded = "superseded"
	DropRemoved    = "handler_removed" // Reload removed the handler
	DropClosed     = "runner_closed"   // Close
)

// DropReasons returns the drop reasons.
func DropReasons() []string {
	return []string{DropQueueFull, DropSuperseded, DropRemoved, DropClosed}
}

// ErrClosed is returned by a closed Runner.
var ErrClosed = errors.New("hook runner closed")

// ErrNoHandler is returned by Query when no handler matches the query.
var ErrNoHandler = errors.New("no handler for this query")

// Config configures a Runner. Zero values take the defaults.
type Config struct {
	// Self returns the local member: its name and tags fill SERF_SELF_NAME,
	// SERF_SELF_ROLE and SERF_TAG_*. Called when a handler starts. Required.
	Self func() serf.Member
	// Logger receives run results and drops; the caller adds the component.
	// Default slog.Default().
	Logger *slog.Logger
	// Dir is the handlers' working directory; "" inherits the agent's.
	Dir string
	// EnvAllow names more variables of the agent's environment to pass on,
	// besides InheritedEnv.
	EnvAllow []string
	// QueueSize bounds each of a handler's two queue parts: member, pool and
	// health events; user events and queries. Default 1000.
	QueueSize int
	// Timeout bounds each run unless the Spec sets its own. Default 30s,
	// at least MinTimeout.
	Timeout time.Duration
	// KillGrace is the wait between SIGTERM and SIGKILL. Default 5s.
	KillGrace time.Duration
	// OutputLimit bounds the captured stdout+stderr of a run (the tail is
	// kept). Default 64 KiB.
	OutputLimit int
	// QueryResponseLimit bounds a query response (stdout, the head is kept).
	// Default 1024 bytes, serf's QueryResponseSizeLimit default.
	QueryResponseLimit int
	// CoalescePeriod and QuiescentPeriod apply to handlers whose Spec sets
	// Coalesce. Defaults 3s and 1s, the stock serf agent's.
	CoalescePeriod  time.Duration
	QuiescentPeriod time.Duration
	// Respond sends a query response for queries given to Enqueue. Default
	// (*serf.Query).Respond.
	Respond func(q *serf.Query, resp []byte) error
	// Clock stamps events and run starts and times the coalesce periods
	// and the drop log. Default the real clock. (A run's own duration,
	// timeout and kill grace are measured on real time: they bound a
	// process.)
	Clock clockwork.Clock
	// OnRun, if set, is called after every run with the handler's spec, the
	// event type, the result ("ok", "failed" or "timed_out") and the run's
	// duration: the metrics hook. It must not block.
	OnRun func(spec, event, result string, d time.Duration)
}

// Run results passed to Config.OnRun.
const (
	ResultOK       = "ok"
	ResultFailed   = "failed"
	ResultTimedOut = "timed_out"
)

// WithDefaults returns c with every zero value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.OutputLimit == 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.QueryResponseLimit == 0 {
		c.QueryResponseLimit = DefaultQueryResponseLimit
	}
	if c.CoalescePeriod == 0 {
		c.CoalescePeriod = DefaultCoalescePeriod
	}
	if c.QuiescentPeriod == 0 {
		c.QuiescentPeriod = DefaultQuiescentPeriod
	}
	if c.Respond == nil {
		c.Respond = func(q *serf.Query, resp []byte) error { return q.Respond(resp) }
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	return c
}

// validate checks a Config with defaults applied.
func (c Config) validate() error {
	switch {
	case c.Self == nil:
		return errors.New("hooks: Self is required")
	case c.QueueSize < 1:
		return fmt.Errorf("hooks: queue size %d, want at least 1", c.QueueSize)
	case c.Timeout < MinTimeout:
		return fmt.Errorf("hooks: timeout %v is below the minimum %v", c.Timeout, MinTimeout)
	case c.KillGrace < 0:
		return fmt.Errorf("hooks: kill grace %v is negative", c.KillGrace)
	case c.OutputLimit < 1:
		return fmt.Errorf("hooks: output limit %d, want at least 1", c.OutputLimit)
	case c.QueryResponseLimit < 1:
		return fmt.Errorf("hooks: query response limit %d, want at least 1", c.QueryResponseLimit)
	case c.CoalescePeriod < 0 || c.QuiescentPeriod < 0:
		return fmt.Errorf("hooks: negative coalesce (%v) or quiescent (%v) period", c.CoalescePeriod, c.QuiescentPeriod)
	}
	return nil
}

// Runner runs event handlers, each from its own bounded, ordered queue.
// Create with New; Close stops it.
type Runner struct {
	cfg     Config
	log     *slog.Logger
	inherit []string
	tree    *hookTree // process-wide; see processTree

	ctx    context.Context // canceled by Close: kills running handlers
	cancel context.CancelFunc
	wg     sync.WaitGroup // handler workers, retired ones included

	mu       sync.RWMutex
	handlers []*handler
	closed   bool

	closeOnce sync.Once
}

// New starts a Runner with the given handlers.
func New(cfg Config, specs []Spec) (*Runner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := validateSpecs(specs); err != nil {
		return nil, err
	}
	r := &Runner{
		cfg:     cfg,
		log:     cfg.Logger,
		inherit: append(append([]string(nil), InheritedEnv...), cfg.EnvAllow...),
		// Makes the agent a child subreaper (process-wide, once) so that
		// no process a hook starts can leave the agent's process tree.
		tree: processTree(cfg.Logger),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for _, s := range specs {
		r.handlers = append(r.handlers, r.newHandler(s))
	}
	return r, nil
}

func validateSpecs(specs []Spec) error {
	for _, s := range specs {
		if err := s.validate(); err != nil {
			return err
		}
	}
	return nil
}

// HandleEvent is Enqueue; it makes a Runner a serf agent EventHandler.
func (r *Runner) HandleEvent(e serf.Event) { r.Enqueue(e) }

// Enqueue hands a Serf event (serf.MemberEvent, serf.UserEvent or
// *serf.Query) to every handler whose filter matches it. It never blocks
// on a handler: a full queue drops an event (see Config.QueueSize).
// Queries are answered through Config.Respond by the first handler to exit
// 0 with output.
func (r *Runner) Enqueue(e serf.Event) {
	it, err := newSerfItem(e)
	if err != nil {
		r.log.Warn("hook event ignored", "error", err)
		return
	}
	r.enqueue(it)
}

// EnqueueShoal hands a pool-change or health-change event to every handler
// that names it. It fails only when the event itself is invalid.
func (r *Runner) EnqueueShoal(e Event) error {
	it, err := newShoalItem(e, r.cfg.Clock.Now())
	if err != nil {
		return err
	}
	r.enqueue(it)
	return nil
}

func (r *Runner) enqueue(it *item) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.log.Debug("hook event after close ignored", "event", it.label())
		return
	}
	for _, h := range r.handlers {
		if h.spec.matches(it) {
			h.offer(it)
		}
	}
}

// Query runs the handlers matching q now, bypassing their queues (but
// never while the same handler runs another event), one after the other in
// spec order, and returns the stdout of the first that exits 0 with output,
// cut to Config.QueryResponseLimit. Later handlers do not run. It returns
// (nil, nil) when every handler exited 0 without output, and ErrNoHandler
// when none matches. ctx bounds the whole call (use the query's deadline);
// each run also has its handler's timeout. Query does not call
// Config.Respond: the caller responds. Do not also Enqueue the same query.
func (r *Runner) Query(ctx context.Context, q *serf.Query) ([]byte, error) {
	it, err := newSerfItem(q)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return nil, ErrClosed
	}
	var hs []*handler
	for _, h := range r.handlers {
		if h.spec.matches(it) {
			hs = append(hs, h)
		}
	}
	r.wg.Add(1) // Close waits for this call's runs too
	r.mu.RUnlock()
	defer r.wg.Done()
	if len(hs) == 0 {
		return nil, ErrNoHandler
	}
	var errs []error
	for _, h := range hs {
		res, err := h.runNow(ctx, it)
		if err != nil {
			return nil, err
		}
		if res.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h.raw(), res.err))
			continue
		}
		if res.stdoutTotal > 0 {
			return h.response(it, res), nil
		}
	}
	return nil, errors.Join(errs...)
}

// Reload replaces the handlers with specs. A handler whose Raw spec string
// is unchanged keeps its queue, counters and any running script (its
// options are updated); a removed handler finishes its current run and its
// queued events are dropped and counted; new handlers start empty.
func (r *Runner) Reload(specs []Spec) error {
	if err := validateSpecs(specs); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	old := map[string][]*handler{}
	for _, h := range r.handlers {
		old[h.spec.Raw] = append(old[h.spec.Raw], h)
	}
	next := make([]*handler, 0, len(specs))
	kept := 0
	for _, s := range specs {
		if hs := old[s.Raw]; len(hs) > 0 {
			old[s.Raw] = hs[1:]
			hs[0].update(s)
			next = append(next, hs[0])
			kept++
			continue
		}
		next = append(next, r.newHandler(s))
	}
	var removed []*handler
	for _, h := range r.handlers {
		for _, o := range old[h.spec.Raw] {
			if o == h {
				removed = append(removed, h)
			}
		}
	}
	r.handlers = next
	r.mu.Unlock()

	for _, h := range removed {
		h.stop(DropRemoved)
	}
	r.log.Info("hook handlers reloaded", "handlers", len(next), "kept", kept,
		"added", len(next)-kept, "removed", len(removed))
	return nil
}

// Stats returns every handler's counters, in spec order.
func (r *Runner) Stats() []HandlerStats {
	r.mu.RLock()
	hs := append([]*handler(nil), r.handlers...)
	r.mu.RUnlock()
	out := make([]HandlerStats, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.stats())
	}
	return out
}

// Specs returns the specs of the handlers, in order.
func (r *Runner) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.handlers))
	for _, h := range r.handlers {
		out = append(out, h.spec)
	}
	return out
}

// Close stops the Runner: queued events are dropped (counted as
// runner_closed), running handlers' process groups get SIGTERM and, after
// KillGrace, SIGKILL. It waits for all of that and is safe to call more
// than once.
func (r *Runner) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		hs := r.handlers
		r.mu.Unlock()
		for _, h := range hs {
			h.stop(DropClosed)
		}
		r.cancel()
	})
	r.wg.Wait()
	return nil
}

// warnMissing logs when a handler's program cannot be found now; it may be
// installed later, so this is not an error.
func (r *Runner) warnMissing(s Spec) {
	prog := s.Argv[0]
	if r.cfg.Dir != "" && strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(r.cfg.Dir, prog)
	}
	if _, err := exec.LookPath(prog); err != nil {
		r.log.Warn("hook command not found (yet)", "handler", s.Raw, "error", err)
	}
}

// lookupEnv reads the agent's environment.
var lookupEnv = os.LookupEnv
