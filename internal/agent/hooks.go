package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/view"
)

// newHooks builds the hook runner from the configuration; self returns the
// local member.
func (a *Agent) newHooks(self func() serf.Member) (*hooks.Runner, error) {
	specs, err := a.cfg.HookSpecs()
	if err != nil {
		return nil, err
	}
	rc := a.cfg.Hooks.Config()
	rc.Self = self
	rc.Logger = a.logs.Logger.With("component", "hooks")
	rc.OnRun = func(spec, _, result string, d time.Duration) {
		a.metrics.HookRuns.WithLabelValues(metrics.Label(spec), result).Inc()
		a.metrics.HookDuration.WithLabelValues(metrics.Label(spec)).Observe(d.Seconds())
	}
	r, err := hooks.New(rc, specs)
	if err != nil {
		return nil, fmt.Errorf("event_handlers: %w", err)
	}
	return r, nil
}

// serfInfoHandlers is the event_handlers section of the Serf RPC stats
// (`serf info`), in serf's format: "EVENT:NAME" (NAME empty but for
// user:NAME and query:NAME filters) to the command. A spec with several
// filters is listed under each; a key that two specs share gets " #2",
// " #3"... (serf keeps only one). Without auth, arguments are hidden, as
// in GET /v1/hooks.
func (a *Agent) serfInfoHandlers(authed bool) map[string]string {
	out := map[string]string{}
	for _, sp := range a.hooks.Specs() {
		cmd := sp.Command
		if !authed {
			cmd = sp.RedactedCommand()
		}
		for _, f := range sp.Filters {
			key := f.Event + ":" + f.Name
			for n := 2; ; n++ {
				if _, taken := out[key]; !taken {
					break
				}
				key = fmt.Sprintf("%s:%s #%d", f.Event, f.Name, n)
			}
			out[key] = cmd
		}
	}
	return out
}

// hookPool queues a pool-change event when the update is one.
func (a *Agent) hookPool(u routing.Update, d poolDelta) {
	if !d.any(u) {
		return
	}
	if err := a.hooks.EnqueueShoal(hooks.Event{Type: hooks.PoolChange, Time: u.At, Data: poolChangeJSON(u)}); err != nil {
		a.log.Debug("pool-change event not queued", "err", err)
	}
}

// hookHealth queues a health-change event.
func (a *Agent) hookHealth(e probe.Event) {
	if err := a.hooks.EnqueueShoal(hooks.Event{Type: hooks.HealthChange, Time: e.Status.Since, Data: healthChangeJSON(e)}); err != nil {
		a.log.Debug("health-change event not queued", "err", err)
	}
}

// HookStats returns each handler's queue and last run.
func (a *Agent) HookStats() []hooks.HandlerStats {
	return a.hooks.Stats()
}

// ErrBadHookEvent names an event type `shoal hooks test` cannot synthesize.
var ErrBadHookEvent = errors.New("event must be one of member-join, member-leave, member-failed, member-update, member-reap, user, query, pool-change, health-change")

// TestHook runs the handlers matching a synthetic event once, as `shoal
// hooks test` does: member events carry this agent's own member, user
// events and queries the given name and payload, pool-change the current
// pool (no changes), health-change the current probe state. It waits until
// every handler that took the event has finished or ctx ends.
func (a *Agent) TestHook(ctx context.Context, req view.HookTest) (view.HookTestResult, error) {
	var resp view.HookTestResult
	self := a.Serf().LocalMember()
	before := map[string]hooks.HandlerStats{}
	for _, h := range a.hooks.Stats() {
		before[h.Spec] = h
	}
	switch req.Event {
	case hooks.MemberJoin, hooks.MemberLeave, hooks.MemberFailed, hooks.MemberUpdate, hooks.MemberReap:
		types := map[string]serf.EventType{
			hooks.MemberJoin: serf.EventMemberJoin, hooks.MemberLeave: serf.EventMemberLeave,
			hooks.MemberFailed: serf.EventMemberFailed, hooks.MemberUpdate: serf.EventMemberUpdate,
			hooks.MemberReap: serf.EventMemberReap,
		}
		a.hooks.Enqueue(serf.MemberEvent{Type: types[req.Event], Members: []serf.Member{self}})
	case hooks.User:
		if req.Name == "" {
			return resp, errors.New("a user event needs a name")
		}
		a.hooks.Enqueue(serf.UserEvent{Name: req.Name, Payload: req.Payload})
	case hooks.Query:
		if req.Name == "" {
			return resp, errors.New("a query needs a name")
		}
		out, err := a.hooks.Query(ctx, &serf.Query{Name: req.Name, Payload: req.Payload})
		if err != nil {
			return resp, err
		}
		resp.Response = out
	case hooks.PoolChange:
		u := a.router.Current()
		u.Changes = nil
		if err := a.hooks.EnqueueShoal(hooks.Event{Type: hooks.PoolChange, Data: poolChangeJSON(u)}); err != nil {
			return resp, err
		}
	case hooks.HealthChange:
		st, ok := a.ProbeStatus()
		if !ok {
			return resp, errors.New("health-change needs a db agent (this one has no MySQL probe)")
		}
		if err := a.hooks.EnqueueShoal(hooks.Event{Type: hooks.HealthChange,
			Data: healthChangeJSON(probe.Event{Status: st, PrevState: st.State})}); err != nil {
			return resp, err
		}
	default:
		return resp, ErrBadHookEvent
	}
	// Wait for the handlers that took the event (Queued grew) to finish it.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		var took []hooks.HandlerStats
		done := true
		for _, h := range a.hooks.Stats() {
			b := before[h.Spec]
			if h.Queued == b.Queued && h.Ran == b.Ran {
				continue
			}
			took = append(took, h)
			if h.Ran+h.Dropped == b.Ran+b.Dropped || h.Running {
				done = false
			}
		}
		if done {
			resp.Handlers = took
			return resp, nil
		}
		select {
		case <-ctx.Done():
			resp.Handlers, resp.TimedOut = took, true
			return resp, nil
		case <-t.C:
		}
	}
}
