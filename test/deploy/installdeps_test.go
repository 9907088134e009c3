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

// TestInstallDepsStartsNoService: the packages install-deps.sh installs get
// no running and no boot-enabled service: apt runs under a policy-rc.d that
// refuses every start (removed afterwards), and the systemd units of those
// packages, and of no other, are disabled. apt-get, dpkg and systemctl are
// stubs that record their calls.
func TestInstallDepsStartsNoService(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash not in PATH: %v", err)
	}
	bin, dir := t.TempDir(), t.TempDir()
	for _, tool := range []string{"bash", "grep", "chmod", "rm", "cat", "sleep"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s not in PATH: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	policy := filepath.Join(dir, "policy-rc.d")
	calls := filepath.Join(dir, "calls")
	stubs := map[string]string{
		// Records whether the policy refused starts while packages were installed.
		"apt-get": `echo "apt-get $*" >> "$CALLS"; case $1 in install) echo "policy during install: $(cat "$POLICY" 2>/dev/null | grep -c 'exit 101')" >> "$CALLS";; esac`,
		// mariadb-client, like most packages, has no systemd unit.
		"dpkg":      `echo "dpkg $*" >> "$CALLS"; echo /usr/bin/x; [ "$2" = mariadb-client ] || { echo /lib/systemd/system/$2.service; echo /lib/systemd/system/$2-tpl@.service; }`,
		"systemctl": `echo "systemctl $*" >> "$CALLS"; case $1 in is-enabled) exit 0;; is-active) exit 3;; esac`,
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+bash+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bash, repoPath(t, "test/install-deps.sh"), "demo")
	cmd.Env = []string{"PATH=" + bin, "CALLS=" + calls, "POLICY=" + policy, "INSTALL_DEPS_POLICY_RC_D=" + policy}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install-deps.sh demo: %v\n%s", err, out)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client", // haproxy: found by path here
		"policy during install: 1",
		"systemctl disable --quiet mariadb-server.service",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("calls lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "mariadb-client.service") {
		t.Errorf("a unit was made up for a package without one:\n%s", got)
	}
	if strings.Contains(got, "tpl@") {
		t.Errorf("a template unit was touched:\n%s", got)
	}
	if _, err := os.Stat(policy); !os.IsNotExist(err) {
		t.Errorf("the policy-rc.d it wrote is still there (%v)", err)
	}
}
