package process

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	serfclient "github.com/hashicorp/serf/client"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// exitCode waits for p to exit within d and returns its exit status.
func exitCode(t *testing.T, p *proc, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("agent did not exit within %s", d)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", p.err)
	return -1
}

func newKey(t *testing.T) string {
	t.Helper()
	out, _, code := shoal(t, "keygen")
	if code != 0 {
		t.Fatalf("keygen exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// threeAgents starts a cluster of three with extra flags and waits until c
// sees all three alive.
func threeAgents(t *testing.T, extra ...string) (a, b, c *proc) {
	t.Helper()
	key := newKey(t)
	a = startAgent(t, "a", key, extra...)
	b = startAgent(t, "b", key, append([]string{"--join", a.bind}, extra...)...)
	c = startAgent(t, "c", key, append([]string{"--join", a.bind}, extra...)...)
	for _, p := range []*proc{a, b, c} {
		testkit.WaitFor(t, 20*time.Second, "three alive members", func() bool {
			m := members(t, p.http)
			return len(m) == 3 && m["a"].Status == "alive" && m["b"].Status == "alive" && m["c"].Status == "alive"
		})
	}
	return a, b, c
}

// TestStopTogetherExitsZero: a whole cluster SIGTERMed at once leaves
// cleanly. Every agent exits 0, long before leave_timeout: serf's own wait
// for a leave broadcast that nobody is left to receive is not waited out.
func TestStopTogetherExitsZero(t *testing.T) {
	const leaveTimeout = 10 * time.Second
	a, b, c := threeAgents(t, "--leave-timeout", leaveTimeout.String())
	start := time.Now()
	for _, p := range []*proc{a, b, c} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*proc{a, b, c} {
		if code := exitCode(t, p, leaveTimeout+5*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.cmd.Args[3], code)
		}
		if strings.Contains(p.log.String(), "graceful leave incomplete") {
			t.Errorf("%s logged an incomplete leave", p.cmd.Args[3])
		}
	}
	// Well under leave_timeout: serf's leave propagation delay is 1 s.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the three agents took %s to exit (leave_timeout %s)", d, leaveTimeout)
	}
}

// TestStopStaggeredExitsZero: the last agent of a cluster stopped with some
// skew (a and c first; b once it has seen both left) has nobody left to
// gossip its leave to, yet a and c still wait for word of it: b tells them
// directly, and all three exit 0 well within leave_timeout instead of
// waiting for b to be declared failed.
func TestStopStaggeredExitsZero(t *testing.T) {
	const leaveTimeout = 10 * time.Second
	a, b, c := threeAgents(t, "--leave-timeout", leaveTimeout.String())
	start := time.Now()
	a.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Process.Signal(syscall.SIGTERM)
	// "left": their gossip layer has left too, so b has nobody to gossip
	// its own leave to, while a and c still run, waiting for word of b.
	testkit.WaitFor(t, 5*time.Second, "b sees a and c left", func() bool {
		m := members(t, b.http)
		return m["a"].Status == "left" && m["c"].Status == "left"
	})
	b.cmd.Process.Signal(syscall.SIGTERM)
	for _, p := range []*proc{a, b, c} {
		if code := exitCode(t, p, leaveTimeout+5*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.cmd.Args[3], code)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the three agents took %s to exit (leave_timeout %s)", d, leaveTimeout)
	}
}

// TestLoneAgentSIGTERMExitsZero: with nobody to tell, the leave is complete.
func TestLoneAgentSIGTERMExitsZero(t *testing.T) {
	a := startAgent(t, "alone", newKey(t), "--leave-timeout", "10s")
	testkit.WaitFor(t, 10*time.Second, "agent up", func() bool { return members(t, a.http)["alone"].Status == "alive" })
	start := time.Now()
	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, a, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a lone agent took %s to leave", d)
	}
}

// TestLeaveUnconfirmedWhenPeersStopped: peers that are alive but do not
// answer (SIGSTOPped) cannot confirm the leave. serf would call it done (its
// gossip is fire-and-forget UDP); shoal waits leave_timeout for a peer to
// answer, then says so and exits 1. The leave still reaches the peers once
// they run again (their socket buffers held it).
func TestLeaveUnconfirmedWhenPeersStopped(t *testing.T) {
	a, b, c := threeAgents(t, "--leave-timeout", "3s")
	for _, p := range []*proc{b, c} {
		p.cmd.Process.Signal(syscall.SIGSTOP)
		defer p.cmd.Process.Signal(syscall.SIGCONT)
	}
	start := time.Now()
	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, a, 10*time.Second); code != 1 {
		t.Fatalf("exit %d, want 1 (leave not confirmed)", code)
	}
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("gave up after %s, before leave_timeout 3s", d)
	}
	log := a.log.String()
	if !strings.Contains(log, "graceful leave incomplete") ||
		!strings.Contains(log, "not confirmed within leave_timeout 3s: no peer answered after the leave was sent: b (") ||
		!strings.Contains(log, "c (") {
		t.Errorf("log does not say which peers did not confirm:\n%s", log)
	}
	for _, p := range []*proc{b, c} {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
	testkit.WaitFor(t, 10*time.Second, "b sees a left", func() bool { return members(t, b.http)["a"].Status == "left" })
}

// TestSerfRPCLeave: `serf leave` (the serf client library's Leave, after
// auth with the agent's API token) is as clean as `shoal leave`: the client
// gets success, the agent exits 0 and the peers see it left.
func TestSerfRPCLeave(t *testing.T) {
	key := newKey(t)
	a := startAgent(t, "stays", key)
	b := startAgent(t, "goes", key, "--join", a.bind)
	testkit.WaitFor(t, 20*time.Second, "two alive", func() bool {
		m := members(t, a.http)
		return m["stays"].Status == "alive" && m["goes"].Status == "alive"
	})
	tok, err := os.ReadFile(b.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := serfclient.ClientFromConfig(&serfclient.Config{Addr: b.rpc, AuthKey: strings.TrimSpace(string(tok)), Timeout: 15 * time.Second})
	if err != nil {
		t.Fatalf("serf rpc client: %v", err)
	}
	defer c.Close()
	if err := c.Leave(); err != nil {
		t.Fatalf("serf leave: %v", err)
	}
	if code := exitCode(t, b, 10*time.Second); code != 0 {
		t.Fatalf("agent exited %d after serf leave", code)
	}
	if log := b.log.String(); strings.Contains(log, "gossip layer shut down unexpectedly") || !strings.Contains(log, "left the cluster") {
		t.Errorf("log:\n%s", log)
	}
	testkit.WaitFor(t, 10*time.Second, "a sees b left", func() bool { return members(t, a.http)["goes"].Status == "left" })
}
