package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func validBase() *Config {
	c := Default()
	c.Node = "db1"
	c.InsecureNoEncryption = true
	return c
}

func TestValidateBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"empty node", func(c *Config) { c.Node = "" }, `node (--node) "": must not be empty`},
		{"long node", func(c *Config) { c.Node = strings.Repeat("a", 129) }, "longer than 128 characters"},
		{"node chars", func(c *Config) { c.Node = "db 1" }, `node (--node) "db 1": may contain only`},
		{"bind no port", func(c *Config) { c.Bind = "localhost" }, `bind (--bind) "localhost": want host:port`},
		{"bind host name", func(c *Config) { c.Bind = "example.org:7946" }, "host must be an IP address"},
		{"bind bad port", func(c *Config) { c.Bind = "127.0.0.1:99999" }, "port must be a number from 0 to 65535"},
		{"advertise unspecified", func(c *Config) { c.Advertise = "0.0.0.0:7946" }, "must be a reachable address"},
		{"retry interval", func(c *Config) { c.RetryInterval = time.Millisecond }, `retry_interval (--retry-interval) "1ms": must be at least 10ms`},
		{"retry max wait", func(c *Config) { c.RetryMaxWait = 500 * time.Millisecond }, "retry_max_wait"},
		{"retry max", func(c *Config) { c.RetryMax = -1 }, `retry_max (--retry-max) "-1"`},
		{"tag key", func(c *Config) { c.Tags = map[string]string{"bad key": "v"} }, `tags (--tag) "bad key=v": tag key must be`},
		{"no encryption", func(c *Config) { c.InsecureNoEncryption = false }, "gossip encryption is required"},
		{"bad key base64", func(c *Config) { c.Encrypt = "not base64!" }, `encrypt (--encrypt) "not ...": not valid base64`},
		{"bad key length", func(c *Config) { c.Encrypt = "c2hvcnQ=" }, "key is 5 bytes; must be 16, 24 or 32 bytes"},
		{"profile", func(c *Config) { c.Profile = "turbo" }, `profile (--profile) "turbo": unknown profile; choose one of fast, lan, local, wan`},
		{"probe interval", func(c *Config) { c.Gossip.ProbeInterval = time.Millisecond }, `gossip.probe_interval (--probe-interval) "1ms": must be at least 10ms`},
		{"probe timeout over interval", func(c *Config) {
			c.Gossip.ProbeInterval = 100 * time.Millisecond
			c.Gossip.ProbeTimeout = 200 * time.Millisecond
		}, "must not exceed gossip.probe_interval"},
		{"suspicion mult", func(c *Config) { c.Gossip.SuspicionMult = -2 }, "gossip.suspicion_mult"},
		{"push pull", func(c *Config) { c.Gossip.PushPullInterval = time.Millisecond }, "gossip.push_pull_interval"},
		{"http addr", func(c *Config) { c.HTTPAddr = "8946" }, `http_addr (--http-addr) "8946": want host:port`},
		{"rpc addr", func(c *Config) { c.RPCAddr = "localhost:7373" }, `rpc_addr (--rpc-addr) "localhost:7373": host must be an IP address`},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, `log_level (--log-level) "loud"`},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, `log_format (--log-format) "xml": must be text or json`},
		{"leave timeout", func(c *Config) { c.LeaveTimeout = 0 }, "leave_timeout"},
		{"role", func(c *Config) { c.Role = "primary" }, `role (--role) "primary": must be db or app`},
		{"db without mysql", func(c *Config) { c.Role = "db" }, "a db agent needs mysql.addr"},
		{"cluster", func(c *Config) { c.Cluster = "a b" }, `cluster (--cluster) "a b"`},
		{"reserved tag", func(c *Config) { c.Tags = map[string]string{"sh": "x"} }, `tag key "sh" is reserved`},
		{"mysql addr", func(c *Config) { c.MySQL.Addr = "db:port" }, `mysql.addr (--mysql-addr) "db:port": port must be`},
		{"mysql addr and socket", func(c *Config) { c.MySQL.Addr = "127.0.0.1:3306"; c.MySQL.Socket = "/s" }, "not both"},
		{"mysql interval", func(c *Config) { c.MySQL.Interval = 10 * time.Millisecond }, `mysql.interval (--mysql-interval) "10ms": must be at least 50ms`},
		{"mysql timeout", func(c *Config) { c.MySQL.Timeout = time.Minute }, "mysql.timeout"},
		{"mysql rise", func(c *Config) { c.MySQL.Rise = 0 }, "mysql.rise (--mysql-rise)"},
		{"max lag", func(c *Config) { c.Pool.MaxLag = 0 }, "pool.max_lag (--max-lag)"},
		{"min readers", func(c *Config) { c.Pool.MinReaders = -1 }, "pool.min_readers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validBase()
			tc.mutate(c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValidateGood(t *testing.T) {
	for _, p := range ProfileNames() {
		c := validBase()
		c.Profile = p
		if err := c.Validate(); err != nil {
			t.Errorf("profile %s: %v", p, err)
		}
	}
	c := validBase()
	c.InsecureNoEncryption = false
	c.Encrypt = "SCxwhYCrdIncOPAGdmFHvMh2or1B+qmx3ilUmzWgiMM="
	c.Advertise = "10.0.0.1:7946"
	c.Bind = "0.0.0.0"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := validBase()
	c.Node = ""
	c.LogFormat = "xml"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "node") || !strings.Contains(err.Error(), "log_format") {
		t.Fatalf("want both problems named, got %v", err)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shoal.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown key", "node: a\nbind_addr: 1.2.3.4\n", `line 2: unknown key "bind_addr"`},
		{"unknown nested key", "gossip:\n  probe_intervall: 1s\n", `line 2: unknown key "probe_intervall"`},
		{"bad duration", "retry_interval: soon\n", "line 1: cannot unmarshal"},
		{"bad int", "retry_max: many\n", "line 1: cannot unmarshal"},
		{"two documents", "node: a\n---\nnode: b\n", "more than one YAML document"},
		{"syntax", "node: [a\n", "yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			err := LoadFile(p, Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v\nwant the file name and %q", err, tc.want)
			}
		})
	}
	if err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml"), Default()); err == nil {
		t.Fatal("missing file: no error")
	}
}

func load(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Load(func(k string) string { return env[k] })
}

func TestPrecedenceDefaultsFileEnvFlags(t *testing.T) {
	p := writeFile(t, `
node: from-file
bind: 127.0.0.1:7000
profile: wan
log_level: debug
insecure_no_encryption: true
join: [10.0.0.1, 10.0.0.2]
tags:
  team: dba
  dc: file
gossip:
  probe_interval: 300ms
`)
	c, err := load(t, []string{"--config", p, "--node", "from-flag", "--tag", "dc=flag", "--probe-timeout", "100ms"},
		map[string]string{"SHOAL_NODE": "from-env", "SHOAL_PROFILE": "fast", "SHOAL_LOG_LEVEL": "warn"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ what, got, want string }{
		{"node (flag over env over file)", c.Node, "from-flag"},
		{"profile (env over file)", c.Profile, "fast"},
		{"log_level (env over file)", c.LogLevel, "warn"},
		{"bind (file over default)", c.Bind, "127.0.0.1:7000"},
		{"http_addr (default)", c.HTTPAddr, DefaultHTTPAddr},
		{"tag dc (flag merged over file)", c.Tags["dc"], "flag"},
		{"tag team (file)", c.Tags["team"], "dba"},
		{"join (file)", strings.Join(c.Join, ","), "10.0.0.1,10.0.0.2"},
		{"probe interval (file)", c.Effective().ProbeInterval.String(), "300ms"},
		{"probe timeout (flag)", c.Effective().ProbeTimeout.String(), "100ms"},
		{"suspicion (profile)", time.Duration(c.Effective().SuspicionMult).String(), time.Duration(3).String()},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.what, ch.got, ch.want)
		}
	}
}

func TestEnvAndFlagErrorsNameTheSource(t *testing.T) {
	_, err := load(t, []string{"--insecure-no-encryption"}, map[string]string{"SHOAL_RETRY_MAX": "lots"})
	if err == nil || !strings.Contains(err.Error(), "environment SHOAL_RETRY_MAX") || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("got %v", err)
	}
	_, err = load(t, []string{"--insecure-no-encryption", "--retry-interval", "fast"}, nil)
	if err == nil || !strings.Contains(err.Error(), `retry_interval (--retry-interval) "fast": not a duration`) {
		t.Fatalf("got %v", err)
	}
	_, err = load(t, []string{"--insecure-no-encryption", "--tag", "novalue"}, nil)
	if err == nil || !strings.Contains(err.Error(), `want key=value`) {
		t.Fatalf("got %v", err)
	}
}

func TestDevMode(t *testing.T) {
	c, err := load(t, []string{"--dev", "--bind", "127.0.0.1:7001"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile != "local" || !strings.HasSuffix(c.Node, "-7001") {
		t.Fatalf("dev: profile %q node %q", c.Profile, c.Node)
	}
}

func TestJoinFlagsAndAlias(t *testing.T) {
	c, err := load(t, []string{"--insecure-no-encryption", "--join", "a:1,b:2", "--retry-join", "c:3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Join, " ") != "a:1 b:2 c:3" {
		t.Fatalf("join = %v", c.Join)
	}
}

func TestEffectiveProfileOverrides(t *testing.T) {
	c := validBase()
	c.Profile = "fast"
	c.Gossip.SuspicionMult = 5
	g := c.Effective()
	if g.ProbeInterval != 150*time.Millisecond || g.SuspicionMult != 5 || g.RetransmitMult != 8 {
		t.Fatalf("effective = %+v", g)
	}
}
