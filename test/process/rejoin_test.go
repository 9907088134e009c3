package process

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestKilledAgentRejoinsWithoutJoin: an agent killed with SIGKILL in a
// quiet cluster restarts with only its snapshot (no --join), at a new
// address, and is back in the cluster by itself. serf's snapshot may not have flushed its peers in
// a quiet cluster; the peers file next to it covers that.
func TestKilledAgentRejoinsWithoutJoin(t *testing.T) {
	out, _, _ := shoal(t, "keygen")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	dir := t.TempDir()
	// r1 lets a dead member's name rejoin from a new address after 2 s
	// (default 30 s).
	a := startAgent(t, "r1", key, "--snapshot", filepath.Join(dir, "r1.snap"), "--dead-node-reclaim-time", "2s")
	snap := filepath.Join(dir, "r2.snap")
	b := startAgent(t, "r2", key, "--snapshot", snap, "--join", a.bind)
	testkit.WaitFor(t, 20*time.Second, "r2 alive in r1's view", func() bool {
		_, _, code := shoal(t, "info", "--http-addr", a.http)
		return code == 0 && members(t, a.http)["r2"].Status == "alive"
	})
	testkit.WaitFor(t, 10*time.Second, "peers file written", func() bool {
		data, err := os.ReadFile(snap + ".peers")
		var peers []string
		return err == nil && json.Unmarshal(data, &peers) == nil && len(peers) == 1 && peers[0] == a.bind
	})
	b.cmd.Process.Kill()
	<-b.done
	if data, err := os.ReadFile(snap); err == nil {
		t.Logf("snapshot after SIGKILL lists r1: %v", strings.Contains(string(data), "alive: r1 "))
	}
	testkit.WaitFor(t, 20*time.Second, "r2 failed in r1's view", func() bool { return members(t, a.http)["r2"].Status == "failed" })

	// Restart with the snapshot, no --join, and a new address (a new pod
	// IP, say), so r1's reconnect attempts to the old one cannot help.
	c := startAgent(t, "r2", key, "--snapshot", snap, "--dead-node-reclaim-time", "2s")
	testkit.WaitFor(t, 30*time.Second, "r2 alive again in r1's view", func() bool { return members(t, a.http)["r2"].Status == "alive" })
	_ = c
}
