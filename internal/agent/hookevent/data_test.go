package hookevent

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/testutil/pooltest"
	"github.com/shoaldb/shoal/internal/view"
)

// The pool-change hook's data.pool is exactly the pool schema.
func TestPoolChangeDataIsTheSchema(t *testing.T) {
	var d struct {
		Pool map[string]any `json:"pool"`
	}
	if err := json.Unmarshal(poolChangeJSON(routing.Update{Pool: pooltest.Fixture()}), &d); err != nil {
		t.Fatal(err)
	}
	pooltest.RequireSuperset(t, d.Pool["clusters"])
}

// TestSynthesize: each event type of `shoal hooks test` becomes the event
// the handlers would get; a missing name, a health-change on an app agent
// and an unknown type are errors.
func TestSynthesize(t *testing.T) {
	self := serf.Member{Name: "db1"}
	u := routing.Update{Pool: pooltest.Fixture(), Changes: []pool.Change{{Cluster: "main", Node: "db1"}}}
	src := Source{Self: self, Pool: func() routing.Update { return u },
		Probe: func() (probe.Status, bool) { return probe.Status{State: probe.StatePassing}, true }}
	for ev, typ := range memberTypes {
		s, err := Synthesize(view.HookTest{Event: ev}, src)
		me, ok := s.Serf.(serf.MemberEvent)
		if err != nil || !ok || me.Type != typ || len(me.Members) != 1 || me.Members[0].Name != "db1" {
			t.Errorf("%s: %+v, %v", ev, s, err)
		}
	}
	if s, err := Synthesize(view.HookTest{Event: hooks.User, Name: "deploy", Payload: []byte("v2")}, src); err != nil ||
		s.Serf.(serf.UserEvent).Name != "deploy" || string(s.Serf.(serf.UserEvent).Payload) != "v2" {
		t.Errorf("user: %+v, %v", s, err)
	}
	if s, err := Synthesize(view.HookTest{Event: hooks.Query, Name: "q"}, src); err != nil || s.Query == nil || s.Query.Name != "q" {
		t.Errorf("query: %+v, %v", s, err)
	}
	s, err := Synthesize(view.HookTest{Event: hooks.PoolChange}, src)
	var d struct{ Changes []any }
	if err != nil || s.Shoal == nil || s.Shoal.Type != hooks.PoolChange || json.Unmarshal(s.Shoal.Data, &d) != nil || len(d.Changes) != 0 {
		t.Errorf("pool-change: %+v, %v; want the current pool without changes", s, err)
	}
	if s, err := Synthesize(view.HookTest{Event: hooks.HealthChange}, src); err != nil || s.Shoal == nil || s.Shoal.Type != hooks.HealthChange {
		t.Errorf("health-change: %+v, %v", s, err)
	}
	app := src
	app.Probe = func() (probe.Status, bool) { return probe.Status{}, false }
	for _, tc := range []struct {
		req view.HookTest
		src Source
	}{{view.HookTest{Event: hooks.User}, src}, {view.HookTest{Event: hooks.Query}, src},
		{view.HookTest{Event: hooks.HealthChange}, app}, {view.HookTest{Event: "member-dance"}, src}} {
		if _, err := Synthesize(tc.req, tc.src); err == nil {
			t.Errorf("%+v: no error", tc.req)
		}
	}
	if _, err := Synthesize(view.HookTest{Event: "nope"}, src); !errors.Is(err, ErrBadEvent) {
		t.Errorf("unknown event: %v, want ErrBadEvent", err)
	}
}

// TestWaitForTakers: Wait reports the handlers that took the event once
// they finished it, and what it has when ctx ends first.
func TestWaitForTakers(t *testing.T) {
	before := []hooks.HandlerStats{{Spec: "a", Queued: 1, Ran: 1}, {Spec: "b"}}
	done := []hooks.HandlerStats{{Spec: "a", Queued: 2, Ran: 2}, {Spec: "b"}}
	took, timedOut := Wait(context.Background(), clockwork.NewFakeClock(), before, func() []hooks.HandlerStats { return done })
	if timedOut || len(took) != 1 || took[0].Spec != "a" {
		t.Fatalf("Wait = %+v, %v; want handler a, done", took, timedOut)
	}
	running := []hooks.HandlerStats{{Spec: "a", Queued: 2, Ran: 1, Running: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	took, timedOut = Wait(ctx, clockwork.NewFakeClock(), before, func() []hooks.HandlerStats { return running })
	if !timedOut || len(took) != 1 {
		t.Fatalf("Wait = %+v, %v; want handler a, timed out", took, timedOut)
	}
}
