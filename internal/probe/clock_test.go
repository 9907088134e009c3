package probe

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// TestConfigClockRunsTheSchedule: Config.Clock times the status and runs
// the wait between checks (no server: every check is refused); WithClock
// overrides it.
func TestConfigClockRunsTheSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clockwork.NewFakeClockAt(t0)
	rec := newRecorder()
	p, err := New(Config{Host: "127.0.0.1", Port: closedPort(t), User: "u", Password: "p", Interval: time.Minute, Clock: clk},
		testLogger(t), rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if st := p.Status(); !st.Since.Equal(t0) {
		t.Fatalf("status since %s, want the clock's %s", st.Since, t0)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := rec.await(t, 0, 5*time.Second, "the first check", func(Event) bool { return true })
	if !first.Status.Last.Start.Equal(t0) {
		t.Errorf("first check started at %s, want %s", first.Status.Last.Start, t0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= 3; i++ {
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("the probe never waited on its clock for check %d: %v", i+1, err)
		}
		clk.Advance(time.Minute)
		e := rec.await(t, i, 5*time.Second, "the next check", func(Event) bool { return true })
		if want := t0.Add(time.Duration(i) * time.Minute); !e.Status.Last.Start.Equal(want) {
			t.Errorf("check %d started at %s, want %s", i+1, e.Status.Last.Start, want)
		}
	}

	other := clockwork.NewFakeClock()
	p2, err := New(Config{Host: "127.0.0.1", Port: 1, User: "u", Clock: clk}, nil, nil, WithClock(other))
	if err != nil {
		t.Fatal(err)
	}
	if p2.clock != other {
		t.Error("WithClock does not override Config.Clock")
	}
}

// TestConfigClockWakesTheIdleWatchMariaDB: with a live connection the
// probe waits between checks on the connection's watch, whose kernel
// deadline is real time; its clock's timer ends the wait too, so advancing
// a fake clock by the interval (a minute) runs the next check at once.
func TestConfigClockWakesTheIdleWatchMariaDB(t *testing.T) {
	mariadbtest.Require(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
	clk := clockwork.NewFakeClock()
	p, rec := startProbe(t, srv, func(c *Config) { c.Interval, c.Rise, c.Clock = time.Minute, 1, clk })
	rec.await(t, 0, 10*time.Second, "state passing", isState(StatePassing))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("the probe never waited on its clock: %v", err)
		}
		m, before := rec.mark(), p.Status().Checks
		start := time.Now()
		clk.Advance(time.Minute)
		rec.await(t, m, 5*time.Second, "the next check", func(Event) bool { return true })
		if after := p.Status().Checks; after != before+1 {
			t.Errorf("checks %d → %d after advancing the clock by the interval, want one more", before, after)
		}
		t.Logf("next check %s after the clock advanced", time.Since(start).Round(time.Millisecond))
	}
	if st := p.Status(); st.Connects != 1 {
		t.Errorf("connects %d, want 1: the checks ran over the watched connection", st.Connects)
	}
}
