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
	out, _, _ := shoal(t, "keygen")
	key := strings.TrimSpace(out)

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

// TestForcedExitStillWarns: a shutdown that cuts the leave short (a second
// signal while the leave waits on a stopped peer) still logs serf's
// warning.
func TestForcedExitStillWarns(t *testing.T) {
	out, _, _ := shoal(t, "keygen")
	key := strings.TrimSpace(out)
	a := startAgent(t, "frozen", key, "--leave-timeout", "30s")
	b := startAgent(t, "forced", key, "--join", a.bind, "--leave-timeout", "30s")
	testkit.WaitFor(t, 20*time.Second, "two alive", func() bool { return len(members(t, b.http)) == 2 })
	a.cmd.Process.Signal(syscall.SIGSTOP)
	defer a.cmd.Process.Signal(syscall.SIGCONT)
	b.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	select {
	case <-b.done:
		t.Skip("leave completed before the second signal; nothing to force")
	default:
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		t.Fatal("second SIGTERM did not force an exit")
	}
	if l := b.log.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, shutdownWithoutLeave) {
		t.Errorf("forced exit: want a WARN %q:\n%s", shutdownWithoutLeave, l)
	}
}
