package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestConfigCheckChecksWhatStartChecks runs the real binary: for each of the
// issue's reproductions `shoal agent --config-check F` exits 2 naming the
// file, the line, the key and its flag, and so does `shoal agent --config F`
// (the same checks), before binding anything.
func TestConfigCheckChecksWhatStartChecks(t *testing.T) {
	key := newKey(t)
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string { return testkit.WriteFile(t, dir, name, body, mode) }
	pw := write("pw", "secret\n", 0o644)
	missing := filepath.Join(dir, "missing")
	head := "encrypt: " + key + "\napi_token_file: " + filepath.Join(dir, "api-token") + "\n"
	for _, tc := range []struct{ name, body, want string }{
		{"mysql without user", head + "mysql: {addr: 127.0.0.1:3306}\n", `line 3: mysql.user (--mysql-user) "": required`},
		{"password file 0644", head + "mysql:\n  addr: 127.0.0.1:3306\n  user: probe\n  password_file: " + pw + "\n",
			`line 6: mysql.password_file (--mysql-password-file) "` + pw + `": read mysql password: ` + pw + ` has mode 0644`},
		{"option file missing", head + "mysql:\n  option_file: " + missing + "\n",
			`line 4: mysql.option_file (--mysql-option-file) "` + missing + `": read option file`},
		{"keyring missing, no encrypt", "api_token_file: " + filepath.Join(dir, "api-token") + "\nkeyring_file: " + missing + "\n",
			`line 2: keyring_file (--keyring-file) "` + missing + `": does not exist, and no encrypt key`},
		{"duration in words", head + "leave_timeout: 5 seconds\n", `line 3: leave_timeout (--leave-timeout) "5 seconds": not a duration`},
		{"misspelt key", head + "profil: fast\n", `line 3: unknown key "profil"; did you mean "profile"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := write(strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.body, 0o600)
			want := "config file " + cfg
			for _, args := range [][]string{
				{"agent", "--config-check", cfg},
				{"agent", "--config", cfg, "--bind", "127.0.0.1:0", "--http-addr", "", "--rpc-addr", ""},
			} {
				stdout, stderr, code := shoal(t, args...)
				if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, tc.want) || strings.Contains(stdout, "is valid") {
					t.Errorf("%v: exit %d, want 2 and %q naming %s\nstdout %s\nstderr %s", args[:2], code, tc.want, want, stdout, stderr)
				}
			}
		})
	}
}

// TestConfigCheckSerfConfig: a stock serf agent's JSON config file passes
// --config-check with one notice per serf key naming the shoal key; a serf
// key shoal has no equivalent for, set to something shoal would not do,
// exits 2 saying so.
func TestConfigCheckSerfConfig(t *testing.T) {
	key := newKey(t)
	dir := t.TempDir()
	serf := `{
  "node_name": "web1",
  "encrypt_key": "` + key + `",
  "bind": "127.0.0.1:7946",
  "rpc_addr": "127.0.0.1:7373",
  "log_level": "INFO",
  "tags": {"dc": "east"},
  "tags_file": "` + filepath.Join(dir, "tags.json") + `",
  "start_join": ["10.0.0.6"],
  "retry_join": ["10.0.0.7"],
  "snapshot_path": "` + filepath.Join(dir, "snapshot") + `",
  "rejoin_after_leave": true,
  "reconnect_timeout": "12h",
  "leave_on_terminate": true,
  "event_handlers": ["member-join=/bin/true"]
}
`
	p := filepath.Join(dir, "serf.json")
	os.WriteFile(p, []byte(serf), 0o600)
	stdout, stderr, code := shoal(t, "agent", "--config-check", p, "--api-token-file", filepath.Join(dir, "api-token"))
	if code != 0 || !strings.Contains(stdout, "configuration "+p+" is valid") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{
		`notice: config file ` + p + `, line 2: serf key "node_name" read as shoal's "node" (--node)`,
		`line 3: serf key "encrypt_key" read as shoal's "encrypt" (--encrypt)`,
		`line 9: serf key "start_join" read as shoal's "join" (--join)`,
		`line 13: serf key "reconnect_timeout" read as shoal's "gossip.reconnect_timeout" (--reconnect-timeout)`,
		`line 14: serf key "leave_on_terminate" ignored: shoal always leaves the cluster gracefully on SIGTERM`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	bad := filepath.Join(dir, "serf-mdns.json")
	os.WriteFile(bad, []byte(strings.Replace(serf, `"log_level"`, `"discover": "cluster1", "log_level"`, 1)), 0o600)
	_, stderr, code = shoal(t, "agent", "--config-check", bad, "--api-token-file", filepath.Join(dir, "api-token"))
	if code != 2 || !strings.Contains(stderr, "config file "+bad+`, line 6: serf key "discover" has no shoal equivalent`) {
		t.Errorf("exit %d, want 2 naming discover:\n%s", code, stderr)
	}
}
