package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/setting"
)

// TestValidateJoin: memberlist's address forms pass; an empty host or a
// port that is not 1-65535 is refused naming the entry.
func TestValidateJoin(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"10.0.0.1", ""},
		{"10.0.0.1:7946", ""},
		{"db1.example", ""},
		{"db1.example:7000", ""},
		{"::1", ""},
		{"[::1]", ""},
		{"[::1]:7946", ""},
		{"node1/10.0.0.1:7946", ""},
		{"", "empty address"},
		{"nonsense:abc", "port must be a number from 1 to 65535"},
		{"10.0.0.1:99999", "port must be a number from 1 to 65535"},
		{"10.0.0.1:0", "port must be a number from 1 to 65535"},
		{"10.0.0.1:-1", "port must be a number from 1 to 65535"},
		{":7946", "host must not be empty"},
		{"[::1]:x", "port must be"},
		{"/10.0.0.1", "empty node name"},
		{"a/", "empty address"},
	} {
		err := validateJoin("join[0]", tc.addr)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.addr, err, tc.want)
		}
	}
}

// TestLoadReportsEveryError: a file's, the environment's and the flags'
// errors, and validation's, come in one error; a key whose value could
// not be set is not reported again by validation.
func TestLoadReportsEveryError(t *testing.T) {
	p := writeFile(t, "insecure_no_encryption: true\nprofil: x\nleave_timeout: soon\n")
	c, err := load(t, []string{"--config", p, "--retry-interval", "fast", "--log-level", "loud"}, map[string]string{"SHOAL_RETRY_MAX": "lots"})
	if c == nil || err == nil {
		t.Fatalf("config %v, error %v", c, err)
	}
	msg := err.Error()
	for _, want := range []string{
		"config file " + p + `, line 2: unknown key "profil"`,
		"config file " + p + `, line 3: leave_timeout (--leave-timeout) "soon"`,
		`environment SHOAL_RETRY_MAX: retry_max (--retry-max) "lots": not an integer`,
		`retry_interval (--retry-interval) "fast": not a duration`,
		`log_level (--log-level) "loud"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "retry_interval"); n != 1 {
		t.Errorf("retry_interval reported %d times:\n%s", n, msg)
	}
	// MergeErrors adds only the keys not yet reported.
	merged := MergeErrors(err, fieldErr("leave_timeout", "x", "again"))
	if strings.Contains(merged.Error(), "again") || len(setting.Leaves(merged)) != len(setting.Leaves(err)) {
		t.Errorf("MergeErrors repeated a key:\n%v", merged)
	}
	if merged := MergeErrors(err, fieldErr("mysql.user", "", "new")); !strings.Contains(merged.Error(), "new") {
		t.Errorf("MergeErrors dropped a new key:\n%v", merged)
	}
}

// TestMySQLLimitsAreTheProbes: the config's mysql limits are exactly the
// probe's, at both ends.
func TestMySQLLimitsAreTheProbes(t *testing.T) {
	for _, tc := range []struct {
		key string
		mod func(*probe.Settings)
	}{
		{"mysql.interval", func(m *probe.Settings) { m.Interval = probe.MinInterval - time.Millisecond }},
		{"mysql.interval", func(m *probe.Settings) { m.Interval = probe.MaxInterval + time.Millisecond }},
		{"mysql.timeout", func(m *probe.Settings) { m.Timeout = probe.MinTimeout - time.Millisecond }},
		{"mysql.timeout", func(m *probe.Settings) { m.Timeout = probe.MaxTimeout + time.Millisecond }},
		{"mysql.rise", func(m *probe.Settings) { m.Rise = probe.MaxRiseFall + 1 }},
		{"mysql.fall", func(m *probe.Settings) { m.Fall = 0 }},
	} {
		c := Default()
		c.InsecureNoEncryption = true
		tc.mod(&c.MySQL)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.key+" (--") {
			t.Errorf("%s %+v: %v", tc.key, c.MySQL, err)
		}
	}
	c := Default()
	c.InsecureNoEncryption = true
	c.MySQL = probe.Settings{Addr: "127.0.0.1:3306", User: "u", Interval: probe.MaxInterval, Timeout: probe.MaxTimeout, Rise: probe.MaxRiseFall, Fall: 1}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// What config accepts, the probe starts with (reconnect_max follows the interval).
	pc, err := c.ProbeConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Validate(); err != nil {
		t.Error(err)
	}
}

// TestCheckSecretFile: the keyring file's rule for a config file with
// secrets; nothing is checked without one.
func TestCheckSecretFile(t *testing.T) {
	p := writeFile(t, "encrypt: "+testKey+"\n")
	for _, tc := range []struct {
		mode os.FileMode
		want string
	}{{0o600, ""}, {0o400, ""}, {0o644, "has mode 0644"}, {0o604, "has mode 0604"}, {0o660, "has mode 0660"}} {
		os.Chmod(p, tc.mode)
		fi, _ := os.Stat(p)
		err := checkSecretFile(p, fi, []string{"encrypt (line 1)"}, os.Geteuid())
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "chmod 600 "+p)) {
			t.Errorf("mode %04o: %v", tc.mode, err)
		}
		if err := checkSecretFile(p, fi, nil, os.Geteuid()); err != nil {
			t.Errorf("mode %04o without secrets: %v", tc.mode, err)
		}
	}
	// Owned by another user (the euid given is not the file's, nor root).
	os.Chmod(p, 0o600)
	fi, _ := os.Stat(p)
	if os.Geteuid() == 0 {
		if err := checkSecretFile(p, fi, []string{"rpc_auth (line 4)"}, 1000); err != nil {
			t.Errorf("root-owned: %v", err)
		}
	} else if err := checkSecretFile(p, fi, []string{"rpc_auth (line 4)"}, os.Geteuid()+1); err == nil || !strings.Contains(err.Error(), "is owned by uid") {
		t.Errorf("another user's: %v", err)
	}
	// Empty values are no secret.
	res, err := decodeFile([]byte("encrypt: \"\"\nrpc_auth: tok\n"), Default())
	if err != nil || strings.Join(res.secrets, ",") != "rpc_auth (line 2)" {
		t.Errorf("secrets %q, %v", res.secrets, err)
	}
}
