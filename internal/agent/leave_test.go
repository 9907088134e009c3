package agent

import (
	"sync"
	"testing"
	"time"
)

// TestLeaveTogether: three agents leaving at once all complete, well within
// leave_timeout, although serf's own Leave would wait its 5 s broadcast
// timeout for an intent nobody is left to receive; a second Leave (the
// signal after a serf rpc leave) returns the first one's outcome at once.
func TestLeaveTogether(t *testing.T) {
	nodes := startCluster(t, 3, "fast", "")
	for _, n := range nodes {
		n.a.cfg.LeaveTimeout = 10 * time.Second
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.a.Leave() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node%d: %v", i, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("leaving together took %s", d)
	}
	again := time.Now()
	if err := nodes[0].a.Leave(); err != nil || time.Since(again) > 100*time.Millisecond {
		t.Errorf("second Leave: %v after %s", err, time.Since(again))
	}
	for _, n := range nodes {
		n.a.Shutdown() // while serf's own Leave may still wait: must not panic
	}
}
