package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestSerfJSONConfig: a stock serf agent's JSON config file loads, each
// serf key read as its shoal equivalent with a notice naming the shoal key.
func TestSerfJSONConfig(t *testing.T) {
	// The file holds a key, so it must be private (git keeps it 0644).
	data, err := os.ReadFile("testdata/serf.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "serf.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := LoadFile(path, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"node", c.Node, "db1"},
		{"encrypt", c.Encrypt, testKey},
		{"bind", c.Bind, "10.0.0.5:7946"},
		{"join", strings.Join(c.Join, ","), "10.0.0.6,10.0.0.7,10.0.0.8"},
		{"retry_interval", c.RetryInterval.String(), "15s"},
		{"retry_max", fmt.Sprint(c.RetryMax), "10"},
		{"snapshot", c.Snapshot, "/var/lib/serf/snapshot"},
		{"rejoin", fmt.Sprint(c.Rejoin), "false"},
		{"gossip.reconnect_interval", c.Gossip.ReconnectInterval.String(), "30s"},
		{"gossip.reconnect_timeout", c.Gossip.ReconnectTimeout.String(), "12h0m0s"},
		{"gossip.tombstone_timeout", c.Gossip.TombstoneTimeout.String(), "12h0m0s"},
		{"hooks.query_response_limit", fmt.Sprint(c.Hooks.QueryResponseLimit), "2048"},
		{"tags", c.Tags["dc"] + c.Tags["rack"], "eastr1"},
		{"event_handlers", strings.Join(c.EventHandlers, ";"), "member-join,member-leave=/usr/local/bin/handler.sh"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	notes := strings.Join(c.Notices(), "\n")
	for _, want := range []string{
		`config file ` + path + `, line 2: serf key "node_name" read as shoal's "node" (--node)`,
		`line 3: serf key "encrypt_key" read as shoal's "encrypt" (--encrypt)`,
		`line 13: serf key "start_join" read as shoal's "join" (--join)`,
		`line 14: serf key "retry_join" read as shoal's "join" (--join)`,
		`line 16: serf key "retry_max_attempts" read as shoal's "retry_max" (--retry-max)`,
		`line 17: serf key "snapshot_path" read as shoal's "snapshot" (--snapshot)`,
		`line 18: serf key "rejoin_after_leave" read as shoal's "rejoin" (--rejoin)`,
		`line 19: serf key "reconnect_interval" read as shoal's "gossip.reconnect_interval" (--reconnect-interval)`,
		`line 21: serf key "tombstone_timeout" read as shoal's "gossip.tombstone_timeout" (--tombstone-timeout)`,
		`line 22: serf key "query_response_size_limit" read as shoal's "hooks.query_response_limit"`,
		`line 12: serf key "protocol" ignored: shoal speaks serf protocol 5`,
		`line 23: serf key "leave_on_terminate" ignored: shoal always leaves the cluster gracefully on SIGTERM`,
		`line 24: serf key "skip_leave_on_interrupt" ignored`,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notices lack %q:\n%s", want, notes)
		}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestSerfKeysErrors: a serf key with no shoal equivalent whose value would
// change behaviour, or a serf key set together with its shoal key, is an
// error naming the line and saying why.
func TestSerfKeysErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"mdns discovery", `{"node_name": "a", "discover": "cluster1"}`, `line 1: serf key "discover" has no shoal equivalent: shoal has no mDNS discovery: list peers under join (--join); remove it`},
		{"statsd", "node: a\nstatsd_addr: 127.0.0.1:8125\n", `line 2: serf key "statsd_addr" has no shoal equivalent: shoal exports metrics for Prometheus`},
		{"old protocol", "protocol: 3\n", `line 1: serf key "protocol" has no shoal equivalent`},
		{"replay on join", "replay_on_join: true\n", `line 1: serf key "replay_on_join" has no shoal equivalent`},
		{"both node keys", "node: a\nnode_name: b\n", `line 2: serf key "node_name" and shoal key "node" (line 1) are both set; keep "node"`},
		{"both nested keys", "gossip:\n  reconnect_timeout: 1h\nreconnect_timeout: 2h\n", `line 3: serf's key and shoal's "gossip.reconnect_timeout" (line 2) are both set`},
		{"serf role", `{"role": "web"}`, `role (--role) "web": must be db or app (serf's role key was a tag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			c := Default()
			err := LoadFile(p, c)
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
		})
	}
	// A serf list merges with shoal's own.
	c := Default()
	if err := LoadFile(writeFile(t, "join: [a:1]\nstart_join: [b:2]\nretry_join: [c:3]\n"), c); err != nil || !slices.Equal(c.Join, []string{"a:1", "b:2", "c:3"}) {
		t.Errorf("join = %v, %v", c.Join, err)
	}
}

// TestFileErrorsNameKeyFlagAndFile: the reproductions, and more:
// every error names the file, the line and the key, cites a flag only when
// it exists, and an unknown key gets the nearest valid one.
func TestFileErrorsNameKeyFlagAndFile(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"duration in words", "node: a\nbind: 127.0.0.1:7946\nprofile: lan\nleave_timeout: 5 seconds\n",
			`line 4: leave_timeout (--leave-timeout) "5 seconds": not a duration: write a number with a unit, e.g. 500ms, 5s, 2m, 1h`},
		{"misspelt key", "profil: fast\n", `line 1: unknown key "profil"; did you mean "profile"?`},
		{"misspelt nested key", "mysql:\n  pasword_file: /x\n", `line 2: unknown key "mysql.pasword_file"; did you mean "mysql.password_file"?`},
		{"no near key", "frobnicate: 1\n", `line 1: unknown key "frobnicate"`},
		{"bool", "pool:\n  damping: sometimes\n", `line 2: pool.damping (--damping) "sometimes": not a boolean: write true or false`},
		{"int", "hooks:\n  queue_size: big\n", `line 2: hooks.queue_size "big": not a whole number`},
		{"list", "join: 10.0.0.1\n", `line 1: join (--join) "10.0.0.1": want a list`},
		{"not a mapping", "- a\n- b\n", "line 1: want a mapping of config keys"},
		{"flow mapping", "mysql: {addr: 'x:1', rise: lots}\n", `line 1: mysql.rise (--mysql-rise) "lots": not a whole number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			err := LoadFile(p, Default())
			// One form for every message about a file: "config file F, line N: ...".
			want := "config file " + p + ", " + tc.want
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v\nwant %q", err, want)
			}
			if tc.name == "no near key" && strings.Contains(err.Error(), "did you mean") {
				t.Errorf("suggests an unrelated key: %v", err)
			}
		})
	}
}

// TestValidationNamesWhereSet: a validation error names the file and line,
// or the environment variable, the value came from.
func TestValidationNamesWhereSet(t *testing.T) {
	p := writeFile(t, "insecure_no_encryption: true\nhooks:\n  queue_size: -1\nevent_handlers:\n  - 'bogus-event=/bin/true'\n")
	_, err := load(t, []string{"--config", p, "--node", "n1"}, map[string]string{"SHOAL_LOG_LEVEL": "loud"})
	for _, want := range []string{
		"config file " + p + `, line 3: hooks.queue_size "-1": must be from 1`,
		"config file " + p + `, line 5: event_handlers[0] (--event-handler) "bogus-event=/bin/true"`,
		`environment SHOAL_LOG_LEVEL: log_level (--log-level) "loud"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant %q", err, want)
		}
	}
}

// TestFlagForNeverInventsAFlag: every key a message can name cites a flag
// the agent really has, or none (the old code cited --hooks.queue-size and
// --event-handlers[0]).
func TestFlagForNeverInventsAFlag(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	BindFlags(fs)
	keys := configKeysDotted()
	keys = append(keys, "event_handlers[3]", "sinks.haproxy.backends[0].cluster")
	for _, k := range keys {
		f := flagFor(k)
		if f != "" && fs.Lookup(f) == nil {
			t.Errorf("flagFor(%q) = --%s, which does not exist", k, f)
		}
	}
	for k, want := range map[string]string{"hooks.queue_size": "", "event_handlers[0]": "event-handler", "tags": "tag", "pool.max_lag": "max-lag", "sinks.file.path": "pool-file"} {
		if got := flagFor(k); got != want {
			t.Errorf("flagFor(%q) = %q, want %q", k, got, want)
		}
	}
}

// configKeysDotted lists every key of the config file as a dotted path.
func configKeysDotted() []string {
	var out []string
	for k := range configKeys() {
		out = append(out, k)
	}
	for _, o := range options {
		out = append(out, o.key)
	}
	return out
}

// TestHelpShowsTypesAndDefaults: `shoal agent --help` shows each flag's type
// and default, read from Default(), and bool flags that default to true say so.
func TestHelpShowsTypesAndDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	BindFlags(fs)
	help := fs.FlagUsages()
	line := func(flag string) string {
		for _, l := range strings.Split(help, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--"+flag+" ") {
				return l
			}
		}
		t.Fatalf("no --%s in help:\n%s", flag, help)
		return ""
	}
	for flag, want := range map[string][]string{
		"max-lag":                {"--max-lag duration", "(default 10s)"},
		"min-readers":            {"--min-readers int", "(default 1)"},
		"mysql-rise":             {"--mysql-rise int", "(default 2)"},
		"mysql-interval":         {"--mysql-interval duration", "(default 250ms)"},
		"mysql-timeout":          {"--mysql-timeout duration", "(default 500ms)"},
		"probe-interval":         {"--probe-interval duration", "(default: the profile's)"},
		"leave-timeout":          {"--leave-timeout duration", "(default 5s)"},
		"damping":                {"--damping ", "(default true)"},
		"confirm-failures":       {"--confirm-failures ", "(default true)"},
		"rejoin":                 {"--rejoin ", "(default true)"},
		"damp-half-life":         {"--damp-half-life duration", "(default 1m0s)"},
		"dead-node-reclaim-time": {"--dead-node-reclaim-time duration", "(default 30s)"},
		"retry-max":              {"--retry-max int"},
		"profile":                {"--profile string", `(default "lan")`},
	} {
		l := line(flag)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("help line %q lacks %q", strings.TrimSpace(l), w)
			}
		}
	}
	for _, flag := range []string{"damping", "confirm-failures", "insecure-http"} {
		if l := line(flag); strings.Contains(l, " string ") || strings.Contains(l, " bool ") {
			t.Errorf("bool flag shows a value type: %q", l)
		}
	}
	for _, flag := range []string{"mysql-port", "retry-max", "gossip-nodes"} {
		if l := line(flag); strings.Contains(l, "(default 0)") {
			t.Errorf("a zero that means 'not set' is shown as a default: %q", l)
		}
	}
}

// TestUnsetFlagDoesNotOverrideFile: a typed flag that is not given leaves
// the file's value (and the environment's) alone, and --damping=false or a
// bare --damping work.
func TestUnsetFlagDoesNotOverrideFile(t *testing.T) {
	p := writeFile(t, "insecure_no_encryption: true\nnode: n1\npool:\n  max_lag: 30s\n  damping: false\nmysql:\n  rise: 5\n")
	c, err := load(t, []string{"--config", p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool.MaxLag != 30*time.Second || c.Pool.Damping || c.MySQL.Rise != 5 {
		t.Errorf("file values overridden by flag defaults: max_lag %s damping %v rise %d", c.Pool.MaxLag, c.Pool.Damping, c.MySQL.Rise)
	}
	c, err = load(t, []string{"--config", p, "--damping", "--max-lag", "2s"}, nil)
	if err != nil || !c.Pool.Damping || c.Pool.MaxLag != 2*time.Second {
		t.Errorf("flags: %v damping %v max_lag %s", err, c.Pool.Damping, c.Pool.MaxLag)
	}
}
