package process

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestDuplicateNameExitsAsConfigError: an agent started under the name of
// a live node exits 2, a configuration error, which the shipped systemd
// unit does not restart (RestartPreventExitStatus=2): with exit 1 it
// restarted every 2 s and raised the conflict again each time. The message
// names the node and the address holding it; the live node keeps its name.
func TestDuplicateNameExitsAsConfigError(t *testing.T) {
	key := newKey(t)
	a := startAgent(t, "twin", key)
	testkit.WaitFor(t, 20*time.Second, "twin alive", func() bool { return members(t, a.http)["twin"].Status == "alive" })
	b := startAgent(t, "twin", key, "--join", a.bind)
	want := `Error: node name "twin" is already used by a live member at ` + a.bind + `: refusing to run with a duplicate name; pick another --node`
	if code := exitCode(t, b, 30*time.Second); code != 2 || !strings.Contains(b.log.String(), want) {
		t.Fatalf("duplicate agent exited %d, want 2 with %q; log:\n%s", code, want, b.log.String())
	}
	if members(t, a.http)["twin"].Status != "alive" {
		t.Fatal("the live node lost its name")
	}
}

// TestSystemdUnitDoesNotRestartConfigErrors: the shipped unit leaves exit
// status 2 (configuration errors, a duplicate node name among them) alone.
func TestSystemdUnitDoesNotRestartConfigErrors(t *testing.T) {
	unit := mustRead(t, "../../deploy/systemd/shoal.service")
	for _, line := range []string{"Restart=on-failure", "RestartPreventExitStatus=2"} {
		if !strings.Contains("\n"+unit, "\n"+line+"\n") {
			t.Errorf("deploy/systemd/shoal.service lacks %q", line)
		}
	}
}
