package routing

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// waitFor bounds every wait on the router goroutine; it is generous because
// the test machine may be slow, and never an assertion on its own.
const waitFor = 10 * time.Second

var t0 = time.Date(2024, 1, 1, 3, 12, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// Member builders, like internal/pool's helpers_test.go.

type opt func(*pool.Member)

func member(name, role string, opts ...opt) pool.Member {
	m := pool.Member{Name: name, Addr: name + ":3306", Status: pool.StatusAlive, Tags: map[string]string{}}
	if role != "" {
		m.Tags[tags.KeyRole] = role
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// health publishes h, decoded as package member's admission does.
func health(h tags.Health) opt {
	return func(m *pool.Member) {
		m.Tags[tags.KeyHealth] = tags.Encode(h)
		m.Health, _ = tags.Published(m.Tags)
	}
}

func inCluster(c string) opt {
	return func(m *pool.Member) { m.Tags[tags.KeyCluster] = c }
}

// writer is a passing writable db member.
func writer(name string, opts ...opt) pool.Member {
	return member(name, tags.RoleDB, append([]opt{health(tags.Health{State: tags.Passing})}, opts...)...)
}

// replica is a passing read-only replica with the given lag in seconds.
func replica(name string, lag uint32, opts ...opt) pool.Member {
	h := tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: true, SQLRunning: true,
		LagKnown: true, LagSeconds: lag}
	return member(name, tags.RoleDB, append([]opt{health(h)}, opts...)...)
}

func app(name string, opts ...opt) pool.Member { return member(name, tags.RoleApp, opts...) }

// world is the fake member view and clock a router reads.
type world struct {
	mu      sync.Mutex
	members []pool.Member
	clock   *clockwork.FakeClock
	panics  bool
}

func newWorld() *world { return &world{clock: clockwork.NewFakeClockAt(t0)} }

// set moves the clock to now and sets the members.
func (w *world) set(now time.Time, ms ...pool.Member) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock.Advance(now.Sub(w.clock.Now()))
	w.members = ms
}

func (w *world) setPanic(p bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.panics = p
}

func (w *world) view() []pool.Member {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.panics {
		panic("members view exploded")
	}
	return slices.Clone(w.members)
}

// recorder is a listener that keeps every update.
type recorder struct {
	mu      sync.Mutex
	updates []Update
	ch      chan Update // if not nil, each update is also sent here
}

func (r *recorder) listen(u Update) {
	r.mu.Lock()
	r.updates = append(r.updates, u)
	r.mu.Unlock()
	if r.ch != nil {
		r.ch <- u
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.updates)
}

func (r *recorder) last(t *testing.T) Update {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.updates) == 0 {
		t.Fatal("no update delivered")
	}
	return r.updates[len(r.updates)-1]
}

// newTestRouter returns a router over w with w's clock, a recorder
// listening, and a Resync long enough never to fire during a test.
func newTestRouter(cfg Config, members func() []pool.Member, w *world, log *slog.Logger) (*Router, *recorder) {
	if cfg.Resync == 0 {
		cfg.Resync = time.Hour
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = w.clock
	r := New(cfg, members, log)
	rec := &recorder{}
	r.Listen(rec.listen)
	return r, rec
}

// stepAt sets the world at sec and runs one recompute on the test goroutine.
func stepAt(r *Router, w *world, sec float64, ms ...pool.Member) {
	w.set(at(sec), ms...)
	r.step()
}

// summary renders a pool compactly: "default{w[a] r[b c] o[d:lag]}".
func summary(p *pool.Pool) string {
	if p == nil {
		return "<nil>"
	}
	nodes := func(ns []pool.Node) string {
		var s []string
		for _, n := range ns {
			if n.Reason == "" {
				s = append(s, n.Name)
			} else {
				s = append(s, n.Name+":"+string(n.Reason))
			}
		}
		return strings.Join(s, " ")
	}
	var parts []string
	for _, c := range p.Clusters {
		parts = append(parts, fmt.Sprintf("%s{w[%s] r[%s] o[%s]}", c.Name, nodes(c.Writers), nodes(c.Readers), nodes(c.Out)))
	}
	return strings.Join(parts, "; ")
}

// placeOf says where node is in p: "reader:", "out:lag", ... or "absent".
func placeOf(p *pool.Pool, node string) string {
	for _, c := range p.Clusters {
		for _, l := range []struct {
			role  string
			nodes []pool.Node
		}{{"writer", c.Writers}, {"reader", c.Readers}, {"out", c.Out}} {
			for _, n := range l.nodes {
				if n.Name == node {
					return l.role + ":" + string(n.Reason)
				}
			}
		}
	}
	return "absent"
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out after %s waiting for %s", waitFor, what)
	}
	var zero T
	return zero
}

func send[T any](t *testing.T, ch chan<- T, v T, what string) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(waitFor):
		t.Fatalf("timed out after %s waiting to %s", waitFor, what)
	}
}

// gatedMembers returns a members func that announces each call on calls and
// then waits for the test to send on gate, so the test knows exactly where
// the router goroutine is.
func gatedMembers(ctx context.Context, w *world) (members func() []pool.Member, calls chan struct{}, gate chan struct{}) {
	calls, gate = make(chan struct{}), make(chan struct{})
	members = func() []pool.Member {
		select {
		case calls <- struct{}{}:
		case <-ctx.Done():
		}
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return w.view()
	}
	return members, calls, gate
}

// runRouter starts r.Run and stops it (waiting for it to return) at cleanup.
func runRouter(t *testing.T, ctx context.Context, cancel context.CancelFunc, r *Router) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Errorf("Run did not return within %s of the context ending", waitFor)
		}
	})
}

func TestRunComputesAtStartAndNotifiesOnce(t *testing.T) {
	w := newWorld()
	w.set(t0, writer("a"), replica("b", 0), app("app1"))
	ctx, cancel := context.WithCancel(context.Background())
	members, calls, gate := gatedMembers(ctx, w)
	r, rec := newTestRouter(Config{}, members, w, nil)
	rec.ch = make(chan Update, 10)
	runRouter(t, ctx, cancel, r)

	receive(t, calls, "the computation at start")
	send(t, gate, struct{}{}, "release the computation at start")
	u := receive(t, rec.ch, "the first update")
	if got, want := summary(u.Pool), "default{w[a] r[b] o[]}"; got != want {
		t.Fatalf("first pool = %s, want %s", got, want)
	}
	if !u.At.Equal(t0) {
		t.Errorf("update At = %v, want the injected clock's %v", u.At, t0)
	}
	wantChanges := []pool.Change{
		{Cluster: "default", Node: "a", Addr: "a:3306", From: pool.RoleNone, To: pool.RoleWriter},
		{Cluster: "default", Node: "b", Addr: "b:3306", From: pool.RoleNone, To: pool.RoleReader},
	}
	if !slices.Equal(u.Changes, wantChanges) {
		t.Errorf("first changes = %+v\nwant %+v", u.Changes, wantChanges)
	}
	if got := summary(r.Current().Pool); got != summary(u.Pool) {
		t.Errorf("Current = %s, want the notified %s", got, summary(u.Pool))
	}

	// A recompute over the same view must not notify. Once the router is
	// inside the next computation, the one before has fully finished.
	r.Trigger()
	receive(t, calls, "the triggered computation")
	send(t, gate, struct{}{}, "release the triggered computation")
	r.Trigger()
	receive(t, calls, "the computation after it")
	if n := rec.count(); n != 1 {
		t.Fatalf("listener called %d times after an unchanged recompute, want 1", n)
	}

	// A change is delivered.
	w.set(at(1), writer("a"), replica("b", 0), replica("c", 0), app("app1"))
	send(t, gate, struct{}{}, "release the computation")
	u = receive(t, rec.ch, "the update with c")
	if got, want := summary(u.Pool), "default{w[a] r[b c] o[]}"; got != want {
		t.Fatalf("pool = %s, want %s", got, want)
	}
	if n := rec.count(); n != 2 {
		t.Fatalf("listener called %d times, want 2", n)
	}
}

func TestTriggerNeverBlocksAndCoalesces(t *testing.T) {
	w := newWorld()
	w.set(t0, writer("a"))
	ctx, cancel := context.WithCancel(context.Background())
	members, calls, gate := gatedMembers(ctx, w)
	r, _ := newTestRouter(Config{}, members, w, nil)

	// Without Run, nobody drains the triggers: Trigger must still return.
	returned := make(chan struct{})
	go func() {
		for range 1000 {
			r.Trigger()
		}
		close(returned)
	}()
	receive(t, returned, "1000 Trigger calls with no router running")
	if n := len(r.trigger); n != 1 {
		t.Fatalf("%d triggers pending after 1000 calls, want them coalesced into 1", n)
	}

	runRouter(t, ctx, cancel, r)
	receive(t, calls, "the computation at start")
	send(t, gate, struct{}{}, "release the computation at start")
	receive(t, calls, "the computation of the pending trigger")
	// The router is now busy inside a computation: triggers pile up here.
	returned = make(chan struct{})
	go func() {
		for range 1000 {
			r.Trigger()
		}
		close(returned)
	}()
	receive(t, returned, "1000 Trigger calls while the router is busy")
	send(t, gate, struct{}{}, "release the busy computation")
	receive(t, calls, "the computation of the coalesced triggers")
	// One computation consumed all of them: none is left pending.
	if n := len(r.trigger); n != 0 {
		t.Fatalf("%d triggers still pending after the coalesced recompute started, want 0", n)
	}
	send(t, gate, struct{}{}, "release the last computation")
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	w := newWorld()
	w.set(t0, writer("a"))
	r, rec := newTestRouter(Config{}, w.view, w, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rec.ch = make(chan Update, 1)
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	receive(t, rec.ch, "the first update")
	cancel()
	receive(t, done, "Run to return after cancel")
}

func TestUnchangedPoolDoesNotNotify(t *testing.T) {
	w := newWorld()
	r, rec := newTestRouter(Config{}, w.view, w, nil)
	ms := []pool.Member{writer("a"), replica("b", 0), replica("c", 60)}
	stepAt(r, w, 0, ms...)
	if rec.count() != 1 {
		t.Fatalf("listener called %d times at start, want 1", rec.count())
	}
	first := r.Current()
	for i := 1; i <= 3; i++ {
		stepAt(r, w, float64(i), ms...)
	}
	// The members arrive in another order: the pool does not depend on it.
	stepAt(r, w, 4, ms[2], ms[0], ms[1])
	if rec.count() != 1 {
		t.Fatalf("listener called %d times for an unchanged pool, want 1", rec.count())
	}
	if cur := r.Current(); !cur.At.Equal(first.At) || cur.Pool != first.Pool {
		t.Errorf("Current changed without a new pool: At %v pool %p, want %v %p", cur.At, cur.Pool, first.At, first.Pool)
	}
}

// Each update handed to listeners has the next generation, from 1; a
// recompute that changes nothing, and so hands out no update, keeps it.
func TestGenerationCountsUpdates(t *testing.T) {
	w := newWorld()
	r, rec := newTestRouter(Config{}, w.view, w, nil)
	if g := r.Current().Generation; g != 0 {
		t.Fatalf("generation %d before the first update, want 0", g)
	}
	ms := []pool.Member{writer("a"), replica("b", 0)}
	stepAt(r, w, 0, ms...)
	stepAt(r, w, 1, ms...) // unchanged: no update
	stepAt(r, w, 2, writer("a"), replica("b", 60))
	stepAt(r, w, 3, writer("a"))
	var got []uint64
	for _, u := range rec.updates {
		got = append(got, u.Generation)
	}
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("generations %v, want [1 2 3]", got)
	}
	if g := r.Current().Generation; g != 3 {
		t.Errorf("current generation %d, want 3", g)
	}
}

func TestChangesAreReported(t *testing.T) {
	w := newWorld()
	r, rec := newTestRouter(Config{NoDamping: true}, w.view, w, nil)
	stepAt(r, w, 0, writer("a"), replica("b", 0), replica("c", 0), writer("x", inCluster("other")))
	stepAt(r, w, 1, writer("a"), replica("b", 60), replica("c", 0), writer("x", inCluster("other")))
	if rec.count() != 2 {
		t.Fatalf("listener called %d times, want 2", rec.count())
	}
	u := rec.last(t)
	want := []pool.Change{{Cluster: "default", Node: "b", Addr: "b:3306", From: pool.RoleReader, To: pool.RoleOut,
		Reason: pool.ReasonLag, Detail: "lag 60s > max 10s"}}
	if !slices.Equal(u.Changes, want) {
		t.Fatalf("changes = %+v\nwant %+v", u.Changes, want)
	}
	if !u.At.Equal(at(1)) {
		t.Errorf("At = %v, want %v", u.At, at(1))
	}

	// b gone from the member list, c's cluster writer gone too; sorted by
	// cluster then node.
	stepAt(r, w, 2, writer("a"), replica("c", 0))
	want = []pool.Change{
		{Cluster: "default", Node: "b", Addr: "b:3306", From: pool.RoleOut, To: pool.RoleNone},
		{Cluster: "other", Node: "x", Addr: "x:3306", From: pool.RoleWriter, To: pool.RoleNone},
	}
	if got := rec.last(t).Changes; !slices.Equal(got, want) {
		t.Fatalf("changes = %+v\nwant %+v", got, want)
	}

	// A detail alone (the lag figure of a node that stays out) changes no
	// role, so Diff is empty, but listeners still get the new details.
	stepAt(r, w, 3, writer("a"), replica("c", 0), replica("d", 60))
	n := rec.count()
	stepAt(r, w, 4, writer("a"), replica("c", 0), replica("d", 70))
	if rec.count() != n+1 {
		t.Fatalf("a detail change was not delivered (listener calls %d, want %d)", rec.count(), n+1)
	}
	u = rec.last(t)
	if len(u.Changes) != 0 {
		t.Errorf("detail-only update has changes %+v, want none", u.Changes)
	}
	if d := u.Pool.Cluster("default").Out[0].Detail; d != "lag 70s > max 10s" {
		t.Errorf("d's detail = %q, want the new lag", d)
	}
}

func TestListenersCalledInOrder(t *testing.T) {
	w := newWorld()
	r := New(Config{Resync: time.Hour, Clock: w.clock}, w.view, slog.New(slog.DiscardHandler))
	var calls []string
	for _, name := range []string{"first", "second", "third"} {
		r.Listen(func(u Update) { calls = append(calls, fmt.Sprintf("%s@%gs", name, u.At.Sub(t0).Seconds())) })
	}
	stepAt(r, w, 0, writer("a"))
	stepAt(r, w, 1, writer("a"), replica("b", 0))
	want := []string{"first@0s", "second@0s", "third@0s", "first@1s", "second@1s", "third@1s"}
	if !slices.Equal(calls, want) {
		t.Fatalf("listener calls = %v\nwant %v", calls, want)
	}
}

func TestCurrentReturnsTheLatest(t *testing.T) {
	w := newWorld()
	r, rec := newTestRouter(Config{NoDamping: true}, w.view, w, nil)
	if cur := r.Current(); cur.Pool == nil || len(cur.Pool.Clusters) != 0 {
		t.Fatalf("Current before any computation = %+v, want an empty pool", cur)
	}
	stepAt(r, w, 0, writer("a"))
	stepAt(r, w, 1, writer("a"), replica("b", 0), replica("c", 0))
	stepAt(r, w, 2, writer("a"), replica("b", 60), replica("c", 0))
	cur := r.Current()
	if got, want := summary(cur.Pool), "default{w[a] r[c] o[b:lag]}"; got != want {
		t.Fatalf("Current pool = %s, want %s", got, want)
	}
	if last := rec.last(t); cur.Pool != last.Pool || !cur.At.Equal(at(2)) {
		t.Errorf("Current = %v %s, want the last update %v %s", cur.At, summary(cur.Pool), last.At, summary(last.Pool))
	}
}

// fleet returns a view of members: called with names, those are failed.
func fleet(members ...pool.Member) func(failed ...string) []pool.Member {
	return func(failed ...string) []pool.Member {
		ms := slices.Clone(members)
		for i := range ms {
			if slices.Contains(failed, ms[i].Name) {
				ms[i].Status = pool.StatusFailed
			}
		}
		return ms
	}
}

// flap drives b through reader → out → reader → ... every 5 s and returns
// where b is after each step; c stays a reader so no floor is involved.
func flap(t *testing.T, cfg Config) []string {
	t.Helper()
	w := newWorld()
	r, _ := newTestRouter(cfg, w.view, w, nil)
	var got []string
	for i := range 7 {
		lag := uint32(0)
		if i%2 == 1 {
			lag = 60
		}
		stepAt(r, w, float64(5*i), writer("a"), replica("b", lag), replica("c", 0))
		cur := r.Current().Pool
		if p := placeOf(cur, "c"); p != "reader:" {
			t.Fatalf("step %d: c is %s, want reader", i, p)
		}
		got = append(got, placeOf(cur, "b"))
	}
	return got
}

func TestNoDampingSkipsTheDamper(t *testing.T) {
	got := flap(t, Config{NoDamping: true})
	want := []string{"reader:", "out:lag", "reader:", "out:lag", "reader:", "out:lag", "reader:"}
	if !slices.Equal(got, want) {
		t.Fatalf("b without damping = %v\nwant %v", got, want)
	}
}

func TestDampingHoldsAFlappingReader(t *testing.T) {
	// The third removal suppresses b: when healthy again it stays out.
	got := flap(t, Config{})
	want := []string{"reader:", "out:lag", "reader:", "out:lag", "reader:", "out:lag", "out:damped"}
	if !slices.Equal(got, want) {
		t.Fatalf("b with damping = %v\nwant %v", got, want)
	}
}

// TestMaintenanceIsNotAFlap is issue 14's report through the router: one
// removal because b's agent stopped (SIGSTOP), then maintenance enabled and
// disabled twice within 4 s. b is back as a reader each time maintenance
// ends; before, the third removal held it out as damped for 84 s.
func TestMaintenanceIsNotAFlap(t *testing.T) {
	w := newWorld()
	r, _ := newTestRouter(Config{}, w.view, w, nil)
	inMaint := func(m *pool.Member) { m.Tags[tags.KeyMaint] = "kernel upgrade" }
	failed := func(m *pool.Member) { m.Status = pool.StatusFailed }
	steps := []struct {
		sec  float64
		b    pool.Member
		want string
	}{
		{0, replica("b", 0), "reader:"},
		{1, replica("b", 0, failed), "out:agent-failed"},
		{10, replica("b", 0), "reader:"},
		{11, replica("b", 0, inMaint), "out:maintenance"},
		{12, replica("b", 0), "reader:"},
		{13, replica("b", 0, inMaint), "out:maintenance"},
		{14, replica("b", 0), "reader:"},
	}
	for _, s := range steps {
		stepAt(r, w, s.sec, writer("a"), s.b, replica("c", 0))
		if got := placeOf(r.Current().Pool, "b"); got != s.want {
			t.Fatalf("t=%gs: b is %s, want %s", s.sec, got, s.want)
		}
	}
}

func TestDampingHoldIsReportedAsAChange(t *testing.T) {
	w := newWorld()
	r, rec := newTestRouter(Config{}, w.view, w, nil)
	for i := range 7 {
		lag := uint32(0)
		if i%2 == 1 {
			lag = 60
		}
		stepAt(r, w, float64(5*i), writer("a"), replica("b", lag), replica("c", 0))
	}
	u := rec.last(t)
	if len(u.Changes) != 1 || u.Changes[0].Node != "b" || u.Changes[0].From != pool.RoleOut ||
		u.Changes[0].To != pool.RoleOut || u.Changes[0].Reason != pool.ReasonDamped {
		t.Fatalf("changes = %+v, want b out:lag → out:damped", u.Changes)
	}
	if !strings.HasPrefix(u.Changes[0].Detail, "flapping: penalty ") {
		t.Errorf("detail = %q, want the penalty", u.Changes[0].Detail)
	}
}

func TestPanicKeepsThePreviousPool(t *testing.T) {
	var logs bytes.Buffer
	w := newWorld()
	r, rec := newTestRouter(Config{}, w.view, w, slog.New(slog.NewTextHandler(&logs, nil)))
	stepAt(r, w, 0, writer("a"), replica("b", 0))
	before := r.Current()

	w.setPanic(true)
	stepAt(r, w, 1, writer("a")) // must not panic out of step
	if rec.count() != 1 {
		t.Fatalf("listener called %d times, want 1: a failed computation notifies nobody", rec.count())
	}
	if cur := r.Current(); cur.Pool != before.Pool || !cur.At.Equal(before.At) {
		t.Fatalf("Current after a panic = %s at %v, want the previous %s at %v",
			summary(cur.Pool), cur.At, summary(before.Pool), before.At)
	}
	if !strings.Contains(logs.String(), "pool computation panicked") || !strings.Contains(logs.String(), "members view exploded") {
		t.Errorf("log does not report the panic:\n%s", logs.String())
	}

	// The next computation goes on from the kept pool.
	w.setPanic(false)
	stepAt(r, w, 2, writer("a"))
	want := []pool.Change{{Cluster: "default", Node: "b", Addr: "b:3306", From: pool.RoleReader, To: pool.RoleNone}}
	if got := rec.last(t).Changes; !slices.Equal(got, want) {
		t.Fatalf("changes after the panic = %+v\nwant %+v", got, want)
	}
}

func TestRunSurvivesAPanic(t *testing.T) {
	w := newWorld()
	w.set(t0, writer("a"), replica("b", 0))
	panicked := make(chan struct{}, 1)
	members := func() []pool.Member {
		w.mu.Lock()
		p := w.panics
		w.mu.Unlock()
		if p {
			select {
			case panicked <- struct{}{}:
			default:
			}
			panic("members view exploded")
		}
		return w.view()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, rec := newTestRouter(Config{}, members, w, nil)
	rec.ch = make(chan Update, 10)
	runRouter(t, ctx, cancel, r)
	receive(t, rec.ch, "the first update")

	w.setPanic(true)
	r.Trigger()
	receive(t, panicked, "the panicking computation")

	w.setPanic(false)
	w.set(at(1), writer("a"), replica("b", 0), replica("c", 0))
	r.Trigger()
	u := receive(t, rec.ch, "an update after the panic")
	want := []pool.Change{{Cluster: "default", Node: "c", Addr: "c:3306", From: pool.RoleNone, To: pool.RoleReader}}
	if !slices.Equal(u.Changes, want) {
		t.Fatalf("changes after the panic = %+v\nwant %+v (relative to the pool kept)", u.Changes, want)
	}
}

func TestResyncRecomputesWithoutTrigger(t *testing.T) {
	// A held reader is released by time alone: the periodic recompute must
	// run without any trigger.
	w := newWorld()
	w.set(t0, writer("a"), replica("b", 0))
	calls := make(chan struct{}, 1)
	members := func() []pool.Member {
		select {
		case calls <- struct{}{}:
		default:
		}
		return w.view()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, _ := newTestRouter(Config{Resync: 10 * time.Millisecond}, members, w, nil)
	runRouter(t, ctx, cancel, r)
	receive(t, calls, "the computation at start")
	for _, what := range []string{"a periodic computation", "another periodic computation"} {
		wctx, wcancel := context.WithTimeout(ctx, waitFor)
		err := w.clock.BlockUntilContext(wctx, 1) // the Resync ticker
		wcancel()
		if err != nil {
			t.Fatalf("no Resync ticker on the clock: %v", err)
		}
		w.clock.Advance(r.cfg.Resync)
		receive(t, calls, what)
	}
}

func TestNewDefaults(t *testing.T) {
	r := New(Config{}, func() []pool.Member { return nil }, slog.New(slog.DiscardHandler))
	if r.cfg.Resync != time.Second {
		t.Errorf("default Resync = %s, want 1s", r.cfg.Resync)
	}
	if cur := r.Current(); cur.Pool == nil {
		t.Error("Current before Run has a nil pool; listeners and views would crash")
	}
}

func TestListenerPanicStarvesLaterListeners(t *testing.T) {
	w := newWorld()
	r := New(Config{Resync: time.Hour, Clock: w.clock}, w.view, slog.New(slog.DiscardHandler))
	broken := true
	r.Listen(func(Update) {
		if broken {
			panic("history listener bug")
		}
	})
	rec := &recorder{}
	r.Listen(rec.listen) // a sink
	stepAt(r, w, 0, writer("a"), replica("b", 0))
	broken = false
	stepAt(r, w, 1, writer("a"), replica("b", 0)) // the resync after
	if rec.count() == 0 {
		t.Fatalf("the sink never received the pool %s, though Current has it", summary(r.Current().Pool))
	}
}

// The router reads the writer terms at every recompute, routes writes to
// the holder only, and hands out a new update when only the term or
// AskTerm changes (samePool), which Diff does not report.
func TestTermsAreReadAtEveryStep(t *testing.T) {
	voter := func(m *pool.Member) { m.Tags[tags.KeyVoter] = "8300" }
	w := newWorld()
	var tv pool.TermView
	r, rec := newTestRouter(Config{Terms: func() pool.TermView { return tv }}, w.view, w, nil)
	ms := []pool.Member{writer("dbp", voter), writer("dbr", voter)}
	step := func(sec float64, wantSummary string, wantTerm uint64, wantAsk bool, wantUpdates int) {
		t.Helper()
		stepAt(r, w, sec, ms...)
		c := r.Current().Pool.Cluster("default")
		if got := summary(r.Current().Pool); got != wantSummary {
			t.Fatalf("at %vs: pool %s, want %s", sec, got, wantSummary)
		}
		if c.Term == nil || c.Term.Number != wantTerm || c.AskTerm != wantAsk {
			t.Fatalf("at %vs: term %+v ask %v, want term %d ask %v", sec, c.Term, c.AskTerm, wantTerm, wantAsk)
		}
		if rec.count() != wantUpdates {
			t.Fatalf("at %vs: %d updates, want %d", sec, rec.count(), wantUpdates)
		}
	}
	step(0, "default{w[] r[] o[dbp:no-term dbr:no-term]}", 0, true, 1)
	step(1, "default{w[] r[] o[dbp:no-term dbr:no-term]}", 0, true, 1)
	tv = pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: 3, Writer: "dbr", Addr: "dbr:3306", Why: "first"}}}
	step(2, "default{w[dbr] r[] o[dbp:conflict]}", 3, false, 2)
	if ch := rec.last(t).Changes; len(ch) != 2 {
		t.Fatalf("changes %+v, want dbp and dbr", ch)
	}
	step(3, "default{w[dbr] r[] o[dbp:conflict]}", 3, false, 2)
	ms = []pool.Member{replica("dbp", 0, voter), writer("dbr", voter)}
	step(4, "default{w[dbr] r[dbp] o[]}", 3, false, 3)
	// The same writer by a later term: no node or detail changes, the term does.
	tv = pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: 4, Writer: "dbr", Addr: "dbr:3306", Why: "again"}}}
	step(4.5, "default{w[dbr] r[dbp] o[]}", 4, false, 4)
	if ch := rec.last(t).Changes; len(ch) != 0 {
		t.Fatalf("changes %+v, want none", ch)
	}
	// Only AskTerm changes: a cluster without writable servers and no term,
	// known or verifiable.
	ms = []pool.Member{replica("dbp", 0, voter)}
	tv = pool.TermView{Unverifiable: "no consensus.term_key"}
	step(5, "default{w[] r[dbp] o[]}", 0, false, 5)
	tv = pool.TermView{}
	step(6, "default{w[] r[dbp] o[]}", 0, true, 6)
}

// gtid sets the member's GTID position to domain 0 at seq.
func gtid(seq uint64) opt {
	return func(m *pool.Member) {
		h := *m.Health
		h.Position = tags.Position{N: 1, Domains: [tags.MaxDomains]tags.Domain{{ID: 0, Seq: seq}}}
		health(h)(m)
	}
}

// TestRecheckTurnsAReplicaStaleOnTime: a replica whose position the writer
// passed is taken out when max_lag has passed since, by the router's clock,
// with no trigger, no gossip and no Resync (an hour): the recompute at the
// recheck time is a timer of the clock.
func TestRecheckTurnsAReplicaStaleOnTime(t *testing.T) {
	w := newWorld()
	w.set(t0, writer("a", gtid(100)), replica("b", 0, gtid(100)))
	policy := pool.Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: pool.ReadFallbackWriter}
	r, rec := newTestRouter(Config{Policy: policy, NoDamping: true}, w.view, w, nil)
	rec.ch = make(chan Update, 10)
	ctx, cancel := context.WithCancel(context.Background())
	runRouter(t, ctx, cancel, r)
	if got, want := summary(receive(t, rec.ch, "the first update").Pool), "default{w[a] r[b] o[]}"; got != want {
		t.Fatalf("first pool = %s, want %s", got, want)
	}

	// The writer moves on at t=1; the replica stays at 100.
	w.set(at(1), writer("a", gtid(101)), replica("b", 0, gtid(100)))
	r.Trigger()
	wctx, wcancel := context.WithTimeout(ctx, waitFor)
	defer wcancel()
	if err := w.clock.BlockUntilContext(wctx, 2); err != nil { // Resync's ticker and the recheck's timer
		t.Fatalf("no recheck timer on the clock: %v", err)
	}
	if n := rec.count(); n != 1 {
		t.Fatalf("%d updates before max_lag passed, want 1", n)
	}
	w.clock.Advance(5 * time.Second)
	select {
	case u := <-rec.ch:
		t.Fatalf("an update %s before max_lag passed", summary(u.Pool))
	default:
	}
	w.clock.Advance(time.Millisecond)
	u := receive(t, rec.ch, "the update at the recheck")
	if got, want := summary(u.Pool), "default{w[a] r[a:fallback] o[b:stale]}"; got != want {
		t.Errorf("pool at the recheck = %s, want %s", got, want)
	}
	if want := at(6.001); !u.At.Equal(want) {
		t.Errorf("update at %s, want the recheck time %s", u.At, want)
	}
}
