package fencing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// fakeActuator counts the calls; nil funcs succeed.
type fakeActuator struct {
	mu               sync.Mutex
	fence            func() (fence.Result, error)
	unfence          func() error
	fences, unfences int
}

func (a *fakeActuator) Fence(context.Context) (fence.Result, error) {
	a.mu.Lock()
	a.fences++
	f := a.fence
	a.mu.Unlock()
	if f == nil {
		return fence.Result{ReadOnly: true}, nil
	}
	return f()
}

func (a *fakeActuator) Unfence(context.Context) error {
	a.mu.Lock()
	a.unfences++
	f := a.unfence
	a.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

func (a *fakeActuator) calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fences
}

// conflictPool is db2's pool while db1 holds term 3 and both are writable.
func conflictPool(t *testing.T) *pool.Pool {
	t.Helper()
	tv := pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: 3, Writer: "db1", Addr: "db1:3306"}}}
	p, _ := pool.ComputeFresh([]pool.Member{fenceMember("db1", true, tags.Passing), fenceMember("db2", true, tags.Passing)},
		pool.Policy{}, nil, pool.Freshness{}, tv)
	if _, _, ok := Conflict(p, "db2", false); !ok {
		t.Fatal("the pool shows no conflict")
	}
	return p
}

// The loop, one look per tick: a conflict lasting fence_after fences once;
// a failed fence is retried with backoff; a conflict that ends before
// fence_after fences nothing.
func TestFenceLoop(t *testing.T) {
	conflicted := conflictPool(t)
	for _, tc := range []struct {
		name      string
		conflict  func(elapsed time.Duration) bool
		failFirst int
		want      int
	}{
		{"lasting fence_after: once", func(time.Duration) bool { return true }, 0, 1},
		{"failures retried with backoff", func(time.Duration) bool { return true }, 2, 3}, // at 3 s, 4 s, 6 s
		{"ends first: none", func(e time.Duration) bool { return e < 2500*time.Millisecond }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clockwork.NewFakeClock()
			start := clk.Now()
			act := &fakeActuator{}
			act.fence = func() (fence.Result, error) {
				if act.fences <= tc.failFirst {
					return fence.Result{}, errors.New("access denied")
				}
				return fence.Result{ReadOnly: true}, nil
			}
			f := New(Config{Node: "db2", After: 3 * time.Second, Actuator: act, Clock: clk, Pool: func() (*pool.Pool, bool) {
				if tc.conflict(clk.Since(start)) {
					return conflicted, false
				}
				return nil, false
			}})
			var l loop
			for range 40 { // 10 s of ticks
				f.look(context.Background(), &l)
				clk.Advance(tick)
			}
			if got := act.calls(); got != tc.want {
				t.Fatalf("%d fences, want %d", got, tc.want)
			}
			if st := f.Status(); tc.want > 0 && (st == nil || st.Result != "ok" || st.Attempt != tc.want) {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// Run fences once the conflict lasted fence_after, on the clock's ticks,
// and returns when ctx ends.
func TestFenceRun(t *testing.T) {
	conflicted := conflictPool(t)
	clk := clockwork.NewFakeClock()
	start := clk.Now()
	act := &fakeActuator{}
	readOnly := make(chan struct{}, 1)
	f := New(Config{Node: "db2", After: time.Second, Actuator: act, Clock: clk,
		Pool:     func() (*pool.Pool, bool) { return conflicted, false },
		ReadOnly: func() { readOnly <- struct{}{} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for fenced := false; !fenced; {
		clk.Advance(tick)
		select {
		case <-readOnly:
			fenced = true
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("no fence")
		}
	}
	if act.calls() != 1 || clk.Since(start) < time.Second {
		t.Fatalf("fences %d after %s, want 1 after fence_after (1s)", act.calls(), clk.Since(start))
	}
	cancel()
	<-done
}

// A server that comes back writable from down (its mysqld restarted)
// while another holds the term is fenced at once, not after fence_after;
// one that was a reader in between waits fence_after as before.
func TestFenceAtOnceAfterDown(t *testing.T) {
	conflicted := conflictPool(t)
	tv := pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: 3, Writer: "db1", Addr: "db1:3306"}}}
	down, _ := pool.ComputeFresh([]pool.Member{fenceMember("db1", true, tags.Passing), fenceMember("db2", true, tags.Critical)},
		pool.Policy{}, nil, pool.Freshness{}, tv)
	reader, _ := pool.ComputeFresh([]pool.Member{fenceMember("db1", true, tags.Passing), fenceMember("db2", false, tags.Passing)},
		pool.Policy{}, nil, pool.Freshness{}, tv)
	if d, _ := selfState(down, "db2"); !d {
		t.Fatal("the down pool does not show db2 critical")
	}
	if _, in := selfState(reader, "db2"); !in {
		t.Fatal("the reader pool does not show db2 in")
	}
	for _, tc := range []struct {
		name   string
		before *pool.Pool
		want   int // fences in the first 2 s of conflict
	}{
		{"back from down: at once", down, 1},
		{"a reader before: after fence_after", reader, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clockwork.NewFakeClock()
			act := &fakeActuator{}
			cur := tc.before
			f := New(Config{Node: "db2", After: 3 * time.Second, Actuator: act, Clock: clk, Pool: func() (*pool.Pool, bool) { return cur, false }})
			var l loop
			for range 4 {
				f.look(context.Background(), &l)
				clk.Advance(tick)
			}
			cur = conflicted
			for range 8 {
				f.look(context.Background(), &l)
				clk.Advance(tick)
			}
			if got := act.calls(); got != tc.want {
				t.Fatalf("%d fences in 2 s of conflict, want %d", got, tc.want)
			}
		})
	}
}
