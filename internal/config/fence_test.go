package config

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/internal/consensus"
)

// TestFenceSettings: fencing is on by default exactly when consensus is
// on; consensus.fence and fence_after come from the file, the environment
// and the flags, in that order of precedence; fence_after is bounded.
func TestFenceSettings(t *testing.T) {
	ring := t.TempDir() + "/consensus.json"
	base := "node: n1\ninsecure_no_encryption: true\n" + dbYAML
	for _, tc := range []struct {
		name, yaml string
		args       []string
		env        map[string]string
		on         bool
		after      time.Duration
	}{
		{"consensus off", "", nil, nil, false, 3 * time.Second},
		{"consensus off, fence true", "consensus: {fence: true}\n", nil, nil, false, 3 * time.Second},
		{"default", "consensus: {keyring_file: " + ring + "}\n", nil, nil, true, 3 * time.Second},
		{"file off", "consensus: {keyring_file: " + ring + ", fence: false, fence_after: 10s}\n", nil, nil, false, 10 * time.Second},
		{"env over file", "consensus: {keyring_file: " + ring + ", fence: false}\n", nil,
			map[string]string{"SHOAL_CONSENSUS_FENCE": "true"}, true, 3 * time.Second},
		{"flag over env", "consensus: {keyring_file: " + ring + "}\n", []string{"--consensus-fence=false", "--consensus-fence-after", "1m"},
			map[string]string{"SHOAL_CONSENSUS_FENCE": "true"}, false, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, append([]string{"--config", writeFile(t, base+tc.yaml)}, tc.args...), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Consensus.FenceEnabled(); got != tc.on {
				t.Errorf("FenceEnabled = %v, want %v", got, tc.on)
			}
			if c.Consensus.FenceAfter != tc.after {
				t.Errorf("FenceAfter = %s, want %s", c.Consensus.FenceAfter, tc.after)
			}
		})
	}
}

// TestFenceSettingErrors: every message names the key, the flag and the
// bad value.
func TestFenceSettingErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"fence_after too short", "consensus:\n  fence_after: 500ms\n",
			`line 4: consensus.fence_after (--consensus-fence-after) "500ms": must be from 1s to 1m`},
		{"fence_after too long", "consensus:\n  fence_after: 2m\n",
			`line 4: consensus.fence_after (--consensus-fence-after) "2m0s": must be from 1s to 1m`},
		{"fence not a boolean", "consensus:\n  fence: sometimes\n",
			`line 4: consensus.fence (--consensus-fence) "sometimes": not a boolean`},
		{"promotion not a rule", "consensus:\n  promotion: always\n",
			`line 4: consensus.promotion (--consensus-promotion) "always": must be normal, prefer or never`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, []string{"--config", writeFile(t, "node: n1\ninsecure_no_encryption: true\n"+tc.yaml)}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestLeaseFlagHelp: the default --consensus-lease states is the one
// LeaseDuration computes (it said 2 × heartbeat + election, without the 3).
func TestLeaseFlagHelp(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	BindFlags(fs)
	usage := fs.Lookup("consensus-lease").Usage
	m := regexp.MustCompile(`default: (\d+) x heartbeat timeout \+ (?:(\d+) x )?election timeout`).FindStringSubmatch(usage)
	if m == nil {
		t.Fatalf("--consensus-lease help states no default: %q", usage)
	}
	hb, el := 2*time.Second, 3*time.Second
	h, _ := strconv.Atoi(m[1])
	e := 1
	if m[2] != "" {
		e, _ = strconv.Atoi(m[2])
	}
	s := consensus.Settings{HeartbeatTimeout: hb, ElectionTimeout: el}
	if stated := time.Duration(h)*hb + time.Duration(e)*el; stated != s.LeaseDuration() {
		t.Errorf("--consensus-lease help says %q: %s for heartbeat %s and election %s, LeaseDuration is %s", m[0], stated, hb, el, s.LeaseDuration())
	}
}

// TestLeaseSetting: the writer's lease defaults to 2 × heartbeat_timeout +
// 3 × election_timeout, follows them, and is at least twice the heartbeat
// timeout.
func TestLeaseSetting(t *testing.T) {
	base := "node: n1\ninsecure_no_encryption: true\n" + dbYAML
	for _, tc := range []struct {
		name, yaml string
		args       []string
		want       time.Duration
		err        string
	}{
		{"default", "", nil, 5 * time.Second, ""},
		{"follows the raft timeouts", "consensus: {heartbeat_timeout: 2s, election_timeout: 3s, leader_lease_timeout: 1s}\n", nil, 13 * time.Second, ""},
		{"given", "consensus: {lease: 4s}\n", nil, 4 * time.Second, ""},
		{"flag", "", []string{"--consensus-lease", "2500ms"}, 2500 * time.Millisecond, ""},
		{"below twice the heartbeat timeout", "consensus: {lease: 1500ms}\n", nil, 0,
			`consensus.lease (--consensus-lease) "1.5s": must be at least twice heartbeat_timeout (2s)`},
		{"too long", "consensus: {lease: 2m}\n", nil, 0,
			`consensus.lease (--consensus-lease) "2m0s": must be at most 1m`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, append([]string{"--config", writeFile(t, base+tc.yaml)}, tc.args...), nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Consensus.LeaseDuration(); got != tc.want {
				t.Errorf("LeaseDuration = %s, want %s", got, tc.want)
			}
		})
	}
}
