package haproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/sink/driver"
	"github.com/shoaldb/shoal/internal/view"
)

// runTimeoutMult bounds one reconcile to this many command timeouts. A
// transport error also ends a reconcile at once.
const runTimeoutMult = 10

// runtimeAPI is the part of Client the sink uses.
type runtimeAPI interface {
	ServersState(ctx context.Context) ([]Server, error)
	Exec(ctx context.Context, cmd string) error
}

// Sink makes a local HAProxy follow the pool. It is a sink.Sink. Create it
// with New; its methods are safe for concurrent use.
type Sink struct {
	cfg     Config
	planner *Planner
	api     runtimeAPI
	log     *slog.Logger

	applyMu sync.Mutex // one reconcile at a time

	drv *driver.Driver
	rec *sink.Recorder

	commands      atomic.Uint64 // commands sent
	commandErrors atomic.Uint64 // commands that failed
}

// New validates cfg and returns a sink. It does no I/O; call Start to run
// the loop, or Apply to reconcile once.
func New(cfg Config, opts sink.Options) (*Sink, error) {
	planner, err := NewPlanner(cfg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	client, err := NewClient(cfg.Address, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	s := &Sink{
		cfg:     cfg,
		planner: planner,
		api:     client,
		log:     opts.Logger.With("component", "haproxy-sink"),
	}
	s.rec = sink.NewRecorder(sink.Info{
		Name: "haproxy", Target: cfg.Address,
		Failed: "haproxy reconcile failed", Recovered: "haproxy reconcile recovered",
		Frozen: "haproxy sink frozen: servers are put in, taken out only when their node reports itself out or a writer term moves", Unfrozen: "haproxy sink unfrozen",
		Notes: []sink.NoteKind{
			{Kind: noteHeld, Prefix: "withheld while frozen: ", Msg: "haproxy commands withheld while frozen"},
			{Kind: noteUnmapped, Prefix: "server maps to no node: ", Msg: "haproxy servers map to no pool node; left alone"},
			{Kind: noteMissing, Prefix: "node has no server: ", Msg: "pool nodes have no haproxy server"},
			{Kind: noteNaming, Prefix: "naming: ", Msg: "pool nodes cannot be mapped to haproxy servers"},
		},
	}, s.log, opts.Clock)
	s.drv = driver.New(cfg.Interval, opts.Clock, s.runLatest)
	return s, nil
}

// Apply reconciles HAProxy with u's pool once and returns what failed. It
// does not change the pool the loop uses (see Update). Reconciles never
// overlap: Apply waits for a running one.
func (s *Sink) Apply(ctx context.Context, u sink.Update) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	sent, failed, err := s.reconcile(ctx, u.Pool, u.Frozen)
	s.commands.Add(uint64(sent))
	s.commandErrors.Add(uint64(failed))
	s.rec.Record(u, err)
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
	s.rec.Report(frozen, stringsOf(plan.Held), stringsOf(plan.Unmapped), stringsOf(plan.Missing), plan.Naming)
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
func (s *Sink) Start(ctx context.Context) { s.drv.Start(ctx) }

// Update hands the sink a new pool and asks for a reconcile without waiting
// for it. Updates that arrive while a reconcile runs are coalesced into one
// more reconcile with the newest pool. u.Pool is copied.
func (s *Sink) Update(u sink.Update) { s.drv.Update(u) }

// Close stops the loop and waits for it. It is safe to call more than once.
func (s *Sink) Close() error { return s.drv.Close() }

// Status is what the sink has done so far. Its notes are those of the last
// reconcile that read HAProxy's state (Stats).
func (s *Sink) Status() view.SinkStatus { return s.rec.Status() }

// runLatest reconciles with the newest pool, turning a panic into a failed
// reconcile. Every tick reconciles: HAProxy may have been reloaded.
func (s *Sink) runLatest(ctx context.Context, u sink.Update, _ bool) {
	ctx, cancel := context.WithTimeout(ctx, runTimeoutMult*s.cfg.Timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("haproxy reconcile panicked", "panic", r, "stack", string(debug.Stack()))
			s.rec.Record(u, fmt.Errorf("reconcile panicked: %v", r))
		}
	}()
	_ = s.Apply(ctx, u)
}
