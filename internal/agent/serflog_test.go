package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// serf's "attempting reconnect" lines (one per failed member per
// reconnect_interval) are DEBUG, and a requested shutdown logs no WARN
// "Serf shutdown detected".
func TestSerfLogNoise(t *testing.T) {
	nodes := startCluster(t, 2, "fast", "")
	nodes[1].a.Shutdown() // no leave: node0 sees it fail and tries to reconnect
	testkit.WaitFor(t, 30*time.Second, "node0 attempts to reconnect to node1", func() bool {
		return strings.Contains(nodes[0].logs.String(), "attempting reconnect to node1")
	})
	for _, l := range strings.Split(nodes[0].logs.String(), "\n") {
		if strings.Contains(l, "attempting reconnect to") && !strings.Contains(l, "level=DEBUG") {
			t.Errorf("reconnect attempt not at DEBUG: %s", l)
		}
	}
	// serf's agent logs that line from its own event loop once it sees
	// the shutdown: a moment after Shutdown returns, on a busy machine
	// after node0's first reconnect attempt.
	var log1 string
	deadline := time.Now().Add(10 * time.Second)
	for log1 = nodes[1].logs.String(); !strings.Contains(log1, "Serf shutdown detected") && time.Now().Before(deadline); log1 = nodes[1].logs.String() {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(log1, "Serf shutdown detected") {
		t.Fatalf("node1 never logged serf's shutdown line in 10 s; nothing checked:\n%s", log1)
	}
	for _, l := range strings.Split(log1, "\n") {
		if strings.Contains(l, "Serf shutdown detected") && !strings.Contains(l, "level=INFO") {
			t.Errorf("requested shutdown logged as: %s", l)
		}
	}
}
