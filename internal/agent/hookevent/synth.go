package hookevent

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/view"
)

// ErrBadEvent names an event type `shoal hooks test` cannot synthesize.
var ErrBadEvent = errors.New("event must be one of member-join, member-leave, member-failed, member-update, member-reap, user, query, pool-change, health-change")

// Source is what a synthetic event is made of.
type Source struct {
	Self  serf.Member                 // this agent's own member
	Pool  func() routing.Update       // the router's current update
	Probe func() (probe.Status, bool) // the probe's status; false on an app agent
}

// Synthetic is the event of a `shoal hooks test` request: exactly one of
// Serf (to Enqueue), Query (to run with Query) and Shoal (to EnqueueShoal).
type Synthetic struct {
	Serf  serf.Event
	Query *serf.Query
	Shoal *hooks.Event
}

var memberTypes = map[string]serf.EventType{
	hooks.MemberJoin: serf.EventMemberJoin, hooks.MemberLeave: serf.EventMemberLeave,
	hooks.MemberFailed: serf.EventMemberFailed, hooks.MemberUpdate: serf.EventMemberUpdate,
	hooks.MemberReap: serf.EventMemberReap,
}

// Synthesize builds the event req asks for: member events carry this
// agent's own member, user events and queries the given name and payload,
// pool-change the current pool (no changes), health-change the current
// probe state. An unknown event type is ErrBadEvent.
func Synthesize(req view.HookTest, src Source) (Synthetic, error) {
	if typ, ok := memberTypes[req.Event]; ok {
		return Synthetic{Serf: serf.MemberEvent{Type: typ, Members: []serf.Member{src.Self}}}, nil
	}
	switch req.Event {
	case hooks.User:
		if req.Name == "" {
			return Synthetic{}, errors.New("a user event needs a name")
		}
		return Synthetic{Serf: serf.UserEvent{Name: req.Name, Payload: req.Payload}}, nil
	case hooks.Query:
		if req.Name == "" {
			return Synthetic{}, errors.New("a query needs a name")
		}
		return Synthetic{Query: &serf.Query{Name: req.Name, Payload: req.Payload}}, nil
	case hooks.PoolChange:
		u := src.Pool()
		u.Changes = nil
		return Synthetic{Shoal: &hooks.Event{Type: hooks.PoolChange, Data: poolChangeJSON(u)}}, nil
	case hooks.HealthChange:
		st, ok := src.Probe()
		if !ok {
			return Synthetic{}, errors.New("health-change needs a db agent (this one has no MySQL probe)")
		}
		return Synthetic{Shoal: &hooks.Event{Type: hooks.HealthChange,
			Data: healthChangeJSON(probe.Event{Status: st, PrevState: st.State})}}, nil
	}
	return Synthetic{}, ErrBadEvent
}

// waitPoll is how often Wait looks at the handlers' stats.
const waitPoll = 20 * time.Millisecond

// Wait waits until every handler that took an event since the stats
// before were read (Queued or Ran grew) has finished it, or ctx ends
// (timedOut). took are those handlers' stats.
func Wait(ctx context.Context, clock clockwork.Clock, before []hooks.HandlerStats, stats func() []hooks.HandlerStats) (took []hooks.HandlerStats, timedOut bool) {
	prev := map[string]hooks.HandlerStats{}
	for _, h := range before {
		prev[h.Spec] = h
	}
	t := clock.NewTicker(waitPoll)
	defer t.Stop()
	for {
		var done bool
		took, done = taken(prev, stats())
		if done {
			return took, false
		}
		select {
		case <-ctx.Done():
			return took, true
		case <-t.Chan():
		}
	}
}

// taken returns the handlers of now that took an event since before, and
// whether all of them have finished it.
func taken(before map[string]hooks.HandlerStats, now []hooks.HandlerStats) (took []hooks.HandlerStats, done bool) {
	done = true
	for _, h := range now {
		b := before[h.Spec]
		if h.Queued == b.Queued && h.Ran == b.Ran {
			continue
		}
		took = append(took, h)
		if h.Ran+h.Dropped == b.Ran+b.Dropped || h.Running {
			done = false
		}
	}
	return took, done
}
