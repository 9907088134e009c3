package process

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// fleetFiles are the files `shoal keygen --fleet` writes, with their modes.
var fleetFiles = map[string]os.FileMode{"keyring.json": 0o600, "consensus-keyring.json": 0o600, "term-key": 0o644}

// keygenFleet runs `shoal keygen --fleet dir` and returns the term key,
// the last line of its output.
func keygenFleet(t *testing.T, dir string) string {
	t.Helper()
	out, errOut, code := shoal(t, "keygen", "--fleet", dir)
	if code != 0 {
		t.Fatalf("shoal keygen --fleet %s: exit %d\n%s%s", dir, code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// readRing reads a keyring file's one key, checking it is 32 bytes.
func readRing(t *testing.T, path string) string {
	t.Helper()
	var keys []string
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &keys)
	}
	if err != nil || len(keys) != 1 {
		t.Fatalf("%s: %v, keys %q: want a JSON array of one key", path, err, keys)
	}
	if raw, err := base64.StdEncoding.DecodeString(keys[0]); err != nil || len(raw) != 32 {
		t.Fatalf("%s: key of %d bytes (%v), want 32", path, len(raw), err)
	}
	return keys[0]
}

// TestKeygenFleet: `shoal keygen --fleet DIR` creates DIR (mode 0700) with
// a gossip keyring and a consensus keyring (mode 0600, two different
// keys), the term key (the consensus keyring's, as `shoal term-key`
// prints it), says which file goes to which host and ends with the term
// key. Run again it refuses to replace them (exit 2, nothing changed);
// --force replaces them. Bad input exits 2 and writes nothing. The files
// are what agents start with: a db agent's configuration with both
// keyrings and an app agent's with the gossip keyring and the term key
// pass --config-check, without the warning of a db agent without terms.
func TestKeygenFleet(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "fleet", "keys")
	out, errOut, code := shoal(t, "keygen", "--fleet", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("keygen --fleet: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"keyring.json", "consensus-keyring.json", "db hosts", "app hosts",
		"Never copy consensus-keyring.json to an app host", "consensus.term_key"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v, mode %v, want 0700", dir, err, st.Mode().Perm())
	}
	for name, mode := range fleetFiles {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v, want mode %#o", name, err, mode)
		}
	}
	gossip, cons := readRing(t, filepath.Join(dir, "keyring.json")), readRing(t, filepath.Join(dir, "consensus-keyring.json"))
	if gossip == cons {
		t.Fatal("the gossip key and the consensus key are the same key")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	termKey := lines[len(lines)-1]
	printed, _, code := shoal(t, "term-key", "--keyring-file", filepath.Join(dir, "consensus-keyring.json"))
	file, _ := os.ReadFile(filepath.Join(dir, "term-key"))
	if code != 0 || strings.TrimSpace(printed) != termKey || strings.TrimSpace(string(file)) != termKey {
		t.Fatalf("term key: last line %q, term-key file %q, shoal term-key %q (exit %d): want the same", termKey, file, printed, code)
	}
	if strings.Contains(out, gossip) || strings.Contains(out, cons) {
		t.Fatal("the output shows a secret key")
	}

	// Again: refused, nothing changed.
	out, errOut, code = shoal(t, "keygen", "--fleet", dir)
	want := "already holds keyring.json, consensus-keyring.json, term-key: refusing to replace keys a fleet may already use (--force replaces them)"
	if code != 2 || !strings.Contains(errOut, want) || out != "" {
		t.Fatalf("second keygen --fleet: exit %d, want 2 with %q\nstdout %s\nstderr %s", code, want, out, errOut)
	}
	if readRing(t, filepath.Join(dir, "keyring.json")) != gossip || readRing(t, filepath.Join(dir, "consensus-keyring.json")) != cons {
		t.Fatal("a refused keygen --fleet changed the keys")
	}
	// One file left over is enough to refuse, and the others are not written.
	partial := filepath.Join(base, "partial")
	if err := os.Mkdir(partial, 0o700); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, partial, "term-key", "old\n", 0o644)
	if _, errOut, code := shoal(t, "keygen", "--fleet", partial); code != 2 || !strings.Contains(errOut, "already holds term-key:") {
		t.Fatalf("keygen --fleet over a term-key: exit %d, stderr %s", code, errOut)
	}
	if ents, _ := os.ReadDir(partial); len(ents) != 1 {
		t.Fatalf("a refused keygen --fleet wrote files: %v", ents)
	}

	// --force replaces every file, with the same modes.
	newTerm := ""
	if out, errOut, code := shoal(t, "keygen", "--fleet", dir, "--force"); code != 0 {
		t.Fatalf("keygen --fleet --force: exit %d\n%s%s", code, out, errOut)
	} else {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		newTerm = lines[len(lines)-1]
	}
	if readRing(t, filepath.Join(dir, "keyring.json")) == gossip || readRing(t, filepath.Join(dir, "consensus-keyring.json")) == cons || newTerm == termKey {
		t.Fatal("--force kept the old keys")
	}
	for name, mode := range fleetFiles {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != mode {
			t.Fatalf("after --force, %s: %v, want mode %#o", name, err, mode)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != len(fleetFiles) {
		t.Fatalf("temporary files left in %s: %v", dir, ents)
	}

	// Bad input: exit 2, a message naming what is wrong.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	notDir := testkit.WriteFile(t, base, "file", "x", 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keygen", "--fleet", open}, "--fleet " + open + ": mode 0755 lets others in, and it will hold secret keys"},
		{[]string{"keygen", "--fleet", notDir}, "--fleet " + notDir + ": not a directory"},
		{[]string{"keygen", "--fleet", ""}, "--fleet: want a directory, got an empty path"},
		{[]string{"keygen", "--fleet"}, "flag needs an argument: --fleet"},
		{[]string{"keygen", "--force"}, "--force only goes with --fleet DIR"},
		{[]string{"keygen", filepath.Join(base, "x")}, "want no arguments (the directory is --fleet DIR)"},
	} {
		out, errOut, code := shoal(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("shoal %q: exit %d, want 2 with %q\nstdout %s\nstderr %s", tc.args, code, tc.want, out, errOut)
		}
	}
	if ents, _ := os.ReadDir(open); len(ents) != 0 {
		t.Errorf("keygen --fleet wrote into a directory it refused: %v", ents)
	}

	// The files are what the agents take: a db agent with both keyrings, an
	// app agent with the gossip keyring and the term key.
	cnf := testkit.WriteFile(t, base, "my.cnf", "[client]\nuser = shoal\npassword = x\n", 0o600)
	token := "api_token_file: " + filepath.Join(base, "api-token") + "\n"
	db := testkit.WriteFile(t, base, "db.yaml", token+"keyring_file: "+filepath.Join(dir, "keyring.json")+
		"\nmysql: {addr: 127.0.0.1:3306, option_file: "+cnf+"}\nconsensus:\n  keyring_file: "+filepath.Join(dir, "consensus-keyring.json")+
		"\n  data_dir: "+filepath.Join(base, "raft")+"\n", 0o600)
	app := testkit.WriteFile(t, base, "app.yaml", token+"keyring_file: "+filepath.Join(dir, "keyring.json")+
		"\nconsensus:\n  term_key: "+newTerm+"\n", 0o600)
	for _, cfg := range []string{db, app} {
		out, errOut, code := shoal(t, "agent", "--config-check", cfg)
		if code != 0 || !strings.Contains(out, "is valid") || strings.Contains(errOut, "no writer term") {
			t.Errorf("--config-check %s: exit %d\nstdout %s\nstderr %s", filepath.Base(cfg), code, out, errOut)
		}
	}
}
