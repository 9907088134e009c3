package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var sampleMembers = []client.Member{
	{Name: "db1", Addr: "10.0.0.11", Port: 7946, Status: "alive", Tags: map[string]string{"role": "db", "cluster": "main"}},
	{Name: "db2-with-a-long-name", Addr: "10.0.0.12", Port: 7946, Status: "failed", Tags: map[string]string{"role": "db"}},
	{Name: "app1", Addr: "10.0.1.5", Port: 7947, Status: "left", Tags: map[string]string{}},
	{Name: "evil", Addr: "10.0.1.6", Port: 7946, Status: "alive", Tags: map[string]string{"x": "a\tb\nc\x1b[31m"}},
}

func TestMembersGolden(t *testing.T) {
	for _, tc := range []struct {
		file, format string
		cols         []string
	}{
		{"members.table", "table", nil},
		{"members.columns", "table", []string{"role", "cluster"}},
		{"members.json", "json", nil},
	} {
		var b bytes.Buffer
		if err := writeMembers(&b, sampleMembers, tc.format, tc.cols); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
	var b bytes.Buffer
	if err := writeMembers(&b, nil, "json", nil); err != nil || b.String() != "{\n  \"members\": []\n}\n" {
		t.Fatalf("empty json = %q, %v", b.String(), err)
	}
}

func TestInfoGolden(t *testing.T) {
	in := &client.Info{
		Node: "db1", Addr: "10.0.0.11:7946", Status: "alive", Version: "1.2.3", GoVersion: "go1.26",
		Uptime: "1h0m0s", Tags: map[string]string{"role": "db"}, Encrypted: true, KeyringFile: "/var/lib/shoal/keyring",
		Started: time.Unix(0, 0).UTC(),
		Join:    client.JoinStatus{Addrs: []string{"10.0.0.12"}, Joined: false, Attempts: 3, LastError: "no installed keys could decrypt the message"},
		Profile: "fast", Timings: client.Timings{ProbeInterval: "150ms", ProbeTimeout: "100ms", SuspicionMult: 3, GossipInterval: "50ms", RetransmitMult: 8},
		Serf:    map[string]string{"members": "3", "failed": "1", "left": "0"},
		RPCAddr: "127.0.0.1:7373",
	}
	var b bytes.Buffer
	if err := writeInfo(&b, in); err != nil {
		t.Fatal(err)
	}
	golden(t, "info.table", b.Bytes())
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"version"}, ExitOK, "shoal "},
		{[]string{"keygen"}, ExitOK, "="},
		{[]string{"members", "--format", "yaml"}, ExitUsage, `--format "yaml": want table or json`},
		{[]string{"members", "--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{[]string{"force-leave"}, ExitUsage, "want one node name"},
		{[]string{"keys", "install", "c2hvcnQ="}, ExitUsage, "keys install: KEY argument: key is 5 bytes; must be 16, 24 or 32 bytes"},
		{[]string{"members", "--http-addr", "127.0.0.1:1"}, ExitError, "no shoal agent reachable at 127.0.0.1:1"},
		{[]string{"agent", "--node", "x", "--profile", "turbo"}, ExitUsage, `profile (--profile) "turbo"`},
		{[]string{"agent", "--node", "x"}, ExitUsage, "gossip encryption is required"},
	} {
		var out, errb bytes.Buffer
		code := Execute(t.Context(), tc.args, &out, &errb)
		if code != tc.code || !bytes.Contains(append(out.Bytes(), errb.Bytes()...), []byte(tc.want)) {
			t.Errorf("%v: exit %d (want %d)\nstdout %s\nstderr %s\nwant %q", tc.args, code, tc.code, out.String(), errb.String(), tc.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("node: db1\ninsecure_no_encryption: true\nprofile: fast\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("node: db1\nprofle: fast\n"), 0o600)
	var out, errb bytes.Buffer
	if code := Execute(t.Context(), []string{"agent", "--config-check", good}, &out, &errb); code != 0 || !bytes.Contains(out.Bytes(), []byte("is valid")) {
		t.Fatalf("good: %d %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := Execute(t.Context(), []string{"agent", "--config-check", bad}, &out, &errb); code != ExitUsage || !bytes.Contains(errb.Bytes(), []byte(`line 2: unknown key "profle"`)) {
		t.Fatalf("bad: %d %s %s", code, out.String(), errb.String())
	}
}
