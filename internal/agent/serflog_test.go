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
	testkit.WaitFor(t, 10*time.Second, "node1 logs serf's shutdown line", func() bool {
		return strings.Contains(nodes[1].logs.String(), "Serf shutdown detected")
	})
	log1 := nodes[1].logs.String()
	for _, l := range strings.Split(log1, "\n") {
		if strings.Contains(l, "Serf shutdown detected") && !strings.Contains(l, "level=INFO") {
			t.Errorf("requested shutdown logged as: %s", l)
		}
	}
}
