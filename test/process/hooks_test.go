package process

import (
	"strings"
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

	a := startAgent(t, "h1", key, "--event-handler", "user:hello=/bin/echo hi", "--event-handler", "query:who=/bin/echo h1-here")
	testkit.WaitFor(t, 20*time.Second, "agent answers", func() bool {
		_, _, code := shoal(t, "info", "--http-addr", a.http)
		return code == 0
	})
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
