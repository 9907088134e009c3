package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// noAPIPrefix fails when an error message shows the HTTP plumbing instead
// of the agent's message, or spans several lines.
func oneLineMessage(t *testing.T, what, errOut string) {
	t.Helper()
	if strings.Contains(errOut, "agent answered") || strings.Contains(errOut, "error occurred") ||
		strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
		t.Errorf("%s: stderr is not one plain line:\n%s", what, errOut)
	}
}

// TestHistoryKindAndForceLeave runs the CLI against real agents: history
// --kind refuses unknown kinds, force-leave says what it did (unknown
// node: exit 1; alive node: unaffected, exit 0; failed node: left, then
// pruned), and errors show the agent's message on one line.
func TestHistoryKindAndForceLeave(t *testing.T) {
	key := newKey(t)
	a := startAgent(t, "a1", key)
	b := startAgent(t, "b1", key, "--join", a.bind)
	testkit.WaitFor(t, 20*time.Second, "two alive members", func() bool {
		m := members(t, a.http)
		return m["a1"].Status == "alive" && m["b1"].Status == "alive"
	})

	// history --kind
	for _, kind := range []string{"bogus", "maintenance"} {
		_, errOut, code := shoal(t, "history", "--http-addr", a.http, "--kind", kind)
		if code == 0 || !strings.Contains(errOut, `unknown kind "`+kind+`": want one of pool, health, conflict, term, isolation, maint`) {
			t.Errorf("history --kind %s: exit %d, stderr %q; want an error listing the kinds", kind, code, errOut)
		}
	}
	for _, kind := range []string{"maint", "pool", "health", "conflict", "term", "isolation"} {
		if _, errOut, code := shoal(t, "history", "--http-addr", a.http, "--kind", kind); code != 0 {
			t.Errorf("history --kind %s: exit %d: %s", kind, code, errOut)
		}
	}
	if out, _, _ := shoal(t, "history", "--help"); !strings.Contains(out, "maint (maintenance mode on or off)") ||
		!strings.Contains(out, "only this kind: pool, health, conflict, term, isolation, maint") {
		t.Errorf("history --help does not document the kinds:\n%s", out)
	}

	// force-leave of an unknown node, with and without --prune.
	for _, args := range [][]string{{"nobody"}, {"nobody", "--prune"}} {
		out, errOut, code := shoal(t, append([]string{"force-leave", "--http-addr", a.http}, args...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, `no such member "nobody"`) {
			t.Errorf("force-leave %q: exit %d, stdout %q, stderr %q; want exit 1 naming the node", args, code, out, errOut)
		}
		oneLineMessage(t, "force-leave nobody", errOut)
	}
	// force-leave of an alive node: unaffected.
	out, errOut, code := shoal(t, "force-leave", "--http-addr", a.http, "b1", "--prune")
	if code != 0 || !strings.Contains(out, "Node b1 is alive: force-leave left it unaffected.") {
		t.Errorf("force-leave of an alive node: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	time.Sleep(500 * time.Millisecond)
	if st := members(t, a.http)["b1"].Status; st != "alive" {
		t.Errorf("b1 is %q after a force-leave of an alive node", st)
	}
	if out, _, _ := shoal(t, "force-leave", "--help"); !strings.Contains(out, "An alive member is never touched") || !strings.Contains(out, "exits 0") {
		t.Errorf("force-leave --help does not say what happens to an alive member:\n%s", out)
	}

	// A join that fails: the agent's message, one line.
	_, errOut, code = shoal(t, "join", "--http-addr", a.http, ports.Free(t))
	if code != 1 || !strings.Contains(errOut, "join [") {
		t.Errorf("join of a closed port: exit %d, stderr %q", code, errOut)
	}
	oneLineMessage(t, "failed join", errOut)

	// A failed node: marked left, then pruned.
	_ = b.cmd.Process.Kill()
	testkit.WaitFor(t, 20*time.Second, "b1 failed", func() bool { return members(t, a.http)["b1"].Status == "failed" })
	out, errOut, code = shoal(t, "force-leave", "--http-addr", a.http, "b1")
	if code != 0 || !strings.Contains(out, "Node b1 was failed; it is now marked left.") {
		t.Errorf("force-leave of a failed node: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	testkit.WaitFor(t, 5*time.Second, "b1 left", func() bool { return members(t, a.http)["b1"].Status == "left" })
	out, _, code = shoal(t, "force-leave", "--http-addr", a.http, "b1")
	if code != 0 || !strings.Contains(out, "Node b1 is left: nothing changed (--prune removes it from the member list).") {
		t.Errorf("force-leave of a left node: exit %d, stdout %q", code, out)
	}
	out, _, code = shoal(t, "force-leave", "--http-addr", a.http, "b1", "--prune")
	if code != 0 || !strings.Contains(out, "Node b1 (left) was removed from the member list.") {
		t.Errorf("force-leave --prune of a left node: exit %d, stdout %q", code, out)
	}
	testkit.WaitFor(t, 5*time.Second, "b1 pruned", func() bool { _, ok := members(t, a.http)["b1"]; return !ok })
}

// TestReloadLogsRestartSettings: after SIGHUP, every changed setting that
// needs a restart is named in the log; the help says what SIGHUP reloads.
func TestReloadLogsRestartSettings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "shoal.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("log_level: info\npool:\n  max_lag: 10s\n")
	a := startAgent(t, "r1", newKey(t), "--config", cfg)
	testkit.WaitFor(t, 20*time.Second, "agent up", func() bool { return members(t, a.http)["r1"].Status == "alive" })
	write("log_level: debug\npool:\n  max_lag: 20s\n  min_readers: 3\nhistory:\n  size: 50\nhooks:\n  timeout: 7s\n" +
		"event_handlers: [\"user:deploy=/bin/true\"]\n")
	_ = a.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, 10*time.Second, "reload done", func() bool { return strings.Contains(a.log.String(), "reload done") })
	var warn string
	for _, l := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(l, "need a restart") {
			warn = l
		}
	}
	for _, k := range []string{"pool.max_lag", "pool.min_readers", "history.size", "hooks.timeout"} {
		if !strings.Contains(warn, k) {
			t.Errorf("restart warning %q does not name %s", warn, k)
		}
	}
	for _, k := range []string{"log_level", "event_handlers"} {
		if strings.Contains(warn, k) {
			t.Errorf("restart warning %q names %s, which SIGHUP applies", warn, k)
		}
	}
	if out, _, _ := shoal(t, "agent", "--help"); !strings.Contains(out, "SIGHUP reloads the log level, the tags") || !strings.Contains(out, "event handlers") {
		t.Errorf("agent --help does not say what SIGHUP reloads:\n%s", out)
	}
}

// TestDevBindsLoopback: --dev runs without encryption, so its gossip
// listens on 127.0.0.1 only (port 7946, the default: the test fails, never
// skips, when another process holds it).
func TestDevBindsLoopback(t *testing.T) {
	dir := t.TempDir()
	log := &testkit.SyncBuffer{}
	cmd := exec.Command(shoalBin(t), "agent", "--dev", "--http-addr", ports.Free(t), "--rpc-addr", ports.Free(t),
		"--api-token-file", filepath.Join(dir, "api-token"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("--- log ---\n%s", log.String())
		}
	})
	testkit.WaitFor(t, 20*time.Second, "agent started", func() bool { return strings.Contains(log.String(), "agent started") })
	if !strings.Contains(log.String(), "gossip=127.0.0.1:7946") {
		t.Errorf("--dev agent does not gossip on 127.0.0.1:7946")
	}
	// 0100007F:1F0A is 127.0.0.1:7946 in /proc/net/{udp,tcp}.
	for _, f := range []string{"/proc/net/udp", "/proc/net/tcp"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), " 0100007F:1F0A ") {
			t.Errorf("%s: no socket on 127.0.0.1:7946", f)
		}
		if strings.Contains(string(b), " 00000000:1F0A ") {
			t.Errorf("%s: a socket on *:7946", f)
		}
	}
}
