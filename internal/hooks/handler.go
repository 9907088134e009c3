package hooks

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
)

// HandlerStats are one handler's counters, for `shoal hooks list` and
// metrics. Every event offered to the handler's queue is, at any moment,
// exactly one of: started (Started), waiting (QueueDepth) or dropped
// (Dropped): Queued == Started + QueueDepth + Dropped.
type HandlerStats struct {
	Spec string `json:"spec"`

	QueueDepth int `json:"queue_depth"` // both parts of the queue
	QueueMax   int `json:"queue_max"`   // the bound of each part (Config.QueueSize)
	QueueHigh  int `json:"queue_high"`  // most events ever queued at once in one part

	Queued  uint64 `json:"queued"`  // events offered to the queue
	Started uint64 `json:"started"` // events taken from the queue to run
	Ran     uint64 `json:"ran"`     // completed runs, Query's included
	Failed  uint64 `json:"failed"`  // runs that did not exit 0 (timeouts included)
	// TimedOut counts runs killed at their timeout.
	TimedOut uint64 `json:"timed_out"`
	Panics   uint64 `json:"panics"` // recovered panics, counted in Failed too
	// Coalesced counts member entries merged or left out by coalescing.
	Coalesced       uint64            `json:"coalesced"`
	Dropped         uint64            `json:"dropped"`
	DroppedByReason map[string]uint64 `json:"dropped_by_reason"`
	// DroppedByClass counts the drops by event class (Classes) and reason
	// (DropReasons): class → reason → events. Only non-zero counts appear.
	DroppedByClass map[string]map[string]uint64 `json:"dropped_by_class"`

	Running      bool          `json:"running"`
	LastStart    time.Time     `json:"last_start"`
	LastExitCode int           `json:"last_exit_code"` // -1: killed by a signal or not started
	LastDuration time.Duration `json:"last_duration"`
	LastError    string        `json:"last_error,omitempty"`
}

// handler is one spec with its queue and worker.
type handler struct {
	r   *Runner
	sem chan struct{} // held during a run: one run at a time per handler

	drops dropLog

	mu       sync.Mutex
	cond     *sync.Cond
	spec     Spec // writes hold r.mu too, so r.mu.RLock suffices to read it
	q        *queue
	co       *coalescer
	stopping bool
	st       HandlerStats
}

func (r *Runner) newHandler(s Spec) *handler {
	h := &handler{
		r:    r,
		sem:  make(chan struct{}, 1),
		spec: s,
		q:    newQueue(r.cfg.QueueSize),
		co:   newCoalescer(),
		st:   HandlerStats{DroppedByReason: map[string]uint64{}, DroppedByClass: map[string]map[string]uint64{}},
	}
	h.cond = sync.NewCond(&h.mu)
	h.drops = dropLog{interval: DropLogInterval, clock: r.cfg.Clock, emit: h.logDrops}
	r.warnMissing(s)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		h.work()
	}()
	return h
}

func (h *handler) raw() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spec.Raw
}

// offer queues it, or hands a member event to the coalescer.
func (h *handler) offer(it *item) {
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		return
	}
	if it.isMember() && h.spec.Coalesce {
		h.coalesceLocked(it.member)
		h.mu.Unlock()
		return
	}
	dropped := h.pushLocked(it)
	h.mu.Unlock()
	h.noteDrops(dropped)
}

// pushLocked queues it and wakes the worker; h.mu is held. It returns
// what the queue dropped to make room, already counted.
func (h *handler) pushLocked(it *item) []drop {
	h.st.Queued++
	res := h.q.push(it)
	for _, d := range res.drops {
		h.countDropLocked(d.it.class(), d.reason, 1)
	}
	h.st.Coalesced += uint64(res.coalesced)
	h.cond.Signal()
	return res.drops
}

// countDropLocked counts n dropped events; h.mu is held.
func (h *handler) countDropLocked(class, reason string, n uint64) {
	if n == 0 {
		return
	}
	h.st.Dropped += n
	h.st.DroppedByReason[reason] += n
	byReason := h.st.DroppedByClass[class]
	if byReason == nil {
		byReason = map[string]uint64{}
		h.st.DroppedByClass[class] = byReason
	}
	byReason[reason] += n
}

// noteDrops logs drops that pushLocked counted; h.mu is not held.
func (h *handler) noteDrops(dropped []drop) {
	for _, d := range dropped {
		h.drops.note(d.it.class(), d.reason, d.it.label(), 1)
	}
}

// coalesceLocked adds a member event to the coalescer and (re)arms its
// timers; h.mu is held.
func (h *handler) coalesceLocked(e *serf.MemberEvent) {
	c := h.co
	h.st.Coalesced += uint64(c.add(e))
	gen := c.gen
	flush := func() { h.flushCoalesced(gen) }
	if c.quantum == nil {
		c.quantum = h.r.cfg.Clock.AfterFunc(h.r.cfg.CoalescePeriod, flush)
	}
	if c.quiescent != nil {
		c.quiescent.Stop()
	}
	c.quiescent = h.r.cfg.Clock.AfterFunc(h.r.cfg.QuiescentPeriod, flush)
}

// flushCoalesced queues the coalesced events, unless gen is stale.
func (h *handler) flushCoalesced(gen uint64) {
	h.mu.Lock()
	if h.stopping || gen != h.co.gen {
		h.mu.Unlock()
		return
	}
	dropped := h.flushCoalescedLocked()
	h.mu.Unlock()
	h.noteDrops(dropped)
}

// flushCoalescedLocked moves the coalesced events into the queue; h.mu is
// held.
func (h *handler) flushCoalescedLocked() (dropped []drop) {
	if !h.co.pending() {
		h.co.stopTimers()
		return nil
	}
	events, repeats := h.co.flush()
	h.st.Coalesced += uint64(repeats)
	for _, e := range events {
		it, err := newMemberItem(e)
		if err != nil {
			continue // cannot happen: the types came from valid items
		}
		dropped = append(dropped, h.pushLocked(it)...)
	}
	return dropped
}

// update applies a reloaded spec with the same Raw string; r.mu is held.
func (h *handler) update(s Spec) {
	h.mu.Lock()
	wasCoalescing := h.spec.Coalesce
	h.spec = s
	var dropped []drop
	if wasCoalescing && !s.Coalesce {
		dropped = h.flushCoalescedLocked()
	}
	h.mu.Unlock()
	h.noteDrops(dropped)
}

// stop makes the worker exit after its current run and drops the queue
// (coalesced events included) for reason.
func (h *handler) stop(reason string) {
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		return
	}
	h.stopping = true
	n := uint64(0)
	if h.co.pending() {
		events, repeats := h.co.flush()
		h.st.Coalesced += uint64(repeats)
		h.st.Queued += uint64(len(events))
		n += uint64(len(events))
		h.countDropLocked(ClassMember, reason, uint64(len(events)))
	}
	h.co.stopTimers()
	for _, it := range h.q.drain() {
		n++
		h.countDropLocked(it.class(), reason, 1)
	}
	raw := h.spec.Raw
	h.cond.Broadcast()
	h.mu.Unlock()

	h.drops.flush()
	if n > 0 {
		h.r.log.Warn("hook events dropped", "handler", raw, "reason", reason, "dropped", n)
	}
}

// logDrops is the dropLog's output.
func (h *handler) logDrops(first bool, event string, counts map[dropKey]uint64, since time.Time) {
	h.mu.Lock()
	raw, limit := h.spec.Raw, h.q.limit
	h.mu.Unlock()
	if first {
		for k := range counts {
			h.r.log.Warn("hook queue full, dropping events", "handler", raw, "class", k.class, "reason", k.reason,
				"event", event, "queue_size", limit, "next_report_within", DropLogInterval)
		}
		return
	}
	var total uint64
	attrs := []any{"handler", raw}
	for _, class := range Classes() {
		for _, reason := range DropReasons() {
			if n := counts[dropKey{class, reason}]; n > 0 {
				total += n
				attrs = append(attrs, "dropped_"+class+"_"+reason, n)
			}
		}
	}
	attrs = append(attrs, "dropped", total, "since", since)
	h.r.log.Warn("hook events dropped", attrs...)
}

func (h *handler) stats() HandlerStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.st
	s.Spec = h.spec.Raw
	s.QueueDepth = h.q.len()
	s.QueueMax = h.q.limit
	s.QueueHigh = h.q.high
	s.DroppedByReason = maps.Clone(h.st.DroppedByReason)
	s.DroppedByClass = make(map[string]map[string]uint64, len(h.st.DroppedByClass))
	for class, byReason := range h.st.DroppedByClass {
		s.DroppedByClass[class] = maps.Clone(byReason)
	}
	return s
}

// work runs queued events until the handler is stopped.
func (h *handler) work() {
	for {
		h.mu.Lock()
		for h.q.len() == 0 && !h.stopping {
			h.cond.Wait()
		}
		if h.stopping {
			h.mu.Unlock()
			return
		}
		it := h.q.pop()
		h.st.Started++
		h.mu.Unlock()

		h.sem <- struct{}{}
		res, ok := h.run(h.r.ctx, it)
		if ok && it.query != nil {
			h.respond(it, res)
		}
		<-h.sem
	}
}

// runNow runs it outside the queue, for Query.
func (h *handler) runNow(ctx context.Context, it *item) (runResult, error) {
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return runResult{}, ctx.Err()
	case <-h.r.ctx.Done():
		return runResult{}, ErrClosed
	}
	defer func() { <-h.sem }()
	// select picks at random among ready cases: check again.
	if err := ctx.Err(); err != nil {
		return runResult{}, err
	}
	if h.r.ctx.Err() != nil {
		return runResult{}, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.r.ctx, cancel)()
	res, ok := h.run(ctx, it)
	if !ok {
		return res, fmt.Errorf("%s: %w", h.raw(), res.err)
	}
	return res, nil
}

// run executes one event and records the result. ok is false when the
// run panicked (res.err says why).
func (h *handler) run(ctx context.Context, it *item) (res runResult, ok bool) {
	h.mu.Lock()
	spec := h.spec
	h.st.Running = true
	h.st.LastStart = h.r.cfg.Clock.Now()
	h.mu.Unlock()

	defer func() {
		if p := recover(); p != nil {
			res = runResult{exitCode: -1, err: fmt.Errorf("panic: %v", p)}
			ok = false
			h.r.log.Error("hook handler panicked", "handler", spec.Raw, "event", it.label(),
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
		h.record(res, !ok)
		if on := h.r.cfg.OnRun; on != nil {
			result := ResultOK
			switch {
			case res.timedOut:
				result = ResultTimedOut
			case res.err != nil:
				result = ResultFailed
			}
			on(spec.Raw, it.typ, result, res.duration)
		}
	}()

	cfg := h.r.cfg
	self := cfg.Self()
	stdin, err := buildStdin(self, it)
	if err != nil {
		res = runResult{exitCode: -1, err: fmt.Errorf("stdin: %w", err)}
	} else {
		timeout := cfg.Timeout
		if spec.Timeout > 0 {
			timeout = spec.Timeout
		}
		p := execParams{
			argv:        spec.Argv,
			env:         buildEnv(lookupEnv, h.r.inherit, self, it),
			dir:         cfg.Dir,
			stdin:       stdin,
			timeout:     timeout,
			grace:       cfg.KillGrace,
			outputLimit: cfg.OutputLimit,
			tree:        h.r.tree,
		}
		if it.query != nil {
			p.stdoutLimit = cfg.QueryResponseLimit
		}
		res = execute(ctx, p)
	}
	h.logRun(spec.Raw, it, res)
	return res, true
}

// record updates the counters after a run.
func (h *handler) record(res runResult, panicked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Running = false
	h.st.Ran++
	if res.err != nil {
		h.st.Failed++
		h.st.LastError = res.err.Error()
	} else {
		h.st.LastError = ""
	}
	if res.timedOut {
		h.st.TimedOut++
	}
	if panicked {
		h.st.Panics++
	}
	h.st.LastExitCode = res.exitCode
	h.st.LastDuration = res.duration
}

func (h *handler) logRun(raw string, it *item, res runResult) {
	attrs := []slog.Attr{
		slog.String("handler", raw),
		slog.String("event", it.label()),
		slog.Int("exit_code", res.exitCode),
		slog.Duration("duration", res.duration),
	}
	if len(res.output) > 0 {
		attrs = append(attrs, slog.String("output", string(res.output)))
	}
	if res.outputTotal > int64(len(res.output)) {
		attrs = append(attrs, slog.Int64("output_bytes", res.outputTotal), slog.Bool("output_truncated", true))
	}
	if res.killedLeftovers {
		attrs = append(attrs, slog.Bool("killed_leftovers", true),
			slog.String("hint", "background processes kept the hook's output open after it exited; redirect their output (>/dev/null 2>&1) to let them run on"))
	}
	level, msg := slog.LevelInfo, "hook ran"
	switch {
	case res.killedLeftovers && res.err == nil:
		level = slog.LevelWarn
	case res.timedOut:
		level, msg = slog.LevelWarn, "hook timed out"
	case res.err != nil:
		level, msg = slog.LevelWarn, "hook failed"
	}
	if res.err != nil {
		attrs = append(attrs, slog.String("error", res.err.Error()))
	}
	h.r.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// response cuts a query handler's stdout to the limit, warning when it does.
func (h *handler) response(it *item, res runResult) []byte {
	if res.stdoutTotal > int64(len(res.stdout)) {
		h.r.log.Warn("hook query response truncated", "handler", h.raw(), "event", it.label(),
			"bytes", res.stdoutTotal, "limit", h.r.cfg.QueryResponseLimit)
	}
	return res.stdout
}

// respond answers a queued query, once for all its handlers.
func (h *handler) respond(it *item, res runResult) {
	if res.err != nil || res.stdoutTotal == 0 || !it.responded.CompareAndSwap(false, true) {
		return
	}
	resp := h.response(it, res)
	defer func() {
		if p := recover(); p != nil {
			h.r.log.Error("hook query respond panicked", "handler", h.raw(), "event", it.label(), "panic", fmt.Sprint(p))
		}
	}()
	if err := h.r.cfg.Respond(it.query, resp); err != nil {
		h.r.log.Warn("hook query response not sent", "handler", h.raw(), "event", it.label(), "error", err)
	}
}
