package sink

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/internal/view"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestRecorder() (*Recorder, *clockwork.FakeClock, *testkit.SyncBuffer) {
	logs := &testkit.SyncBuffer{}
	clock := clockwork.NewFakeClockAt(t0)
	r := NewRecorder(Info{
		Name: "test", Target: "/dev/null",
		Failed: "test apply failed", Recovered: "test recovered",
		Frozen: "test frozen", Unfrozen: "test unfrozen",
		Notes: []NoteKind{
			{Kind: "held", Prefix: "held: ", Msg: "nodes held", Cleared: "holds nothing"},
			{Kind: "odd", Msg: "odd things"},
		},
	}, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), clock)
	return r, clock, logs
}

func TestRecorderStates(t *testing.T) {
	r, clock, logs := newTestRecorder()
	if st := r.Status(); st.Name != "test" || st.Target != "/dev/null" || st.State != view.SinkPending || r.Snapshot().Applies != 0 {
		t.Fatalf("new recorder: %+v", st)
	}

	clock.Advance(time.Second)
	r.Record(Update{}, nil)
	if st := r.Status(); st.State != view.SinkOK || !st.LastSuccess.Equal(t0.Add(time.Second)) || st.Failures != 0 || r.Failed() {
		t.Errorf("after a success: %+v", st)
	}

	// A failure at the same instant as the success is still failing.
	boom := errors.New("boom")
	r.Record(Update{}, boom)
	r.Record(Update{}, boom)
	st := r.Status()
	if st.State != view.SinkFailing || st.Failures != 2 || st.LastError != "boom" || !st.LastErrorAt.Equal(t0.Add(time.Second)) ||
		!r.Failed() || r.Snapshot().Applies != 3 {
		t.Errorf("after two failures: %+v", st)
	}
	clock.Advance(time.Second)
	r.Record(Update{}, nil)
	if st := r.Status(); st.State != view.SinkOK || !st.LastSuccess.Equal(t0.Add(2*time.Second)) || st.LastError != "boom" || st.Failures != 2 {
		t.Errorf("after recovery: %+v", st)
	}
	wantLogsOnce(t, logs.String(),
		`level=ERROR msg="test apply failed" err=boom`,
		`level=DEBUG msg="test apply failed again" err=boom`,
		`level=INFO msg="test recovered" after=boom`)
}

// wantLogsOnce checks that out has each of lines exactly once.
func wantLogsOnce(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if got := strings.Count(out, want); got != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, got, out)
		}
	}
}

// The applied generation advances only with a successful apply that was
// not frozen, and never goes back.
func TestRecorderAppliedGeneration(t *testing.T) {
	r, _, _ := newTestRecorder()
	for _, step := range []struct {
		u    Update
		err  error
		want uint64
	}{
		{Update{Generation: 1}, errors.New("unreachable"), 0},
		{Update{Generation: 2}, nil, 2},
		{Update{Generation: 3}, errors.New("unreachable"), 2},
		{Update{Generation: 4, Frozen: true}, nil, 2},
		{Update{Generation: 5, Frozen: true}, errors.New("unreachable"), 2},
		{Update{Generation: 6}, nil, 6},
		{Update{Generation: 6}, nil, 6}, // a periodic re-apply
		{Update{Generation: 1}, nil, 6}, // never back
		{Update{}, nil, 6},              // an apply with no generation
	} {
		r.Record(step.u, step.err)
		if got := r.Status().AppliedGeneration; got != step.want {
			t.Fatalf("after %+v (err %v): applied %d, want %d", step.u, step.err, got, step.want)
		}
	}
}

func TestRecorderReport(t *testing.T) {
	r, _, logs := newTestRecorder()
	r.Report(true, []string{"c1/db1", "c1/db2"}, []string{"x"})
	r.Report(true, []string{"c1/db1", "c1/db2"}, []string{"x"}) // unchanged: not logged again
	st := r.Status()
	if !st.Frozen || !slices.Equal(st.Notes, []string{"held: c1/db1", "held: c1/db2", "x"}) {
		t.Errorf("status %+v", st)
	}
	if got := r.Snapshot().Items["held"]; !slices.Equal(got, []string{"c1/db1", "c1/db2"}) {
		t.Errorf("items %q", got)
	}
	r.Report(false) // missing items are none
	if st := r.Status(); st.Frozen || st.Notes != nil || r.Snapshot().Items["odd"] != nil {
		t.Errorf("status after clear %+v", st)
	}
	wantLogsOnce(t, logs.String(),
		`level=WARN msg="test frozen"`,
		`level=WARN msg="nodes held" kind=held count=2 items="[c1/db1 c1/db2]"`,
		`level=WARN msg="odd things" kind=odd count=1 items=[x]`,
		`level=INFO msg="test unfrozen"`,
		`level=INFO msg="holds nothing" kind=held`,
		`level=INFO msg="test report cleared" kind=odd`)
}

// Status returns copies: the caller may change them.
func TestRecorderStatusIsACopy(t *testing.T) {
	r, _, _ := newTestRecorder()
	items := []string{"a"}
	r.Report(false, items)
	items[0] = "changed"
	st := r.Status()
	st.Notes[0] = "changed"
	if got := r.Status().Notes; !slices.Equal(got, []string{"held: a"}) {
		t.Errorf("notes %q", got)
	}
	r.Snapshot().Items["held"][0] = "changed"
	if got := r.Snapshot().Items["held"]; !slices.Equal(got, []string{"a"}) {
		t.Errorf("items %q", got)
	}
}
