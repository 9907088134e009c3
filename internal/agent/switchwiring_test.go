package agent

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/switchover"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// appliedRecord finds the record the sinks share.
func TestAppliedRecordFound(t *testing.T) {
	l := switchover.NewRecord()
	a := &Agent{pool: poolParts{sinks: []sink.Sink{switchover.RecordedSink{Log: l}}}}
	if a.appliedRecord() != l {
		t.Error("appliedRecord does not find the sinks' record")
	}
}

// TestWaitAppliedAcrossAgents: the query travels through serf and back.
// A router (a file sink) whose pool has no cluster reports "no term, no
// writer"; an agent without sinks answers that it is no router; a wait
// for a term nobody applied times out with the router pending and why.
func TestWaitAppliedAcrossAgents(t *testing.T) {
	rc := testConfig(t, "app1", "fast", "")
	rc.Sinks.File.Path = filepath.Join(t.TempDir(), "pool.json")
	router := startNode(t, rc)
	plain := startNode(t, testConfig(t, "app2", "fast", "", rc.Bind))
	testkit.WaitFor(t, 20*time.Second, "both see both", func() bool {
		return countStatus(router.a, serf.StatusAlive) == 2 && countStatus(plain.a, serf.StatusAlive) == 2
	})
	ctx := context.Background()
	r := plain.a.cons.sw.WaitApplied(ctx, "main", 0, "", 5*time.Second)
	if !slices.Equal(r.Applied, []string{"app1"}) || len(r.Pending) != 0 || len(r.Unreachable) != 0 {
		t.Fatalf("report %+v", r)
	}
	if r.Took >= 5*time.Second {
		t.Errorf("took %s: did not end once every router applied", r.Took)
	}
	r = router.a.cons.sw.WaitApplied(ctx, "main", 3, "db9", 600*time.Millisecond)
	// Without db members the router hands out no pool: its sink has
	// applied nothing, and says so.
	if len(r.Applied) != 0 || r.Pending["app1"] != "applied term 0 (writer none): file: nothing applied yet" || r.Took < 600*time.Millisecond {
		t.Fatalf("waiting for a term nobody has: %+v", r)
	}
}
