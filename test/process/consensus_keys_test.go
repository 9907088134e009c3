package process

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestConsensusKeyEqualToGossipKeyRefused: an agent given the gossip key
// as its consensus key too (from the environment, or in the two keyring
// files) refuses to start and fails --config-check with exit status 2,
// naming both settings and never the key. Before, it started silently and
// a gossip key holder held the consensus key as well.
func TestConsensusKeyEqualToGossipKeyRefused(t *testing.T) {
	key, other := newKey(t), newKey(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "api-token")
	ring := func(name string, keys ...string) string {
		b, err := json.Marshal(keys)
		if err != nil {
			t.Fatal(err)
		}
		return writeConfig(t, dir, name, string(b), 0o600)
	}
	gossipRing, consRing := ring("gossip.json", other, key), ring("consensus.json", key)
	cfg := writeConfig(t, dir, "shoal.yaml", "api_token_file: "+token+"\n", 0o600)
	const hint = "the consensus key must be a separate secret; generate one with shoal keygen"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"environment", []string{"SHOAL_ENCRYPT=" + key, "SHOAL_CONSENSUS_KEY=" + key}, nil,
			`environment SHOAL_CONSENSUS_KEY: consensus.key (--consensus-key) "[not shown]": the same key as the gossip key (encrypt): ` + hint},
		{"keyring files", nil, []string{"--keyring-file", gossipRing, "--consensus-keyring-file", consRing},
			`consensus.keyring_file (--consensus-keyring-file) "` + consRing + `": key 1 is the same key as the gossip key (keyring_file ` + gossipRing + `, key 2): ` + hint},
	} {
		for _, args := range [][]string{
			append([]string{"agent", "--config-check", cfg}, tc.args...),
			startArgs(append([]string{"--api-token-file", token}, tc.args...)...),
		} {
			stdout, stderr, code := shoalEnv(t, tc.env, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stdout+stderr, key) {
				t.Errorf("%s, shoal %s: exit %d, want 2 with %q and without the key\nstdout %s\nstderr %s",
					tc.name, strings.Join(args[:2], " "), code, tc.want, stdout, stderr)
			}
		}
	}
}

// TestRaftDataDirNotShared: two voters on one host whose consensus keyring
// files sit in one directory get the same default data directory (raft
// next to the keyring file). The second agent exits 2 within seconds,
// naming the directory, the node and the PID holding it; before, it hung
// for ever on the raft store's file lock. Once the first is gone (kill -9),
// the directory still holds its raft data: the second is refused again,
// and the first starts on it as before.
func TestRaftDataDirNotShared(t *testing.T) {
	key, consKey := newKey(t), newKey(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "raft")
	voter := func(name string) *proc {
		ring := writeConfig(t, dir, name+".json", `["`+consKey+`"]`, 0o600)
		return startAgent(t, name, key, "--consensus-voter", "--consensus-keyring-file", ring,
			"--consensus-bind", ports.Free(t), "--consensus-bootstrap-expect", "1")
	}
	a := voter("dd1")
	testkit.WaitFor(t, 20*time.Second, "dd1's raft voter", func() bool { return strings.Contains(a.log.String(), "consensus voter started") })

	b := voter("dd2")
	start := time.Now()
	want := fmt.Sprintf(`consensus.data_dir (--consensus-data-dir) %q: in use by node dd1 (pid %d): give each agent its own consensus.data_dir`, dataDir, a.cmd.Process.Pid)
	if code := exitCode(t, b, 15*time.Second); code != 2 || !strings.Contains(b.log.String(), want) {
		t.Fatalf("second agent on the data dir: exit %d after %s, want 2 with %q; log:\n%s", code, time.Since(start), want, b.log.String())
	}
	t.Logf("the second agent exited 2 after %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(members(t, a.http)["dd1"].Status, "alive") {
		t.Fatal("the first agent no longer answers")
	}

	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	b = voter("dd2")
	want = fmt.Sprintf(`consensus.data_dir (--consensus-data-dir) %q: holds the raft data of node dd1 (last opened by pid %d), and a data directory belongs to one raft server ID: give each agent its own consensus.data_dir`, dataDir, a.cmd.Process.Pid)
	if code := exitCode(t, b, 15*time.Second); code != 2 || !strings.Contains(b.log.String(), want) {
		t.Fatalf("another node on a stopped voter's data dir: exit %d, want 2 with %q; log:\n%s", code, want, b.log.String())
	}
	a = voter("dd1")
	testkit.WaitFor(t, 20*time.Second, "dd1 again on its data dir", func() bool { return strings.Contains(a.log.String(), "consensus voter started") })
}
