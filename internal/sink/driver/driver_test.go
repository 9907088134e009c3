package driver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// A tick before any pool runs nothing.
func TestDriverTickWithoutPool(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ran := make(chan struct{}, 1)
	d := New(time.Hour, clock, func(context.Context, sink.Update, bool) {
		ran <- struct{}{}
	})
	d.Start(context.Background())
	testkit.Tick(t, clock, time.Hour) // returns once the tick was handled
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Fatal("a tick without a pool ran the sink")
	default:
	}
}

func TestDriver(t *testing.T) {
	type call struct {
		cluster string
		tick    bool
	}
	calls := make(chan call, 16)
	block, running := make(chan struct{}), make(chan struct{})
	var once sync.Once
	clock := clockwork.NewFakeClock()
	d := New(time.Hour, clock, func(_ context.Context, u sink.Update, tick bool) {
		once.Do(func() { close(running); <-block }) // the first run blocks until released
		calls <- call{u.Pool.Clusters[0].Name, tick}
	})
	d.Start(context.Background())
	d.Start(context.Background()) // a second Start does nothing
	p := func(name string) *pool.Pool { return &pool.Pool{Clusters: []pool.Cluster{{Name: name}}} }
	d.Update(sink.Update{Pool: p("a")})
	<-running
	for _, n := range []string{"b", "c", "d"} {
		d.Update(sink.Update{Pool: p(n)}) // coalesce while the first run blocks
	}
	close(block)
	want := []call{{"a", false}, {"d", false}}
	for _, w := range want {
		select {
		case got := <-calls:
			if got != w {
				t.Fatalf("run %+v, want %+v", got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no run, want %+v", w)
		}
	}
	for range 2 { // the timer is armed again after each tick
		testkit.Tick(t, clock, time.Hour)
		if got := <-calls; got != (call{"d", true}) {
			t.Fatalf("tick run %+v", got)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	select {
	case <-d.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	select {
	case c := <-calls:
		t.Fatalf("extra run %+v", c)
	default:
	}
}
