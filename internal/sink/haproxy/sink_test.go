package haproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// memAPI is an in-memory HAProxy: Exec applies set commands to its servers.
type memAPI struct {
	mu      sync.Mutex
	servers []Server
	reads   int
	execs   []string
	readErr error           // ServersState fails with it
	refuse  map[string]bool // commands answered with a ResponseError
	broken  map[string]bool // commands failing as a transport error
	panics  int             // ServersState panics this many times
	block   chan struct{}   // when set, ServersState waits for a receive
	entered chan struct{}   // when set, ServersState signals here first
}

func (m *memAPI) ServersState(ctx context.Context) ([]Server, error) {
	m.mu.Lock()
	entered, block := m.entered, m.block
	m.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if block != nil {
		<-block
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.panics > 0 {
		m.panics--
		panic("boom")
	}
	if m.readErr != nil {
		return nil, m.readErr
	}
	return append([]Server(nil), m.servers...), nil
}

func (m *memAPI) Exec(ctx context.Context, cmd string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.execs = append(m.execs, cmd)
	if m.refuse[cmd] {
		return &ResponseError{Command: cmd, Response: "No such server.\n"}
	}
	if m.broken[cmd] {
		return fmt.Errorf("haproxy %q: read: connection reset", cmd)
	}
	f := strings.Fields(cmd)
	if f[0] == "shutdown" {
		return nil
	}
	be, name, _ := strings.Cut(f[2], "/")
	for i := range m.servers {
		s := &m.servers[i]
		if s.Backend != be || s.Name != name {
			continue
		}
		switch f[3] {
		case "state":
			s.Admin &^= AdminForcedMaint | AdminForcedDrain
			switch State(f[4]) {
			case StateMaint:
				s.Admin |= AdminForcedMaint
			case StateDrain:
				s.Admin |= AdminForcedDrain
			}
		case "weight":
			s.Weight, _ = strconv.Atoi(f[4])
		}
		return nil
	}
	return &ResponseError{Command: cmd, Response: "No such server.\n"}
}

func (m *memAPI) states() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b []string
	for _, s := range m.servers {
		b = append(b, fmt.Sprintf("%s/%s=%s", s.Backend, s.Name, s.Forced()))
	}
	return strings.Join(b, " ")
}

func (m *memAPI) counts() (reads, execs int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads, len(m.execs)
}

type testSink struct {
	*Sink
	api   *memAPI
	clock *clockwork.FakeClock
	logs  *testkit.SyncBuffer
}

func newTestSink(t *testing.T, cfg Config, servers []Server) *testSink {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	clock := clockwork.NewFakeClockAt(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := New(cfg, sink.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:  clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	api := &memAPI{servers: servers}
	s.api = api
	t.Cleanup(func() { s.Close() })
	return &testSink{Sink: s, api: api, clock: clock, logs: logs}
}

// tick fires the loop's timer and returns once the loop has handled it.
func (s *testSink) tick(t *testing.T) {
	t.Helper()
	testkit.Tick(t, s.clock, s.cfg.Interval)
}

func allReady() []Server {
	return hx("db_rw/db1=ready", "db_rw/db2=ready", "db_rw/db3=ready",
		"db_ro/db1=ready", "db_ro/db2=ready", "db_ro/db3=ready")
}

const steadyStates = "db_rw/db1=ready db_rw/db2=maint db_rw/db3=maint db_ro/db1=maint db_ro/db2=ready db_ro/db3=ready"

func TestSinkApply(t *testing.T) {
	s := newTestSink(t, testConfig(), allReady())
	ctx := context.Background()
	p := cluster("db1", []string{"db2", "db3"}, nil)
	if err := s.Apply(ctx, sink.Update{Pool: p}); err != nil {
		t.Fatal(err)
	}
	if got := s.api.states(); got != steadyStates {
		t.Errorf("states %s", got)
	}
	if reads, execs := s.api.counts(); reads != 1 || execs != 6 {
		t.Errorf("first apply: %d reads, %d commands; want 1, 6", reads, execs)
	}
	if err := s.Apply(ctx, sink.Update{Pool: p}); err != nil {
		t.Fatal(err)
	}
	if reads, execs := s.api.counts(); reads != 2 || execs != 6 {
		t.Errorf("steady apply: %d reads, %d commands; want 2, 6", reads, execs)
	}
	st := s.Stats()
	if st.Reconciles != 2 || st.Failures != 0 || st.Commands != 6 || st.CommandErrors != 0 ||
		st.LastSuccess.IsZero() || st.LastError != "" {
		t.Errorf("status %+v", st)
	}
	if !strings.Contains(s.logs.String(), `msg="haproxy command sent" component=haproxy-sink backend=db_rw server=db2 node=db2 command="set server db_rw/db2 state maint" from=ready`) {
		t.Errorf("no command log in\n%s", s.logs)
	}
}

func TestSinkApplyErrors(t *testing.T) {
	ctx := context.Background()
	p := cluster("db1", []string{"db2", "db3"}, nil)

	t.Run("read", func(t *testing.T) {
		s := newTestSink(t, testConfig(), allReady())
		s.api.readErr = errors.New("dial unix /x: connect: no such file or directory")
		for range 3 {
			if err := s.Apply(ctx, sink.Update{Pool: p}); err == nil || !strings.HasPrefix(err.Error(), "read servers state: dial unix") {
				t.Fatalf("err = %v", err)
			}
		}
		st := s.Stats()
		if st.Failures != 3 || st.LastErrorAt.IsZero() || !strings.HasPrefix(st.LastError, "read servers state") {
			t.Errorf("status %+v", st)
		}
		// Logged at error level once, then at debug.
		if n := strings.Count(s.logs.String(), "level=ERROR"); n != 1 {
			t.Errorf("%d error logs:\n%s", n, s.logs)
		}
		s.api.readErr = nil
		if err := s.Apply(ctx, sink.Update{Pool: p}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.logs.String(), "haproxy reconcile recovered") {
			t.Errorf("no recovery log:\n%s", s.logs)
		}
	})

	t.Run("refused command skips the rest of its server only", func(t *testing.T) {
		s := newTestSink(t, testConfig(), allReady())
		s.api.refuse = map[string]bool{"set server db_rw/db2 state maint": true}
		err := s.Apply(ctx, sink.Update{Pool: p})
		if err == nil || err.Error() != `haproxy refused "set server db_rw/db2 state maint": No such server.` {
			t.Fatalf("err = %v", err)
		}
		want := "db_rw/db1=ready db_rw/db2=ready db_rw/db3=maint db_ro/db1=maint db_ro/db2=ready db_ro/db3=ready"
		if got := s.api.states(); got != want {
			t.Errorf("states %s", got)
		}
		if st := s.Stats(); st.Commands != 5 || st.CommandErrors != 1 || st.Failures != 1 {
			t.Errorf("status %+v", st)
		}
	})

	t.Run("refused weight does not keep a server out", func(t *testing.T) {
		s := newTestSink(t, testConfig(func(c *Config) { c.Weight = 7 }), hx("db_rw/db1=maint", "db_ro/db1=ready"))
		s.api.refuse = map[string]bool{"set server db_rw/db1 weight 7": true}
		if err := s.Apply(ctx, sink.Update{Pool: cluster("db1", nil, nil)}); err == nil {
			t.Fatal("no error")
		}
		if got, want := s.api.states(), "db_rw/db1=ready db_ro/db1=maint"; got != want {
			t.Errorf("states %s, want %s", got, want)
		}
	})

	t.Run("transport error ends the reconcile", func(t *testing.T) {
		s := newTestSink(t, testConfig(), allReady())
		s.api.broken = map[string]bool{"set server db_rw/db2 state maint": true}
		err := s.Apply(ctx, sink.Update{Pool: p})
		if err == nil || !strings.Contains(err.Error(), "connection reset") || !strings.Contains(err.Error(), "5 more commands not sent") {
			t.Fatalf("err = %v", err)
		}
		if _, execs := s.api.counts(); execs != 1 {
			t.Errorf("%d commands sent, want 1", execs)
		}
	})

	t.Run("missing backend", func(t *testing.T) {
		s := newTestSink(t, testConfig(), hx("db_rw/db1=ready"))
		err := s.Apply(ctx, sink.Update{Pool: p})
		if err == nil || err.Error() != "backend db_ro: not in haproxy or has no servers" {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSinkReportsOncePerChange(t *testing.T) {
	servers := append(allReady(), hx("db_ro/db9=ready")...)
	s := newTestSink(t, testConfig(), servers)
	ctx := context.Background()
	p := cluster("db1", []string{"db2", "db3"}, nil)
	for range 3 {
		if err := s.Apply(ctx, sink.Update{Pool: p}); err != nil {
			t.Fatal(err)
		}
	}
	logs := s.logs.String()
	if n := strings.Count(logs, "kind=unmapped"); n != 1 {
		t.Errorf("unmapped reported %d times:\n%s", n, logs)
	}
	if st := s.Stats(); len(st.Unmapped) != 1 || st.Unmapped[0] != "db_ro/db9" {
		t.Errorf("status unmapped %q", st.Unmapped)
	}

	// Frozen with db2 out: held, reported once; db4 missing, reported once.
	p = cluster("db1", []string{"db3", "db4"}, []string{"db2"})
	for range 2 {
		if err := s.Apply(ctx, sink.Update{Pool: p, Frozen: true}); err != nil {
			t.Fatal(err)
		}
	}
	logs = s.logs.String()
	for _, want := range []string{
		`msg="haproxy sink frozen: servers are put in, taken out only when their node reports itself out or a writer term moves"`,
		`msg="haproxy commands withheld while frozen" component=haproxy-sink kind=held count=2 items="[set server db_ro/db2 state maint shutdown sessions server db_ro/db2]"`,
		`kind=missing count=2 items="[db_rw: c1/db4 db_ro: c1/db4]"`,
	} {
		if strings.Count(logs, want) != 1 {
			t.Errorf("want once: %s\nin\n%s", want, logs)
		}
	}
	if got := s.api.states(); got != steadyStates+" db_ro/db9=ready" {
		t.Errorf("frozen changed states: %s", got)
	}
	if st := s.Stats(); !st.Frozen || len(st.Held) != 2 {
		t.Errorf("status %+v", st)
	}

	if err := s.Apply(ctx, sink.Update{Pool: p}); err != nil {
		t.Fatal(err)
	}
	logs = s.logs.String()
	if !strings.Contains(logs, `msg="haproxy report cleared" component=haproxy-sink kind=held`) ||
		!strings.Contains(logs, "haproxy sink unfrozen") {
		t.Errorf("no clear logs:\n%s", logs)
	}
}

func TestSinkLoop(t *testing.T) {
	s := newTestSink(t, testConfig(func(c *Config) { c.Interval = time.Second }), allReady())
	s.Start(context.Background())

	// A tick before any Update does nothing.
	s.tick(t)
	if reads, _ := s.api.counts(); reads != 0 {
		t.Fatalf("tick without a pool read haproxy %d times", reads)
	}

	s.Update(sink.Update{Pool: cluster("db1", []string{"db2", "db3"}, nil)})
	testkit.WaitFor(t, 5*time.Second, "first reconcile", func() bool { return s.Stats().Reconciles == 1 })
	if got := s.api.states(); got != steadyStates {
		t.Errorf("states %s", got)
	}

	// HAProxy restarts: runtime state lost. The next tick restores it.
	s.api.mu.Lock()
	s.api.servers = allReady()
	s.api.mu.Unlock()
	n := s.Stats().Reconciles
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "periodic reconcile", func() bool { return s.Stats().Reconciles > n })
	if got := s.api.states(); got != steadyStates {
		t.Errorf("after tick: states %s", got)
	}
}

func TestSinkUpdateCoalesces(t *testing.T) {
	s := newTestSink(t, testConfig(), allReady())
	block, entered := make(chan struct{}), make(chan struct{})
	s.api.block, s.api.entered = block, entered
	s.Start(context.Background())

	s.Update(sink.Update{Pool: cluster("db1", []string{"db2", "db3"}, nil)})
	<-entered // the first reconcile is reading
	// Updates during the reconcile: only the last counts, and it runs once.
	s.Update(sink.Update{Pool: cluster("db2", []string{"db1", "db3"}, nil)})
	s.Update(sink.Update{Pool: cluster("db3", []string{"db1", "db2"}, nil)})
	returned := make(chan struct{})
	go func() { // Update never blocks, even with a reconcile pending
		s.Update(sink.Update{Pool: cluster("db3", []string{"db1", "db2"}, nil)})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Update blocked")
	}
	block <- struct{}{}
	<-entered // the coalesced reconcile
	block <- struct{}{}
	testkit.WaitFor(t, 5*time.Second, "two reconciles", func() bool { return s.Stats().Reconciles == 2 })
	select {
	case <-entered:
		t.Fatal("a third reconcile ran")
	case <-time.After(50 * time.Millisecond):
	}
	want := "db_rw/db1=maint db_rw/db2=maint db_rw/db3=ready db_ro/db1=ready db_ro/db2=ready db_ro/db3=maint"
	if got := s.api.states(); got != want {
		t.Errorf("states %s, want %s", got, want)
	}
}

func TestSinkUpdateCopiesPool(t *testing.T) {
	s := newTestSink(t, testConfig(), allReady())
	p := cluster("db1", []string{"db2", "db3"}, nil)
	s.Update(sink.Update{Pool: p})
	p.Clusters[0].Writers[0].Name = "db3" // the caller reuses its pool
	s.Start(context.Background())
	testkit.WaitFor(t, 5*time.Second, "reconcile", func() bool { return s.Stats().Reconciles == 1 })
	if got := s.api.states(); got != steadyStates {
		t.Errorf("states %s", got)
	}
}

func TestSinkRecoversPanic(t *testing.T) {
	s := newTestSink(t, testConfig(), allReady())
	s.api.panics = 1
	s.Start(context.Background())
	s.Update(sink.Update{Pool: cluster("db1", []string{"db2", "db3"}, nil)})
	testkit.WaitFor(t, 5*time.Second, "failed reconcile", func() bool { return s.Stats().Failures == 1 })
	if st := s.Stats(); st.LastError != "reconcile panicked: boom" {
		t.Errorf("last error %q", st.LastError)
	}
	s.tick(t)
	testkit.WaitFor(t, 5*time.Second, "next reconcile", func() bool { return s.Stats().Reconciles == 2 })
	if got := s.api.states(); got != steadyStates {
		t.Errorf("states %s", got)
	}
	if !strings.Contains(s.logs.String(), "haproxy reconcile panicked") {
		t.Errorf("no panic log:\n%s", s.logs)
	}
}

func TestSinkClose(t *testing.T) {
	t.Run("never started", func(t *testing.T) {
		s := newTestSink(t, testConfig(), nil)
		s.Close()
		s.Close()
		s.Start(context.Background()) // after Close: no loop
		s.Update(sink.Update{Pool: cluster("db1", nil, nil)})
		time.Sleep(20 * time.Millisecond)
		if reads, _ := s.api.counts(); reads != 0 {
			t.Errorf("closed sink read haproxy")
		}
	})
	t.Run("twice", func(t *testing.T) {
		s := newTestSink(t, testConfig(), allReady())
		s.Start(context.Background())
		s.Start(context.Background())
		done := make(chan struct{})
		go func() { s.Close(); s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close hung")
		}
	})
	t.Run("context ends the loop", func(t *testing.T) {
		s := newTestSink(t, testConfig(), allReady())
		ctx, cancel := context.WithCancel(context.Background())
		s.Start(ctx)
		cancel()
		select {
		case <-s.drv.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("loop did not end with its context")
		}
		s.Close()
	})
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{}, sink.Options{})
	if err == nil || !strings.Contains(err.Error(), `address "": required`) {
		t.Errorf("New with empty config: %v", err)
	}
	_, err = New(testConfig(func(c *Config) { c.Address = "unix:/nonexistent/admin.sock" }), sink.Options{})
	if err != nil {
		t.Errorf("New must not touch the socket: %v", err)
	}
}

// The applied generation advances with each successful unfrozen reconcile,
// and neither while HAProxy is unreachable nor while frozen (package sink).
func TestAppliedGeneration(t *testing.T) {
	s := newTestSink(t, testConfig(), allReady())
	ctx := context.Background()
	p := cluster("db1", []string{"db2", "db3"}, nil)
	if err := s.Apply(ctx, sink.Update{Pool: p, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.AppliedGeneration != 1 {
		t.Fatalf("status %+v", st)
	}
	s.api.readErr = errors.New("dial unix /x: connect: no such file or directory")
	if err := s.Apply(ctx, sink.Update{Pool: p, Generation: 2}); err == nil {
		t.Fatal("no error from an unreachable haproxy")
	}
	if st := s.Stats(); st.AppliedGeneration != 1 || st.State != "failing" {
		t.Fatalf("unreachable: status %+v", st)
	}
	s.api.readErr = nil
	p = cluster("db1", []string{"db3"}, []string{"db2"}) // db2 out: withheld while frozen
	if err := s.Apply(ctx, sink.Update{Pool: p, Frozen: true, Generation: 3}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.AppliedGeneration != 1 || st.State != "ok" || len(st.Held) != 2 {
		t.Fatalf("frozen: status %+v", st)
	}
	if err := s.Apply(ctx, sink.Update{Pool: p, Generation: 4}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.AppliedGeneration != 4 || st.Frozen || len(st.Held) != 0 {
		t.Fatalf("unfrozen: status %+v", st)
	}
}
