package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	p := Policy{Initial: 250 * time.Millisecond, Max: 2 * time.Second}
	want := []time.Duration{250, 500, 1000, 2000, 2000, 2000}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := p.Delay(1000); got != 2*time.Second {
		t.Errorf("Delay(1000) = %v, want the max", got)
	}
	if got := (Policy{Initial: time.Second}).Delay(5); got != time.Second {
		t.Errorf("no Max: Delay(5) = %v, want Initial", got)
	}
	if got := (Policy{}).Delay(3); got != 0 {
		t.Errorf("zero policy: Delay = %v, want 0", got)
	}
}

func TestJitterStaysWithinHalfAndWhole(t *testing.T) {
	b := New(Policy{Initial: time.Second, Max: 8 * time.Second, Jitter: true}, nil)
	seen := map[time.Duration]bool{}
	for range 200 {
		b.Reset()
		d := b.Next()
		if d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jittered first wait %v outside [500ms, 1s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("200 jittered waits took only %d values: no jitter?", len(seen))
	}
	b.Reset()
	for range 10 {
		b.Next()
	}
	if d := b.Next(); d < 4*time.Second || d > 8*time.Second {
		t.Errorf("jittered wait at the max %v outside [4s, 8s]", d)
	}
}

func TestNoJitterIsExact(t *testing.T) {
	b := New(Policy{Initial: time.Second, Max: 4 * time.Second}, nil)
	for i, w := range []time.Duration{1, 2, 4, 4} {
		if d := b.Next(); d != w*time.Second {
			t.Errorf("wait %d = %v, want %v", i+1, d, w*time.Second)
		}
	}
	if b.Retries() != 4 {
		t.Errorf("Retries = %d, want 4", b.Retries())
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Errorf("after Reset: %v, want the first wait", d)
	}
}

func TestWaitUsesTheInjectedClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	b := New(Policy{Initial: time.Minute}, clock)
	done := make(chan bool)
	go func() {
		_, ok := b.Wait(context.Background())
		done <- ok
	}()
	if err := clock.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("Wait returned before the clock moved")
	default:
	}
	clock.Advance(time.Minute)
	if ok := <-done; !ok {
		t.Error("Wait = false after the wait passed")
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	b := New(Policy{Initial: time.Hour}, clockwork.NewFakeClock())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := b.Wait(ctx); ok {
		t.Error("Wait = true with an ended context")
	}
}
