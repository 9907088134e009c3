package process

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
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
