package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallDepsCheckListsWhatIsMissing: `make test` on a machine where it
// cannot install (not root, or no apt-get) runs install-deps.sh --check,
// which must fail and name every missing package, never pass quietly. The
// PATH here holds bash alone, so the tools found through PATH are missing.
func TestInstallDepsCheckListsWhatIsMissing(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash not in PATH: %v", err)
	}
	bin := t.TempDir()
	if err := os.Symlink(bash, filepath.Join(bin, "bash")); err != nil {
		t.Fatal(err)
	}
	script := repoPath(t, "test/install-deps.sh")
	cmd := exec.Command(bash, script, "--check", "test")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("--check with nothing installed: %v, want exit 1:\n%s", err, out)
	}
	for _, want := range []string{"missing for make test:", " gcc ", " jq ", " socat ", " shellcheck ", " prometheus ", "apt-get install -y"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "stress-ng") {
		t.Errorf("the test set lists an e2e-only tool:\n%s", out)
	}

	cmd = exec.Command(bash, script, "--check", "tset")
	cmd.Env = []string{"PATH=" + bin}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "unknown argument tset") {
		t.Fatalf("a bad argument: %v:\n%s", err, out)
	}
}
