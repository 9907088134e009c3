//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ShoalCLI runs the shoal command on agent a's host against its API (with
// its token) and returns its combined output and exit status.
func ShoalCLI(t testing.TB, a *Agent, args ...string) (string, int) {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(a.Dir, "api-token"))
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	// Run on the agent's host (its namespace), as an operator would: the
	// root namespace has no route to the test's addresses.
	argv := append([]string{"netns", "exec", a.Host.NS, ShoalBin(t)}, args...)
	cmd := exec.Command("ip", append(argv, "--http-addr", a.HTTPAddr(), "--token", strings.TrimSpace(string(tok)))...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("e2e: shoal %v: %v", args, err)
	}
	return out.String(), 0
}
