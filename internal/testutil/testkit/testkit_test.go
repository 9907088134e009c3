package testkit

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// fatal runs f, which must fail the test through tb, and returns its
// message.
func fatal(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				panic(p)
			}
		}()
		f(r)
		t.Fatal("did not fail")
	}()
	return r.msg
}

func TestTick(t *testing.T) {
	clock := clockwork.NewFakeClock()
	handled := make(chan int, 1)
	go func() { // a loop that re-arms its timer after each tick
		tm := clock.NewTimer(time.Second)
		for n := 1; n <= 2; n++ {
			<-tm.Chan()
			time.Sleep(10 * time.Millisecond) // a slow run
			handled <- n
			tm.Reset(time.Second)
		}
	}()
	for n := 1; n <= 2; n++ {
		Tick(t, clock, time.Second)
		select {
		case got := <-handled:
			if got != n {
				t.Fatalf("tick %d handled as %d", n, got)
			}
		default:
			t.Fatalf("Tick %d returned before the loop handled it", n)
		}
	}
	// The loop is done: its timer is armed, but nobody re-arms it.
	if msg := fatal(t, func(tb testing.TB) { tick(tb, clock, time.Second, 20*time.Millisecond) }); msg != "the loop did not arm its timer again within 20ms of the tick" {
		t.Errorf("failure message %q", msg)
	}
	if msg := fatal(t, func(tb testing.TB) { tick(tb, clock, time.Second, 20*time.Millisecond) }); msg != "no timer waits on the clock after 20ms" {
		t.Errorf("failure message %q", msg)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Second, "three polls", func() bool { n++; return n == 3 })
	msg := fatal(t, func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "never", func() bool { return false }) })
	if msg != "timed out after 20ms waiting for: never" {
		t.Fatalf("failure message %q", msg)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = b.Write([]byte("x")) })
	}
	wg.Wait()
	if b.String() != "xxxxxxxx" {
		t.Fatalf("got %q", b.String())
	}
}
