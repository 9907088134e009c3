package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/agent/hookevent"
	"github.com/shoaldb/shoal/internal/agent/poolevent"
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
		a.rep.metrics.HookRuns.WithLabelValues(metrics.Label(spec), result).Inc()
		a.rep.metrics.HookDuration.WithLabelValues(metrics.Label(spec)).Observe(d.Seconds())
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
	for _, sp := range a.rep.hooks.Specs() {
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
func (a *Agent) hookPool(u routing.Update, d poolevent.Delta) {
	if !d.Any(u) {
		return
	}
	if err := a.rep.hooks.EnqueueShoal(hookevent.PoolChange(u)); err != nil {
		a.log.Debug("pool-change event not queued", "err", err)
	}
}

// hookHealth queues a health-change event.
func (a *Agent) hookHealth(e probe.Event) {
	if err := a.rep.hooks.EnqueueShoal(hookevent.HealthChange(e)); err != nil {
		a.log.Debug("health-change event not queued", "err", err)
	}
}

// HookStats returns each handler's queue and last run.
func (a *Agent) HookStats() []hooks.HandlerStats {
	return a.rep.hooks.Stats()
}

// ErrBadHookEvent names an event type `shoal hooks test` cannot synthesize.
var ErrBadHookEvent = hookevent.ErrBadEvent

// TestHook runs the handlers matching a synthetic event once, as `shoal
// hooks test` does (see hookevent.Synthesize). It waits until every
// handler that took the event has finished or ctx ends.
func (a *Agent) TestHook(ctx context.Context, req view.HookTest) (view.HookTestResult, error) {
	var resp view.HookTestResult
	before := a.rep.hooks.Stats()
	ev, err := hookevent.Synthesize(req, hookevent.Source{
		Self: a.Serf().LocalMember(), Pool: a.pool.router.Current, Probe: a.ProbeStatus,
	})
	if err != nil {
		return resp, err
	}
	switch {
	case ev.Query != nil:
		if resp.Response, err = a.rep.hooks.Query(ctx, ev.Query); err != nil {
			return view.HookTestResult{}, err
		}
	case ev.Shoal != nil:
		if err := a.rep.hooks.EnqueueShoal(*ev.Shoal); err != nil {
			return resp, err
		}
	default:
		a.rep.hooks.Enqueue(ev.Serf)
	}
	resp.Handlers, resp.TimedOut = hookevent.Wait(ctx, a.clock, before, a.rep.hooks.Stats)
	return resp, nil
}
