package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// consKey is a 32-byte consensus key; consKey2 another.
const (
	consKey  = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	consKey2 = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVpBQkNERUY="
)

// dbYAML makes a db agent (a MySQL target is configured).
const dbYAML = "mysql: {addr: 127.0.0.1:3306}\n"

// TestConsensusDefaults: consensus is on exactly with a key or a keyring
// file; a db agent then votes, an app agent does not unless told; the
// addresses follow the gossip ones and the data directory the keyring
// file.
func TestConsensusDefaults(t *testing.T) {
	ring := filepath.Join(t.TempDir(), "consensus.json")
	for _, tc := range []struct {
		name, yaml               string
		on, voter                bool
		bind, advertise, dataDir string
	}{
		{"off, db", dbYAML, false, false, "0.0.0.0:7950", "0.0.0.0:7950", ""},
		{"off, app", "", false, false, "0.0.0.0:7950", "0.0.0.0:7950", ""},
		{"on, db", dbYAML + "bind: 10.0.0.1\nconsensus: {keyring_file: " + ring + "}\n",
			true, true, "10.0.0.1:7950", "10.0.0.1:7950", filepath.Join(filepath.Dir(ring), "raft")},
		{"on, app", "bind: 10.0.0.1:7000\nadvertise: 192.0.2.1:7001\nconsensus: {key: " + consKey + "}\n",
			true, false, "10.0.0.1:7950", "192.0.2.1:7950", ""},
		{"on, app, witness", "consensus: {keyring_file: " + ring + ", voter: true, bind: 10.0.0.1:8000, data_dir: /d}\n",
			true, true, "10.0.0.1:8000", "10.0.0.1:8000", "/d"},
		{"on, db, not a voter", dbYAML + "consensus: {key: " + consKey + ", voter: false}\n",
			true, false, "0.0.0.0:7950", "0.0.0.0:7950", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, []string{"--config", writeFile(t, "node: n1\ninsecure_no_encryption: true\n"+tc.yaml)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, h := c.Consensus, c.ConsensusHost()
			if s.Enabled() != tc.on || c.ConsensusVoter() != tc.voter {
				t.Errorf("Enabled = %v, ConsensusVoter = %v; want %v, %v", s.Enabled(), c.ConsensusVoter(), tc.on, tc.voter)
			}
			if s.BindAddr(h) != tc.bind || s.AdvertiseAddr(h) != tc.advertise || s.DataDirPath() != tc.dataDir {
				t.Errorf("bind %q, advertise %q, data dir %q; want %q, %q, %q",
					s.BindAddr(h), s.AdvertiseAddr(h), s.DataDirPath(), tc.bind, tc.advertise, tc.dataDir)
			}
			if s.BootstrapExpect != 3 || s.HeartbeatTimeout.String() != "1s" || s.ElectionTimeout.String() != "1s" || s.LeaderLeaseTimeout.String() != "500ms" {
				t.Errorf("timings %+v", s)
			}
		})
	}
}

// TestConsensusErrors: every refused consensus setting names its key, its
// flag and the file line; the key is never shown.
func TestConsensusErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"key not base64", "consensus:\n  key: \"not base64!\"\n",
			`line 4: consensus.key (--consensus-key) "not ...": not valid base64`},
		{"key of 16 bytes", "consensus:\n  key: MDEyMzQ1Njc4OWFiY2RlZg==\n",
			`line 4: consensus.key (--consensus-key) "MDEy...": key is 16 bytes; must be 32 bytes (use shoal keygen)`},
		{"disabled with a key", "consensus:\n  key: " + consKey + "\n  disabled: true\n",
			`line 5: consensus.disabled (--consensus-disabled) "true": consensus is on (key or keyring_file is given)`},
		{"voter without key", "consensus:\n  voter: true\n",
			`line 4: consensus.voter (--consensus-voter) "true": a voter needs the consensus key`},
		{"bad bind", "consensus:\n  key: " + consKey + "\n  bind: db1:7950\n",
			`line 5: consensus.bind (--consensus-bind) "db1:7950": host "db1" must be an IP address`},
		{"bad port", "consensus:\n  key: " + consKey + "\n  bind: 10.0.0.1:0\n",
			`line 5: consensus.bind (--consensus-bind) "10.0.0.1:0": port must be a number from 1 to 65535`},
		{"bad advertise port", "consensus:\n  key: " + consKey + "\n  advertise: 10.0.0.1:70000\n",
			`line 5: consensus.advertise (--consensus-advertise) "10.0.0.1:70000": port must be a number from 1 to 65535`},
		{"gossip port", "bind: 10.0.0.1:7950\nconsensus:\n  key: " + consKey + "\n",
			`consensus.bind (--consensus-bind) "10.0.0.1:7950": is the gossip bind address (10.0.0.1:7950)`},
		{"bootstrap_expect 0", "consensus:\n  bootstrap_expect: 0\n",
			`line 4: consensus.bootstrap_expect (--consensus-bootstrap-expect) "0": must be from 1 to 9`},
		{"bootstrap_expect 10", "consensus:\n  bootstrap_expect: 10\n",
			`line 4: consensus.bootstrap_expect (--consensus-bootstrap-expect) "10": must be from 1 to 9`},
		{"leader lease over heartbeat", "consensus:\n  heartbeat_timeout: 200ms\n  leader_lease_timeout: 300ms\n",
			`line 5: consensus.leader_lease_timeout (--consensus-leader-lease-timeout) "300ms": must be at most heartbeat_timeout (200ms)`},
		{"heartbeat too long", "consensus:\n  heartbeat_timeout: 2m\n",
			`line 4: consensus.heartbeat_timeout (--consensus-heartbeat-timeout) "2m0s": must be from 100ms to 1m`},
		{"data dir of a key-only voter", dbYAML + "consensus:\n  key: " + consKey + "\n",
			`consensus.keyring_file (--consensus-keyring-file) "": a voter keeps the consensus key in a keyring file`},
		{"data dir of a key-only witness", "consensus:\n  key: " + consKey + "\n  voter: true\n  data_dir: /d\n",
			`consensus.keyring_file (--consensus-keyring-file) "": a voter keeps the consensus key in a keyring file`},
		{"not a duration", "consensus:\n  election_timeout: soon\n",
			`line 4: consensus.election_timeout (--consensus-election-timeout) "soon": not a duration`},
		{"unknown key", "consensus:\n  bootstrap_expected: 3\n", `line 4: unknown key "consensus.bootstrap_expected"; did you mean "consensus.bootstrap_expect"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "node: n1\ninsecure_no_encryption: true\n"+tc.yaml)
			_, err := load(t, []string{"--config", p}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
			if strings.Contains(err.Error(), consKey) {
				t.Fatalf("the key is shown: %v", err)
			}
			var fe *FieldError
			if !strings.Contains(tc.name, "unknown") && !errors.As(err, &fe) {
				t.Fatalf("%v is not a *FieldError", err)
			}
		})
	}
}

// TestConsensusPrecedence: the environment overrides the file, the flags
// override both, and a flag or variable can make a db agent a non-voter.
func TestConsensusPrecedence(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, "node: n1\ninsecure_no_encryption: true\n"+dbYAML+`consensus:
  keyring_file: `+dir+`/file.json
  bind: 10.0.0.1:7950
  advertise: 10.0.0.1:7950
  data_dir: /file
  bootstrap_expect: 5
  heartbeat_timeout: 2s
  election_timeout: 2s
  leader_lease_timeout: 1s
`)
	env := map[string]string{
		"SHOAL_CONSENSUS_KEY": consKey, "SHOAL_CONSENSUS_KEYRING_FILE": dir + "/env.json", "SHOAL_CONSENSUS_BIND": "10.0.0.2:7950",
		"SHOAL_CONSENSUS_ADVERTISE": "10.0.0.2:7950", "SHOAL_CONSENSUS_DATA_DIR": "/env", "SHOAL_CONSENSUS_BOOTSTRAP_EXPECT": "1",
		"SHOAL_CONSENSUS_VOTER": "false",
	}
	c, err := load(t, []string{"--config", p}, env)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Consensus
	if s.Key != consKey || s.KeyringFile != dir+"/env.json" || s.Bind != "10.0.0.2:7950" || s.Advertise != "10.0.0.2:7950" ||
		s.DataDir != "/env" || s.BootstrapExpect != 1 || c.ConsensusVoter() || s.HeartbeatTimeout.String() != "2s" {
		t.Fatalf("environment over file: %+v", s)
	}
	c, err = load(t, []string{"--config", p, "--consensus-keyring-file", dir + "/flag.json", "--consensus-bind", "10.0.0.3:7950",
		"--consensus-advertise", "10.0.0.3:7951", "--consensus-data-dir", "/flag", "--consensus-bootstrap-expect", "7",
		"--consensus-voter", "--consensus-heartbeat-timeout", "3s", "--consensus-election-timeout", "4s",
		"--consensus-leader-lease-timeout", "300ms"}, env)
	if err != nil {
		t.Fatal(err)
	}
	s = c.Consensus
	if s.KeyringFile != dir+"/flag.json" || s.Bind != "10.0.0.3:7950" || s.Advertise != "10.0.0.3:7951" || s.DataDir != "/flag" ||
		s.BootstrapExpect != 7 || !c.ConsensusVoter() || s.HeartbeatTimeout.String() != "3s" || s.ElectionTimeout.String() != "4s" ||
		s.LeaderLeaseTimeout.String() != "300ms" {
		t.Fatalf("flags over environment: %+v", s)
	}
	if _, err := load(t, []string{"--config", p, "--consensus-voter=maybe"}, nil); err == nil ||
		!strings.Contains(err.Error(), `consensus.voter (--consensus-voter) "maybe": not a boolean`) {
		t.Fatalf("--consensus-voter=maybe: %v", err)
	}
}

// TestConsensusKeyring: the keyring file is created (mode 0600) from the
// key, then read, with the gossip keyring's checks; a file others can
// read is refused.
func TestConsensusKeyring(t *testing.T) {
	dir := t.TempDir()
	ring := filepath.Join(dir, "consensus.json")
	c := validBase()
	c.Consensus.Key = consKey
	c.Consensus.KeyringFile = ring
	f, err := c.CheckFiles(checkEnv, os.Geteuid())
	if err != nil || len(f.ConsensusKeys) != 1 || f.ConsensusKeys[0] != consKey || f.ConsensusKeyringFile != ring {
		t.Fatalf("before creation: %+v, %v", f, err)
	}
	if _, err := os.Stat(ring); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CheckFiles created the keyring: %v", err)
	}
	keys, warn, err := c.ConsensusKeyring()
	if err != nil || len(keys) != 1 || keys[0] != consKey || warn != "" {
		t.Fatalf("ConsensusKeyring = %q, %q, %v", keys, warn, err)
	}
	st, err := os.Stat(ring)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v, %v", st, err)
	}
	got, err := ReadKeyringFile(ring)
	if err != nil || len(got) != 1 || got[0] != consKey {
		t.Fatalf("keyring file holds %q, %v", got, err)
	}
	// Once it exists, the file wins over the key, with a warning.
	c.Consensus.Key = consKey2
	keys, warn, err = c.ConsensusKeyring()
	if err != nil || len(keys) != 1 || keys[0] != consKey || !strings.Contains(warn, "does not contain the --consensus-key key; the keyring file wins") {
		t.Fatalf("ConsensusKeyring = %q, %q, %v", keys, warn, err)
	}
	// No file: the key alone, nothing written.
	c.Consensus.KeyringFile = ""
	if keys, _, err := c.ConsensusKeyring(); err != nil || len(keys) != 1 || keys[0] != consKey2 {
		t.Fatalf("key only: %q, %v", keys, err)
	}
	// Off: nothing.
	if keys, _, err := validBase().ConsensusKeyring(); err != nil || keys != nil {
		t.Fatalf("off: %q, %v", keys, err)
	}
}

// TestConsensusKeyringFileChecks: CheckFiles refuses the consensus
// keyring files the gossip keyring checks refuse, and keys of the wrong
// size, each error naming consensus.keyring_file.
func TestConsensusKeyringFileChecks(t *testing.T) {
	dir := t.TempDir()
	ring644 := testkit.WriteFile(t, dir, "ring644.json", `["`+consKey+`"]`, 0o644)
	ring16 := testkit.WriteFile(t, dir, "ring16.json", `["`+consKey+`", "MDEyMzQ1Njc4OWFiY2RlZg=="]`, 0o600)
	notFile := filepath.Join(dir, "ringdir")
	if err := os.Mkdir(notFile, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	otherNode := filepath.Join(dir, "raft-db9")
	if err := os.Mkdir(otherNode, 0o700); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, otherNode, "shoal-owner.json", `{"node":"db9","pid":1}`, 0o600)
	for _, tc := range []struct {
		name string
		s    consensus.Settings
		want string
	}{
		{"readable by others", consensus.Settings{KeyringFile: ring644},
			`consensus.keyring_file (--consensus-keyring-file) "` + ring644 + `": ` + ring644 + ` has mode 0644`},
		{"a 16-byte key", consensus.Settings{KeyringFile: ring16},
			`consensus.keyring_file (--consensus-keyring-file) "` + ring16 + `": key 2: key is 16 bytes; must be 32 bytes`},
		{"missing without a key", consensus.Settings{KeyringFile: missing + ".json"},
			`consensus.keyring_file (--consensus-keyring-file) "` + missing + `.json": does not exist, and no consensus.key (--consensus-key, $SHOAL_CONSENSUS_KEY) was given to create it with`},
		{"in a missing directory", consensus.Settings{Key: consKey, KeyringFile: missing + "/ring.json"},
			`consensus.keyring_file (--consensus-keyring-file) "` + missing + `/ring.json": cannot be created from consensus.key: directory ` + missing},
		{"data dir not a directory", consensus.Settings{Key: consKey, KeyringFile: filepath.Join(dir, "new.json"), DataDir: ring16},
			`consensus.data_dir (--consensus-data-dir) "` + ring16 + `": is not a directory`},
		{"data dir of another node", consensus.Settings{Key: consKey, KeyringFile: filepath.Join(dir, "new.json"), DataDir: otherNode},
			`consensus.data_dir (--consensus-data-dir) "` + otherNode + `": holds the raft data of node db9 (last opened by pid 1), and a data directory belongs to one raft server ID: give each agent its own consensus.data_dir`},
		{"keyring file a directory", consensus.Settings{KeyringFile: notFile},
			`consensus.keyring_file (--consensus-keyring-file) "` + notFile + `": ` + notFile + ` is not a regular file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validBase()
			c.Consensus = tc.s
			c.Consensus.Voter = new(bool)
			*c.Consensus.Voter = strings.Contains(tc.name, "data dir")
			c.APITokenFile = filepath.Join(dir, "api-token")
			_, err := c.CheckFiles(checkEnv, os.Geteuid())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckFiles: %v\nwant %q", err, tc.want)
			}
			if _, _, err := c.ConsensusKeyring(); err == nil && !strings.Contains(tc.name, "data dir") {
				t.Fatal("ConsensusKeyring accepts it")
			}
		})
	}
}

// TestConsensusKeySecret: --consensus-key draws the warning --encrypt does,
// and a config file holding consensus.key must be private.
func TestConsensusKeySecret(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f := BindFlags(fs)
	if err := fs.Parse([]string{"--consensus-key", consKey}); err != nil {
		t.Fatal(err)
	}
	ws := f.SecretWarnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "--consensus-key was given on the command line") ||
		!strings.Contains(ws[0], "SHOAL_CONSENSUS_KEY") || strings.Contains(ws[0], consKey) {
		t.Fatalf("warnings = %q", ws)
	}
	p := writeFile(t, "node: n1\ninsecure_no_encryption: true\nconsensus:\n  key: "+consKey+"\n")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, []string{"--config", p}, nil)
	if err == nil || !strings.Contains(err.Error(), "holds the secret key consensus.key (line 4) and has mode 0644") {
		t.Fatalf("world-readable config file with consensus.key: %v", err)
	}
}

// TestConsensusKeyNotGossipKey: a consensus key that is also a gossip key
// (encrypt or a key of keyring_file, against consensus.key or a key of
// consensus.keyring_file) collapses the two-key model: CheckFiles refuses
// it, naming both settings and never the key. Keys are compared by their
// decoded bytes, so another base64 spelling of the same bytes is caught.
func TestConsensusKeyNotGossipKey(t *testing.T) {
	dir := t.TempDir()
	const (
		gossip16   = testKey                                        // 16 bytes
		consKeyAlt = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWb=" // consKey's bytes, other spare bits
	)
	gossipRing := testkit.WriteFile(t, dir, "gossip.json", `["`+gossip16+`", "`+consKey+`"]`, 0o600)
	consRing := testkit.WriteFile(t, dir, "consensus.json", `["`+consKey2+`", "`+consKey+`"]`, 0o600)
	consRing1 := testkit.WriteFile(t, dir, "consensus1.json", `["`+consKey+`"]`, 0o600)
	const separate = "the consensus key must be a separate secret; generate one with shoal keygen"
	for _, tc := range []struct {
		name            string
		encrypt, ring   string
		consKey, consRF string
		want            string // "" for accepted
	}{
		{name: "separate keys", encrypt: consKey2, consKey: consKey},
		{name: "a 16-byte gossip key", encrypt: gossip16, consRF: consRing},
		{name: "encrypt is consensus.key", encrypt: consKey, consKey: consKey,
			want: `consensus.key (--consensus-key) "[not shown]": the same key as the gossip key (encrypt): ` + separate},
		{name: "the same bytes spelt otherwise", encrypt: consKeyAlt, consKey: consKey,
			want: `consensus.key (--consensus-key) "[not shown]": the same key as the gossip key (encrypt): ` + separate},
		{name: "a key of keyring_file is consensus.key", ring: gossipRing, consKey: consKey,
			want: `consensus.key (--consensus-key) "[not shown]": the same key as the gossip key (keyring_file ` + gossipRing + `, key 2): ` + separate},
		{name: "encrypt is in consensus.keyring_file", encrypt: consKey, consRF: consRing,
			want: `consensus.keyring_file (--consensus-keyring-file) "` + consRing + `": key 2 is the same key as the gossip key (encrypt): ` + separate},
		{name: "the consensus keyring file holds it, and consensus.key", encrypt: consKey, consKey: consKey, consRF: consRing1,
			want: `consensus.keyring_file (--consensus-keyring-file) "` + consRing1 + `": key 1 is the same key as the gossip key (encrypt): ` + separate},
		{name: "keyring files share a key", ring: gossipRing, consRF: consRing,
			want: `consensus.keyring_file (--consensus-keyring-file) "` + consRing + `": key 2 is the same key as the gossip key (keyring_file ` + gossipRing + `, key 2): ` + separate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validBase()
			c.InsecureNoEncryption = false
			c.Encrypt, c.KeyringFile = tc.encrypt, tc.ring
			c.Consensus.Key, c.Consensus.KeyringFile = tc.consKey, tc.consRF
			c.APITokenFile = filepath.Join(dir, "api-token")
			_, err := c.CheckFiles(checkEnv, os.Geteuid())
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckFiles: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckFiles: %v\nwant %q", err, tc.want)
			}
			for _, k := range []string{consKey, consKeyAlt, gossip16} {
				if strings.Contains(err.Error(), k) || strings.Contains(err.Error(), k[:4]) {
					t.Fatalf("the error shows a key: %v", err)
				}
			}
		})
	}
}

// TestNoTermWarning: a db agent without a consensus key warns that its
// cluster's writes follow the old rule, naming how to turn writer terms on
// and how to opt out; an app agent, a db agent with consensus on, one
// with consensus.disabled (file, environment or flag) and --dev do not.
func TestNoTermWarning(t *testing.T) {
	ring := filepath.Join(t.TempDir(), "consensus.json")
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		args       []string
		warn       bool
	}{
		{"db without consensus", dbYAML, nil, nil, true},
		{"app without consensus", "", nil, nil, false},
		{"db with a keyring file", dbYAML + "consensus: {keyring_file: " + ring + "}\n", nil, nil, false},
		{"db with a key in the environment, no voter", dbYAML, map[string]string{"SHOAL_CONSENSUS_KEY": consKey, "SHOAL_CONSENSUS_VOTER": "false"}, nil, false},
		{"db, disabled in the file", dbYAML + "consensus: {disabled: true}\n", nil, nil, false},
		{"db, disabled in the environment", dbYAML, map[string]string{"SHOAL_CONSENSUS_DISABLED": "true"}, nil, false},
		{"db, disabled by flag", dbYAML, nil, []string{"--consensus-disabled"}, false},
		{"db, --dev", dbYAML, nil, []string{"--dev"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "node: n1\ninsecure_no_encryption: true\n"+tc.yaml)
			c, err := load(t, append([]string{"--config", p}, tc.args...), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			w := c.NoTermWarning()
			if !tc.warn {
				if w != "" {
					t.Fatalf("warning %q, want none", w)
				}
				return
			}
			for _, want := range []string{"no writer term", "any single writable server", "shoal keygen --fleet DIR",
				"consensus.keyring_file", "consensus.disabled: true"} {
				if !strings.Contains(w, want) {
					t.Errorf("warning %q lacks %q", w, want)
				}
			}
		})
	}
}
