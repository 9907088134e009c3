package sink_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/internal/view"
)

// Both sinks are driven through the contract alone.
var (
	_ sink.Sink = (*file.Sink)(nil)
	_ sink.Sink = (*haproxy.Sink)(nil)
)

func testPool(writer string) *pool.Pool {
	return &pool.Pool{Clusters: []pool.Cluster{{Name: "c1", Writers: []pool.Node{{Name: writer, Addr: writer + ":3306"}}}}}
}

func start(t *testing.T, s sink.Sink) {
	t.Helper()
	s.Start(context.Background())
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
}

// The file sink through the contract: each successful apply reports its
// generation; a frozen one does not, though it succeeds.
func TestFileSinkAppliedGeneration(t *testing.T) {
	clock := clockwork.NewFakeClock()
	dir := t.TempDir()
	path := filepath.Join(dir, "pool.json")
	fs, err := file.New(file.Config{Path: path, ListsDir: dir}, "agent1", sink.Options{Logger: slog.New(slog.DiscardHandler), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var s sink.Sink = fs
	start(t, s)
	if st := s.Status(); st.Name != "file" || st.Target != path || st.State != view.SinkPending || st.AppliedGeneration != 0 {
		t.Fatalf("new sink: %+v", st)
	}
	// apply hands over u at a new instant and waits for its apply.
	apply := func(u sink.Update) view.SinkStatus {
		t.Helper()
		clock.Advance(time.Second)
		s.Update(u)
		testkit.WaitFor(t, 5*time.Second, "the apply", func() bool { return s.Status().LastSuccess.Equal(clock.Now()) })
		return s.Status()
	}
	if st := apply(sink.Update{Pool: testPool("db1"), Generation: 1}); st.State != view.SinkOK || st.AppliedGeneration != 1 {
		t.Errorf("applied: %+v", st)
	}
	if st := apply(sink.Update{Pool: testPool("db2"), Frozen: true, Generation: 2}); !st.Frozen || st.AppliedGeneration != 1 ||
		len(st.Notes) != 1 || st.Notes[0] != "kept in its list while frozen: c1/db1:3306" {
		t.Errorf("frozen, db1 held: %+v", st)
	}
	if st := apply(sink.Update{Pool: testPool("db2"), Generation: 3}); st.Frozen || st.AppliedGeneration != 3 {
		t.Errorf("unfrozen: %+v", st)
	}
}

// An unreachable HAProxy: the sink fails and reports no applied generation.
func TestHAProxySinkUnreachable(t *testing.T) {
	addr := "unix:" + filepath.Join(t.TempDir(), "none.sock")
	hs, err := haproxy.New(haproxy.Config{Address: addr, Backends: haproxy.WriterReader("c1", "db_rw", "db_ro")},
		sink.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var s sink.Sink = hs
	start(t, s)
	s.Update(sink.Update{Pool: testPool("db1"), Generation: 1})
	testkit.WaitFor(t, 10*time.Second, "a failed reconcile", func() bool { return s.Status().Failures > 0 })
	if st := s.Status(); st.Name != "haproxy" || st.Target != addr || st.State != view.SinkFailing || st.AppliedGeneration != 0 {
		t.Errorf("status %+v", st)
	}
}

// Withholds, the frozen rule both sinks share: a frozen sink withholds a
// removal unless the writer role follows a term or the node is out for a
// reason it reported itself. The soak found the gap this closes: an app
// host isolated with a fenced writer kept routing reads to replicas its
// pool judged stale (28 s behind) until it reached the fleet again.
func TestWithholds(t *testing.T) {
	c := &pool.Cluster{Name: "c1",
		Writers: []pool.Node{{Name: "db1"}},
		Out: []pool.Node{
			{Name: "stale", Reason: pool.ReasonStale},
			{Name: "lag", Reason: pool.ReasonLag},
			{Name: "critical", Reason: pool.ReasonCritical},
			{Name: "maint", Reason: pool.ReasonMaintenance},
			{Name: "failed", Reason: pool.ReasonAgentFailed},
			{Name: "nohealth", Reason: pool.ReasonNoHealth},
			{Name: "conflict", Reason: pool.ReasonConflict},
			{Name: "damped", Reason: pool.ReasonDamped},
		}}
	term := &pool.Cluster{Name: "c2", Term: &pool.Term{Cluster: "c2", Number: 3, Writer: "db1"},
		Out: []pool.Node{{Name: "failed", Reason: pool.ReasonAgentFailed}}}
	tests := []struct {
		frozen bool
		c      *pool.Cluster
		writer bool
		name   string
		want   bool
	}{
		{false, c, false, "failed", false},
		{false, nil, false, "x", false},
		{true, nil, false, "x", true},
		{true, c, false, "failed", true},
		{true, c, false, "nohealth", true},
		{true, c, false, "conflict", true},
		{true, c, false, "damped", true},
		{true, c, false, "gone", true}, // not in the pool at all
		{true, c, false, "db1", true},  // moved to another role
		{true, c, false, "stale", false},
		{true, c, false, "lag", false},
		{true, c, false, "critical", false},
		{true, c, true, "critical", false},
		{true, c, false, "maint", false},
		{true, c, true, "failed", true},
		{true, term, true, "failed", false},
		{true, term, false, "failed", true},
	}
	for _, tt := range tests {
		cname := "nil"
		if tt.c != nil {
			cname = tt.c.Name
		}
		if got := sink.Withholds(tt.frozen, tt.c, tt.writer, tt.name); got != tt.want {
			t.Errorf("Withholds(frozen %v, cluster %s, writer role %v, %s) = %v, want %v", tt.frozen, cname, tt.writer, tt.name, got, tt.want)
		}
	}
}
