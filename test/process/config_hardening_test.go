package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// writeConfig writes body to dir/name with exactly mode (the umask does
// not apply).
func writeConfig(t *testing.T, dir, name, body string, mode os.FileMode) string {
	return testkit.WriteFile(t, dir, name, body, mode)
}

// startArgs are the arguments of an agent that must refuse to start before
// binding anything: its listeners are on free or no addresses.
func startArgs(extra ...string) []string {
	return append([]string{"agent", "--bind", "127.0.0.1:0", "--http-addr", "", "--rpc-addr", ""}, extra...)
}

// TestConfigFileWithSecretsMustBePrivate: a config file holding encrypt or
// rpc_auth is refused, like a keyring file, when group or other can read
// it (exit 2 naming the file, its mode, the keys and chmod 600), or when
// another user than the agent's or root owns it; `--config-check` and the
// agent's start say the same. A private one, or one without secrets, passes.
func TestConfigFileWithSecretsMustBePrivate(t *testing.T) {
	key := newKey(t)
	dir := t.TempDir()
	token := "api_token_file: " + filepath.Join(dir, "api-token") + "\n"
	open := writeConfig(t, dir, "open.yaml", token+"encrypt: "+key+"\nrpc_auth: s3cret-rpc-token\n", 0o644)
	for _, args := range [][]string{{"agent", "--config-check", open}, startArgs("--config", open)} {
		stdout, stderr, code := shoal(t, args...)
		want := "config file " + open + ": holds the secret keys encrypt (line 2), rpc_auth (line 3) and has mode 0644"
		if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "chmod 600 "+open) || strings.Contains(stderr, key) {
			t.Errorf("%v: exit %d, want 2 with %q and chmod 600, without the key\nstdout %s\nstderr %s", args[:2], code, want, stdout, stderr)
		}
	}
	groupOnly := writeConfig(t, dir, "group.yaml", token+"encrypt: "+key+"\n", 0o640)
	if _, stderr, code := shoal(t, "agent", "--config-check", groupOnly); code != 2 || !strings.Contains(stderr, "secret key encrypt (line 2) and has mode 0640") {
		t.Errorf("0640: exit %d\n%s", code, stderr)
	}
	// A serf config's encrypt_key is the same secret.
	serf := writeConfig(t, dir, "serf.json", `{"encrypt_key": "`+key+`", "api_token_file": "`+filepath.Join(dir, "api-token")+`"}`, 0o644)
	if _, stderr, code := shoal(t, "agent", "--config-check", serf); code != 2 || !strings.Contains(stderr, "secret key encrypt (line 1) and has mode 0644") {
		t.Errorf("serf encrypt_key 0644: exit %d\n%s", code, stderr)
	}

	private := writeConfig(t, dir, "private.yaml", token+"encrypt: "+key+"\nrpc_auth: s3cret-rpc-token\n", 0o600)
	if stdout, stderr, code := shoal(t, "agent", "--config-check", private); code != 0 || !strings.Contains(stdout, "is valid") {
		t.Errorf("0600: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	noSecrets := writeConfig(t, dir, "plain.yaml", token+"insecure_no_encryption: true\nrpc_auth: \"\"\n", 0o644)
	if stdout, stderr, code := shoal(t, "agent", "--config-check", noSecrets); code != 0 || !strings.Contains(stdout, "is valid") {
		t.Errorf("0644 without secrets: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PASSED (the owner part): chown to another user needs root")
	}
	foreign := writeConfig(t, dir, "foreign.yaml", token+"encrypt: "+key+"\n", 0o600)
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := shoal(t, "agent", "--config-check", foreign); code != 2 || !strings.Contains(stderr, "config file "+foreign+": holds the secret key encrypt (line 2) and is owned by uid 65534") {
		t.Errorf("0600 owned by nobody: exit %d\n%s", code, stderr)
	}
}

// asNobodyEnv runs the shoal CLI as uid/gid 65534 with exactly env (no
// HOME unless given).
func asNobodyEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", shoalBin(t)}, args...)
	cmd := exec.CommandContext(ctx, "setpriv", argv...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	return run(t, cmd)
}

// TestStateDirMustBeTheAgents: the directory of the API token file, the
// fallback $TMPDIR/shoal-UID of a user without a home or a configured one,
// is refused (exit 2 naming it, its owner and mode) when another user owns
// it or group or other may write in it: a directory another user
// pre-created with mode 0777 must not receive the token.
func TestStateDirMustBeTheAgents(t *testing.T) {
	needSetpriv(t, "chowns directories and runs the agent")
	tmp, err := os.MkdirTemp("", "shoal-statedir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil { // nobody may look inside
		t.Fatal(err)
	}
	env := []string{"TMPDIR=" + tmp} // no HOME, XDG_STATE_HOME, STATE_DIRECTORY: the fallback
	fallback := filepath.Join(tmp, "shoal-65534")
	check := []string{"agent", "--config-check", "/dev/null", "--insecure-no-encryption"}

	// Pre-created by another user (root here), open to all.
	if err := os.Mkdir(fallback, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(fallback, 0o777)
	want := "state directory " + fallback + " is owned by uid 0 and has mode 0777"
	for _, args := range [][]string{check, startArgs("--insecure-no-encryption")} {
		stdout, stderr, code := asNobodyEnv(t, env, args...)
		if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "api_token_file") {
			t.Errorf("%v: exit %d, want 2 with %q\nstdout %s\nstderr %s", args[:2], code, want, stdout, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(fallback, "api-token")); err == nil {
		t.Error("the token was written into the 0777 directory")
	}
	// Owned by another non-root user, private to them.
	os.Chmod(fallback, 0o700)
	os.Chown(fallback, 1, 1)
	if _, stderr, code := asNobodyEnv(t, env, check...); code != 2 || !strings.Contains(stderr, "state directory "+fallback+" is owned by uid 1 and has mode 0700") {
		t.Errorf("fallback owned by uid 1: exit %d\n%s", code, stderr)
	}
	// The agent's own, private: fine; missing: fine (created 0700 at start).
	os.Chown(fallback, 65534, 65534)
	if stdout, stderr, code := asNobodyEnv(t, env, check...); code != 0 {
		t.Errorf("own 0700 fallback: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	os.RemoveAll(fallback)
	if stdout, stderr, code := asNobodyEnv(t, env, check...); code != 0 {
		t.Errorf("missing fallback: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	// A configured api_token_file: the same rule (root runs the agent here).
	conf := filepath.Join(t.TempDir(), "state")
	os.Mkdir(conf, 0o700)
	os.Chown(conf, 65534, 65534)
	tokenFlag := []string{"agent", "--config-check", "/dev/null", "--insecure-no-encryption", "--api-token-file", filepath.Join(conf, "api-token")}
	if _, stderr, code := shoal(t, tokenFlag...); code != 2 || !strings.Contains(stderr, "state directory "+conf+" is owned by uid 65534 and has mode 0700") {
		t.Errorf("configured, owned by nobody: exit %d\n%s", code, stderr)
	}
	os.Chown(conf, 0, 0)
	os.Chmod(conf, 0o770)
	if _, stderr, code := shoal(t, tokenFlag...); code != 2 || !strings.Contains(stderr, "is owned by uid 0 and has mode 0770") {
		t.Errorf("configured, group-writable: exit %d\n%s", code, stderr)
	}
	os.Chmod(conf, 0o750)
	if stdout, stderr, code := shoal(t, tokenFlag...); code != 0 {
		t.Errorf("configured, root's 0750: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// TestDevGossipStaysOnLoopback: --dev gossips unencrypted, so a bind
// address beyond loopback (":PORT" included) is refused, exit 2, unless
// the operator opts in with --insecure-no-encryption (or gives a key);
// 127.0.0.1:PORT is fine.
func TestDevGossipStaysOnLoopback(t *testing.T) {
	dir := t.TempDir()
	tok := []string{"--api-token-file", filepath.Join(dir, "api-token")}
	for _, bind := range []string{":7950", "0.0.0.0:7950", "10.1.2.3:7950"} {
		args := append([]string{"agent", "--dev", "--bind", bind, "--http-addr", "", "--rpc-addr", ""}, tok...)
		stdout, stderr, code := shoal(t, args...)
		want := `bind (--bind) "` + bind + `": --dev gossips unencrypted, so only on loopback`
		if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--insecure-no-encryption") {
			t.Errorf("--dev --bind %s: exit %d, want 2 with %q\nstdout %s\nstderr %s", bind, code, want, stdout, stderr)
		}
	}
	for _, args := range [][]string{
		{"agent", "--config-check", "/dev/null", "--dev", "--bind", "127.0.0.1:7950"},
		{"agent", "--config-check", "/dev/null", "--dev", "--bind", ":7950", "--insecure-no-encryption"},
		{"agent", "--config-check", "/dev/null", "--dev", "--bind", ":7950", "--encrypt", newKey(t)},
	} {
		if stdout, stderr, code := shoal(t, append(args, tok...)...); code != 0 {
			t.Errorf("%v: exit %d\nstdout %s\nstderr %s", args[3:], code, stdout, stderr)
		}
	}
}

// TestJoinAddressesChecked: a join address with an empty host, or a port
// that is not a number from 1 to 65535, is a configuration error (exit 2
// naming the key or flag), not an agent retrying forever or exiting 1 with
// strconv's message; a host without a port is fine.
func TestJoinAddressesChecked(t *testing.T) {
	dir := t.TempDir()
	base := []string{"agent", "--insecure-no-encryption", "--api-token-file", filepath.Join(dir, "api-token")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--join", "nonsense:abc"}, `join[0] (--join) "nonsense:abc": port must be a number from 1 to 65535`},
		{[]string{"--join", "10.0.0.1:7946,10.0.0.2:99999"}, `join[1] (--join) "10.0.0.2:99999": port must be a number from 1 to 65535`},
		{[]string{"--retry-join", ":7946", "--retry-max", "1"}, `join[0] (--join) ":7946": host must not be empty`},
		{[]string{"--join", "a/"}, `join[0] (--join) "a/": empty address`},
	} {
		for _, mode := range [][]string{{"--config-check", "/dev/null"}, startArgs()[1:]} {
			args := append(append(append([]string{}, base...), mode...), tc.args...)
			stdout, stderr, code := shoal(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "strconv") {
				t.Errorf("%v: exit %d, want 2 with %q\nstdout %s\nstderr %s", tc.args, code, tc.want, stdout, stderr)
			}
		}
	}
	cfg := writeConfig(t, dir, "join.yaml", "join:\n  - db1.example:7946\n  - 10.0.0.2:0\n", 0o600)
	if _, stderr, code := shoal(t, append(base, "--config-check", cfg)...); code != 2 || !strings.Contains(stderr, "config file "+cfg+", line 3: join[1] (--join) \"10.0.0.2:0\"") {
		t.Errorf("join in a file: exit %d\n%s", code, stderr)
	}
	ok := append(base, "--config-check", "/dev/null", "--join", "db1.example,10.0.0.1,[::1]:7946,node1/10.0.0.3:7946,::1")
	if stdout, stderr, code := shoal(t, ok...); code != 0 {
		t.Errorf("valid joins: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// TestConfigErrorsAllAtOnce: every problem of a configuration is reported
// in one run (file keys, environment, flags, the files it names), each line
// naming where it was set; a flag's error is not attributed to the file.
func TestConfigErrorsAllAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "bad.yaml", "insecure_no_encryption: true\napi_token_file: "+filepath.Join(dir, "api-token")+
		"\nprofil: fast\nleave_timeout: 5 seconds\njoin: [nonsense:abc]\nmysql:\n  addr: 127.0.0.1:3306\n  user: probe\n  password_file: "+
		filepath.Join(dir, "missing-pw")+"\n", 0o600)
	stdout, stderr, code := shoalEnv(t, []string{"SHOAL_RETRY_MAX=lots"}, "agent", "--config-check", cfg, "--retry-interval", "fast", "--log-level", "loud")
	if code != 2 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{
		"invalid configuration:\n",
		"config file " + cfg + `, line 3: unknown key "profil"; did you mean "profile"?`,
		"config file " + cfg + `, line 4: leave_timeout (--leave-timeout) "5 seconds": not a duration`,
		"config file " + cfg + `, line 5: join[0] (--join) "nonsense:abc": port must be`,
		"config file " + cfg + `, line 9: mysql.password_file (--mysql-password-file)`,
		`environment SHOAL_RETRY_MAX: retry_max (--retry-max) "lots": not an integer`,
		`retry_interval (--retry-interval) "fast": not a duration`,
		`log_level (--log-level) "loud": must be one of`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "(--retry-interval)") || strings.Contains(line, "(--log-level)") {
			if strings.Contains(line, "config file") {
				t.Errorf("a flag's error is attributed to the config file: %s", line)
			}
		}
	}
}

// TestProbeLimitsInConfig: the probe's limits are the configuration's:
// mysql.timeout 20s is refused by --config-check (exit 2) naming the key,
// the file and the line, not at start as "probe timeout"; so are an
// interval, rise or fall above the probe's maximum. An interval above 1 s
// no longer trips the probe's internal reconnect_max.
func TestProbeLimitsInConfig(t *testing.T) {
	dir := t.TempDir()
	head := "insecure_no_encryption: true\napi_token_file: " + filepath.Join(dir, "api-token") + "\nmysql:\n  addr: 127.0.0.1:3306\n  user: probe\n"
	for _, tc := range []struct{ body, want string }{
		{"  timeout: 20s\n", `, line 6: mysql.timeout (--mysql-timeout) "20s": must be from 10ms to 10s`},
		{"  interval: 2m\n", `, line 6: mysql.interval (--mysql-interval) "2m0s": must be from 50ms to 1m`},
		{"  rise: 101\n", `, line 6: mysql.rise (--mysql-rise) "101": must be from 1 to 100`},
		{"  fall: 1000\n", `, line 6: mysql.fall (--mysql-fall) "1000": must be from 1 to 100`},
	} {
		cfg := writeConfig(t, dir, "probe.yaml", head+tc.body, 0o600)
		for _, args := range [][]string{{"agent", "--config-check", cfg}, startArgs("--config", cfg)} {
			stdout, stderr, code := shoal(t, args...)
			if code != 2 || !strings.Contains(stderr, "config file "+cfg+tc.want) || strings.Contains(stderr, "probe ") {
				t.Errorf("%s %v: exit %d, want 2 with %q\nstdout %s\nstderr %s", strings.TrimSpace(tc.body), args[:2], code, tc.want, stdout, stderr)
			}
		}
	}
	cfg := writeConfig(t, dir, "slow.yaml", head+"  interval: 2s\n", 0o600)
	if stdout, stderr, code := shoal(t, "agent", "--config-check", cfg); code != 0 {
		t.Errorf("mysql.interval 2s: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// TestNodeHelpOneDefault: --help states --node's default once, in words.
func TestNodeHelpOneDefault(t *testing.T) {
	out, _, _ := shoal(t, "agent", "--help")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--node string") {
			if strings.Count(line, "default") != 1 || !strings.Contains(line, "default: this host's name") {
				t.Errorf("--node help: %s", line)
			}
			return
		}
	}
	t.Errorf("--help has no --node line:\n%s", out)
}
