package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestHooksCLI: handlers given as flags, shoal hooks list and test against
// the real binary, and a bad spec refused at start with the key named.
func TestHooksCLI(t *testing.T) {
	out, _, _ := shoal(t, "keygen")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]

	_, errOut, code := shoal(t, "agent", "--node", "bad", "--encrypt", key, "--event-handler", "member-jion=/bin/true", "--config-check", "/dev/null")
	if code != 2 || !strings.Contains(errOut, "event_handlers[0]") || !strings.Contains(errOut, "member-jion") {
		t.Errorf("bad handler spec: exit %d: %s", code, errOut)
	}

	a := startAnswering(t, "h1", key, "--event-handler", "user:hello=/bin/echo hi", "--event-handler", "query:who=/bin/echo h1-here")
	out, errOut, code = shoal(t, "hooks", "list", "--http-addr", a.http)
	if code != 0 || !strings.Contains(out, "user:hello=/bin/echo hi") || !strings.Contains(out, "0/1000") {
		t.Fatalf("hooks list: exit %d:\n%s%s", code, out, errOut)
	}
	out, errOut, code = shoal(t, "hooks", "test", "user", "--name", "hello", "--http-addr", a.http)
	if code != 0 || !strings.Contains(out, "user:hello=/bin/echo hi") {
		t.Fatalf("hooks test user: exit %d:\n%s%s", code, out, errOut)
	}
	out, _, code = shoal(t, "hooks", "test", "query", "--name", "who", "--http-addr", a.http)
	if code != 0 || !strings.Contains(out, "query response: h1-here") {
		t.Errorf("hooks test query: exit %d:\n%s", code, out)
	}
	if out, _, code := shoal(t, "hooks", "test", "user", "--name", "nobody", "--http-addr", a.http); code != 0 || !strings.Contains(out, "no handler matches") {
		t.Errorf("hooks test with no match: exit %d:\n%s", code, out)
	}
	if _, errOut, code := shoal(t, "hooks", "test", "member-joined", "--http-addr", a.http); code != 2 || !strings.Contains(errOut, `unknown event "member-joined"`) {
		t.Errorf("hooks test bad event: exit %d: %s", code, errOut)
	}
	if !strings.Contains(a.log.String(), `msg="hook ran"`) {
		t.Error("the test run was not logged")
	}
}

// TestHookTimeoutKillsEscapedChildren: against the real agent, a hook whose
// children left its process group (setsid) and lost their parent (double
// fork) times out, and none of them survives it nor stays a zombie.
func TestHookTimeoutKillsEscapedChildren(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("no /usr/bin/setsid (util-linux)")
	}
	dir := t.TempDir()
	hook := filepath.Join(dir, "escape.sh")
	script := "#!/bin/sh\n" +
		"setsid sleep 300 & echo $! > \"$OUT_DIR/pid1\"\n" +
		"( setsid sleep 300 & echo $! > \"$OUT_DIR/pid2\" ) &\n" +
		"wait\nsleep 1000\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "shoal.yaml")
	if err := os.WriteFile(cfg, []byte("hooks:\n  timeout: 2s\n  kill_grace: 1s\n  env: [OUT_DIR]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUT_DIR", dir) // the agent inherits the test's environment
	out, _, _ := shoal(t, "keygen")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	a := startAnswering(t, "esc1", lines[len(lines)-1], "--config", cfg, "--event-handler", "user:esc="+hook)
	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // only if the test failed: they are gone otherwise
		}
	})
	_, _, _ = shoal(t, "hooks", "test", "user", "--name", "esc", "--http-addr", a.http)
	testkit.WaitFor(t, 60*time.Second, "the hook to time out", func() bool {
		return strings.Contains(a.log.String(), `msg="hook timed out"`)
	})
	for _, f := range []string{"pid1", "pid2"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("the hook did not start its children: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("sleep 300 (pid %d) to be killed and reaped", pid), func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err)
		})
	}
}
