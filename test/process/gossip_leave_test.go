package process

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

const shutdownWithoutLeave = "Shutdown without a Leave"

// waitExit waits for p to exit and fails the test if it does not in time
// or exits with an error.
func waitExit(t *testing.T, p *proc, what string) {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("%s: exit %v\n%s", what, p.err, p.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the agent did not exit", what)
	}
}

// TestGracefulLeaveDoesNotWarn: a graceful leave, alone (SIGTERM) or with
// a peer (shoal leave), logs "left the cluster" and no "Shutdown without
// a Leave": serf warns so when it is shut down before its own Leave
// returned, which shoal does once it has decided the leave is complete.
func TestGracefulLeaveDoesNotWarn(t *testing.T) {
	key := newKey(t)

	alone := startAgent(t, "solo", key)
	testkit.WaitFor(t, 20*time.Second, "solo answers", func() bool { return members(t, alone.http)["solo"].Status == "alive" })
	alone.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, alone, "solo after SIGTERM")
	if l := alone.log.String(); !strings.Contains(l, "left the cluster") || strings.Contains(l, shutdownWithoutLeave) {
		t.Errorf("solo's log after SIGTERM, want \"left the cluster\" and no %q:\n%s", shutdownWithoutLeave, l)
	}

	a := startAgent(t, "stays", key)
	b := startAgent(t, "leaves", key, "--join", a.bind)
	testkit.WaitFor(t, 20*time.Second, "two alive", func() bool {
		m := members(t, b.http)
		return m["stays"].Status == "alive" && m["leaves"].Status == "alive"
	})
	if _, errOut, code := shoal(t, "leave", "--http-addr", b.http); code != 0 {
		t.Fatalf("leave: exit %d %s", code, errOut)
	}
	waitExit(t, b, "leaves after shoal leave")
	if l := b.log.String(); !strings.Contains(l, "left the cluster") || strings.Contains(l, shutdownWithoutLeave) {
		t.Errorf("leaves's log after shoal leave, want \"left the cluster\" and no %q:\n%s", shutdownWithoutLeave, l)
	}

	// Both stop at once: the leave completes as "every peer is leaving or
	// left too", usually before serf's own Leave returned.
	a.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, a, "stays after SIGTERM")
	if l := a.log.String(); strings.Contains(l, shutdownWithoutLeave) {
		t.Errorf("stays's log after SIGTERM has %q:\n%s", shutdownWithoutLeave, l)
	}
}
