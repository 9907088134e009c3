package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestExitCodes: 0 success, 1 failure, 2 usage (README "CLI", shoal
// --help), from the real binary: a command line, request or configuration
// the user got wrong is 2, however far it got before that was found.
func TestExitCodes(t *testing.T) {
	key := newKey(t)
	a := startAgent(t, "codes", key)
	testkit.WaitFor(t, 10*time.Second, "agent up", func() bool { return members(t, a.http)["codes"].Status == "alive" })

	dir := t.TempDir()
	badTags := filepath.Join(dir, "tags.json")
	if err := os.WriteFile(badTags, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	// agent runs an agent that must refuse to start.
	agent := func(extra ...string) []string {
		return append([]string{"agent", "--node", "x", "--bind", ports.Free(t), "--http-addr", ports.Free(t),
			"--rpc-addr", "", "--api-token-file", filepath.Join(t.TempDir(), "tok")}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		msg  string
	}{
		{"version", []string{"version"}, nil, 0, ""},
		{"members", []string{"members", "--http-addr", a.http}, nil, 0, ""},
		{"no agent", []string{"members", "--http-addr", ports.Free(t)}, nil, 1, "no shoal agent reachable"},
		{"unknown command", []string{"frobnicate"}, nil, 2, `unknown command "frobnicate" for "shoal"`},
		{"unknown subcommand", []string{"hooks", "frobnicate"}, nil, 2, `unknown command "frobnicate" for "shoal hooks"`},
		{"unknown flag", []string{"members", "--frobnicate"}, nil, 2, "unknown flag: --frobnicate"},
		{"bad status regex", []string{"members", "--http-addr", a.http, "--status", "("}, nil, 2, `--status "(": bad regular expression: missing closing )`},
		{"bad name regex", []string{"members", "--http-addr", a.http, "--name", "a["}, nil, 2, `--name "a["`},
		{"bad tag regex", []string{"members", "--http-addr", a.http, "--tag", "role=*"}, nil, 2, `--tag role "*"`},
		{"bad hook event", []string{"hooks", "test", "bogus-event", "--http-addr", a.http}, nil, 2, `unknown event "bogus-event"`},
		{"hook user without name", []string{"hooks", "test", "user", "--http-addr", a.http}, nil, 2, "--name is required"},
		{"switchover without --to", []string{"switchover", "--http-addr", a.http}, nil, 2, "--to NODE is required"},
		{"switchover bad wait", []string{"switchover", "--to", "db2", "--catch-up", "3m", "--http-addr", a.http}, nil, 2, "--catch-up 3m0s: must be from 1s to 2m0s"},
		{"switchover zero wait", []string{"switchover", "--to", "db2", "--applied", "0s", "--http-addr", a.http}, nil, 2, "--applied 0s: must be from 1s to 2m0s"},
		{"switchover unknown node", []string{"switchover", "--to", "nosuch", "--http-addr", a.http}, nil, 2, `to "nosuch": not a db member of any cluster`},
		{"switchover unknown cluster", []string{"switchover", "--to", "codes", "--cluster", "nope", "--http-addr", a.http}, nil, 2, `cluster "nope": no such cluster`},
		{"missing keyring", agent("--keyring-file", filepath.Join(dir, "none", "keyring")), nil, 2, "keyring_file"},
		{"corrupt tags file", agent("--tags-file", badTags), []string{"SHOAL_ENCRYPT=" + key}, 2, `tags_file (--tags-file) "` + badTags + `"`},
		{"missing mysql option file", agent("--role", "db", "--mysql-option-file", filepath.Join(dir, "none.cnf")), []string{"SHOAL_ENCRYPT=" + key}, 2, "invalid configuration"},
		{"missing tls certificate", agent("--http-tls-cert-file", filepath.Join(dir, "none.crt"), "--http-tls-key-file", filepath.Join(dir, "none.key")),
			[]string{"SHOAL_ENCRYPT=" + key}, 2, "http_tls_cert_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := shoalEnv(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("shoal %s: exit %d, want %d with %q; stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.msg, errOut)
			}
		})
	}
}
