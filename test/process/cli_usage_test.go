package process

import (
	"strings"
	"testing"
)

// TestCLIUsagePapercuts, with the real binary: help and completion are
// commands (as shoal --help lists them), --version is shoal version, an
// unknown command gets a readable suggestion, a reserved tag is a usage
// error, an --http-addr without a port uses the agent's, and --node shows
// one default.
func TestCLIUsagePapercuts(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		out     string // in stdout
		errOut  string // in stderr
		notWant string // in neither
	}{
		{[]string{"help"}, 0, "Available Commands:", "", "unknown command"},
		{[]string{"help", "members"}, 0, "shoal members [flags]", "", "unknown command"},
		{[]string{"help", "membrs"}, 2, "", "Did you mean this? members", `\t`},
		{[]string{"completion", "bash"}, 0, "bash completion", "", "unknown command"},
		{[]string{"__complete", "mem"}, 0, "members", "", "unknown command"},
		{[]string{"membrs"}, 2, "", "unknown command \"membrs\" for \"shoal\" (see 'shoal --help')\nDid you mean this? members\n", `\t`},
		{[]string{"hooks", "tset"}, 2, "", "Did you mean this? test", `\t`},
		{[]string{"tags", "--set", "role=web"}, 2, "", `--set: tag "role": key is reserved by shoal`, "reachable"},
		{[]string{"tags", "--delete", "maint"}, 2, "", `--delete "maint"`, "reachable"},
		{[]string{"tags", "--set", "=web"}, 2, "", "--set", "reachable"},
	} {
		out, errOut, code := shoal(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.errOut) ||
			(tc.notWant != "" && strings.Contains(out+errOut, tc.notWant)) {
			t.Errorf("shoal %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, out, errOut)
		}
	}

	version, _, code := shoal(t, "version")
	flag, _, fcode := shoal(t, "--version")
	if code != 0 || fcode != 0 || version != flag || !strings.HasPrefix(version, "shoal ") || strings.Count(version, "\n") != 1 {
		t.Errorf("shoal version = %q (exit %d), shoal --version = %q (exit %d): want the same line", version, code, flag, fcode)
	}

	// No port: the agent's (8946), not HTTP's 80.
	_, errOut, code := shoalEnv(t, []string{"SHOAL_HTTP_ADDR="}, "members", "--http-addr", "localhost")
	if code != 0 && (!strings.Contains(errOut, "localhost:8946") || strings.Contains(errOut, ":80:")) {
		t.Errorf("members --http-addr localhost: exit %d: %s", code, errOut)
	}

	out, _, _ := shoal(t, "agent", "--help")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--node ") && strings.Count(line, "default") != 1 {
			t.Errorf("agent --help shows --node with %d defaults: %q", strings.Count(line, "default"), line)
		}
	}
}
