package process

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// noTermWarn starts the warning of a db agent without writer terms.
const noTermWarn = `level=WARN msg="no writer term: this db agent has no consensus key, so its cluster's writes follow the old rule (any single writable server`

// poolUnsafe is the unsafe mark of cluster main in `shoal pool --format
// json` of the agent at httpAddr, and whether the cluster is in the pool.
func poolUnsafe(t *testing.T, httpAddr string) (unsafe string, listed bool) {
	t.Helper()
	out, errOut, code := shoal(t, "pool", "--http-addr", httpAddr, "--format", "json")
	if code != 0 {
		t.Fatalf("shoal pool: exit %d %s", code, errOut)
	}
	var p struct {
		Clusters []struct {
			Name   string
			Unsafe string
			Term   *struct{ Term uint64 }
		}
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("shoal pool --format json: %v\n%s", err, out)
	}
	for _, c := range p.Clusters {
		if c.Name == "main" {
			return c.Unsafe, true
		}
	}
	return "", false
}

// TestDBAgentWithoutWriterTerms (issue 36, safe by default): a db agent
// without a consensus key warns at start that its cluster's writes follow
// the old rule and how to turn writer terms on, --config-check says the
// same, and `shoal pool` marks the cluster "unsafe: no writer term" in
// the table and the JSON. With consensus.disabled it does not warn, and
// the pool still says unsafe. A db agent with the consensus keyring of
// `shoal keygen --fleet` neither warns nor is marked: it votes.
func TestDBAgentWithoutWriterTerms(t *testing.T) {
	key := newKey(t)
	db := func(name string, extra ...string) *proc {
		return startAgent(t, name, key, append([]string{"--mysql-addr", ports.Free(t), "--mysql-user", "shoal", "--cluster", "main"}, extra...)...)
	}

	off := db("nt1")
	testkit.WaitFor(t, 20*time.Second, "nt1's warning", func() bool { return strings.Contains(off.log.String(), noTermWarn) })
	for _, want := range []string{"shoal keygen --fleet DIR", "consensus.keyring_file", "consensus.disabled: true"} {
		if !strings.Contains(off.log.String(), want) {
			t.Errorf("nt1's warning lacks %q:\n%s", want, off.log.String())
		}
	}
	testkit.WaitFor(t, 20*time.Second, "main in nt1's pool", func() bool { _, ok := poolUnsafe(t, off.http); return ok })
	if u, _ := poolUnsafe(t, off.http); u != "no writer term" {
		t.Errorf("nt1's pool JSON: unsafe %q, want \"no writer term\"", u)
	}
	if out, _, _ := shoal(t, "pool", "--http-addr", off.http); !strings.Contains(out, "cluster main\nunsafe: no writer term (") {
		t.Errorf("nt1's pool table does not mark main unsafe:\n%s", out)
	}

	// --config-check warns too, and still passes.
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "db.yaml", "encrypt: "+key+"\napi_token_file: "+filepath.Join(dir, "api-token")+
		"\nmysql: {addr: 127.0.0.1:3306, user: shoal}\n", 0o600)
	out, errOut, code := shoal(t, "agent", "--config-check", cfg)
	if code != 0 || !strings.Contains(out, "is valid") || !strings.Contains(errOut, "warning: no writer term: this db agent has no consensus key") {
		t.Errorf("--config-check of a db agent without consensus: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	out, errOut, code = shoal(t, "agent", "--config-check", cfg, "--consensus-disabled")
	if code != 0 || strings.Contains(errOut, "no writer term") {
		t.Errorf("--config-check --consensus-disabled: exit %d, want 0 without the warning\nstdout %s\nstderr %s", code, out, errOut)
	}

	// Opted out: no warning; the cluster is no safer for it.
	quiet := db("nt2", "--consensus-disabled", "--join", off.bind)
	testkit.WaitFor(t, 20*time.Second, "nt2 started", func() bool { return strings.Contains(quiet.log.String(), "agent started") })
	if strings.Contains(quiet.log.String(), "no writer term") {
		t.Errorf("nt2 (--consensus-disabled) warned:\n%s", quiet.log.String())
	}
	if u, _ := poolUnsafe(t, quiet.http); u != "no writer term" {
		t.Errorf("nt2's pool: unsafe %q, want \"no writer term\"", u)
	}
	quiet.cmd.Process.Kill()
	off.cmd.Process.Kill()

	// Consensus on, with the files keygen --fleet wrote: no warning, and
	// once its voter tag is out, no unsafe mark.
	keys := filepath.Join(t.TempDir(), "keys")
	keygenFleet(t, keys)
	on := startAgent(t, "nt3", key, "--mysql-addr", ports.Free(t), "--mysql-user", "shoal", "--cluster", "main",
		"--consensus-keyring-file", filepath.Join(keys, "consensus-keyring.json"), "--consensus-data-dir", filepath.Join(t.TempDir(), "raft"),
		"--consensus-bind", ports.Free(t), "--consensus-bootstrap-expect", "1")
	testkit.WaitFor(t, 20*time.Second, "nt3's raft voter", func() bool { return strings.Contains(on.log.String(), "consensus voter started") })
	testkit.WaitFor(t, 20*time.Second, "main in nt3's pool, not unsafe", func() bool {
		u, ok := poolUnsafe(t, on.http)
		return ok && u == ""
	})
	if strings.Contains(on.log.String(), "no writer term") {
		t.Errorf("nt3 (consensus on) warned:\n%s", on.log.String())
	}
	if out, _, _ := shoal(t, "pool", "--http-addr", on.http); strings.Contains(out, "unsafe") {
		t.Errorf("nt3's pool table says unsafe:\n%s", out)
	}
}
