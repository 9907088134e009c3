package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
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
		{"tags over budget", func(c *Config) { c.Tags = map[string]string{"pad": strings.Repeat("x", 424)} }, "over the 128-byte user tag budget"},
		{"tag value control", func(c *Config) { c.Tags = map[string]string{"k": "a\x1b[2Jb"} }, `tags (--tag) "k=a\x1b[2Jb": value must be printable`},
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
		{"mysql interval", func(c *Config) { c.MySQL.Interval = 10 * time.Millisecond }, `mysql.interval (--mysql-interval) "10ms": must be from 50ms to 1m`},
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
	for _, p := range gossip.ProfileNames() {
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
		{"unknown nested key", "gossip:\n  probe_intervall: 1s\n", `line 2: unknown key "gossip.probe_intervall"; did you mean "gossip.probe_interval"?`},
		{"bad duration", "retry_interval: soon\n", `line 1: retry_interval (--retry-interval) "soon": not a duration`},
		{"bad int", "retry_max: many\n", `line 1: retry_max (--retry-max) "many": not a whole number`},
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

// --dev runs without encryption, so it gossips on loopback unless a bind
// address is given.
func TestDevModeBindsLoopback(t *testing.T) {
	c, err := load(t, []string{"--dev"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bind != "127.0.0.1:7946" || !strings.HasSuffix(c.Node, "-7946") {
		t.Errorf("--dev: bind %q node %q, want 127.0.0.1:7946", c.Bind, c.Node)
	}
	// Beyond loopback, unencrypted gossip needs the explicit opt-in (or a key).
	for _, args := range [][]string{{"--dev", "--bind", "0.0.0.0:7946"}, {"--dev", "--bind", "10.1.2.3:7000"}, {"--dev", "--bind", ":7001"}} {
		if _, err := load(t, args, nil); err == nil || !strings.Contains(err.Error(), `bind (--bind) "`+args[2]+`": --dev gossips unencrypted, so only on loopback`) {
			t.Errorf("%q: %v, want refused", args, err)
		}
		for _, more := range [][]string{{"--insecure-no-encryption"}, {"--encrypt", testKey}} {
			c, err := load(t, append(args, more...), nil)
			if err != nil {
				t.Fatalf("%q: %v", append(args, more...), err)
			}
			if c.Bind != args[2] {
				t.Errorf("%q: bind %q, want the one given", args, c.Bind)
			}
		}
	}
	if _, err := load(t, []string{"--dev", "--bind", "[::1]:7001"}, nil); err != nil {
		t.Errorf("--dev on ::1: %v", err)
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

func TestValidateSinksAndHistory(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir")
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // the start of one line of the error
	}{
		{"haproxy without backends", func(c *Config) { c.Sinks.HAProxy.Address = "127.0.0.1:9999" },
			`sinks.haproxy.backends "[]": at least one mapping`},
		{"haproxy backends without address", func(c *Config) {
			c.Sinks.HAProxy.Backends = []haproxy.Mapping{{Cluster: "default", Role: "writer", Backend: "be_w"}}
		}, `sinks.haproxy.address "": required`},
		{"haproxy bad mapping", func(c *Config) {
			c.Sinks.HAProxy.Address = "127.0.0.1:9999"
			c.Sinks.HAProxy.Backends = []haproxy.Mapping{{Cluster: "default", Role: "primary", Backend: "be_w"}}
		}, `sinks.haproxy.backends[0].role "primary"`},
		{"file path in a missing directory", func(c *Config) { c.Sinks.File.Path = filepath.Join(missing, "pool.json") },
			"sinks.file.path (--pool-file) " + strconv.Quote(filepath.Join(missing, "pool.json")) + ": directory " + missing + " does not exist"},
		{"file lists_dir without path", func(c *Config) { c.Sinks.File.ListsDir = dir },
			`sinks.file.path (--pool-file) "": required`},
		{"file lists_dir missing", func(c *Config) {
			c.Sinks.File.Path = filepath.Join(dir, "pool.json")
			c.Sinks.File.ListsDir = missing
		}, "sinks.file.lists_dir (--pool-lists-dir) " + strconv.Quote(missing) + ": does not exist"},
		{"file mode", func(c *Config) {
			c.Sinks.File.Path = filepath.Join(dir, "pool.json")
			c.Sinks.File.Mode = "rw-r--r--"
		}, `sinks.file.mode "rw-r--r--"`},
		{"history size negative", func(c *Config) { c.History.Size = -1 }, `history.size (--history-size) "-1": must be within 1-1000000`},
		{"history size too big", func(c *Config) { c.History.Size = 2_000_000 }, `history.size (--history-size) "2000000"`},
		{"history file in a missing directory", func(c *Config) { c.History.File = filepath.Join(missing, "h.jsonl") },
			"history.file (--history-file) " + strconv.Quote(filepath.Join(missing, "h.jsonl")) + ": directory " + missing + " does not exist"},
		{"history file is a directory", func(c *Config) { c.History.File = dir }, "history.file (--history-file) " + strconv.Quote(dir)},
		{"damp half life zero", func(c *Config) { c.Pool.DampHalfLife = 0 }, `pool.damp_half_life (--damp-half-life) "0s": must be from 1s to 1h`},
		{"damp half life too long", func(c *Config) { c.Pool.DampHalfLife = 2 * time.Hour }, `pool.damp_half_life (--damp-half-life) "2h0m0s"`},
		{"isolation window", func(c *Config) { c.Pool.IsolationWindow = 100 * time.Millisecond }, `pool.isolation_window (--isolation-window) "100ms"`},
		{"read fallback", func(c *Config) { c.Pool.ReadFallback = "primary" }, `pool.read_fallback (--read-fallback) "primary": must be writer, none or stale-reader`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validBase()
			tc.mutate(c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			found := false
			for _, l := range lines {
				if strings.HasPrefix(l, tc.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("error:\n%s\nwant a line starting with %q", err, tc.want)
			}
		})
	}
}

func TestValidateSinksAndHistoryGood(t *testing.T) {
	dir := t.TempDir()
	c := validBase()
	c.Sinks.File.Path = filepath.Join(dir, "pool.json")
	c.Sinks.File.ListsDir = dir
	c.Sinks.HAProxy.Address = "unix:/run/haproxy/admin.sock"
	c.Sinks.HAProxy.Backends = []haproxy.Mapping{{Cluster: "default", Role: "writer", Backend: "be_w"}, {Cluster: "default", Role: "reader", Backend: "be_r"}}
	c.History.File = filepath.Join(dir, "history.jsonl")
	c.History.Size = 10
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.Sinks.FileEnabled() || !c.Sinks.HAProxyEnabled() {
		t.Fatalf("enabled: file %v haproxy %v, want both", c.Sinks.FileEnabled(), c.Sinks.HAProxyEnabled())
	}
	// Unconfigured sinks are off and not validated.
	if d := validBase(); d.Sinks.FileEnabled() || d.Sinks.HAProxyEnabled() || d.Validate() != nil {
		t.Fatalf("default sinks: file %v haproxy %v, %v", d.Sinks.FileEnabled(), d.Sinks.HAProxyEnabled(), d.Validate())
	}
}

func TestLoadFileSinksAndHistory(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown sink", "node: a\nsinks:\n  kafka: {}\n", `line 3: unknown key "sinks.kafka"`},
		{"unknown sink inline", "sinks: {kafka: {}}\n", `line 1: unknown key "sinks.kafka"`},
		{"unknown file sink key", "sinks:\n  file:\n    paht: /x\n", `line 3: unknown key "sinks.file.paht"; did you mean "sinks.file.path"?`},
		{"unknown haproxy mapping key", "sinks:\n  haproxy:\n    backends:\n      - {cluster: a, role: writer, backend: b, weight: 3}\n", `line 4: unknown key "sinks.haproxy.backends[0].weight"`},
		{"unknown history key", "history:\n  sise: 10\n", `line 2: unknown key "history.sise"; did you mean "history.size"?`},
		{"bad history size", "history:\n  size: lots\n", `line 2: history.size (--history-size) "lots": not a whole number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			err := LoadFile(p, Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v\nwant the file name and %q", err, tc.want)
			}
		})
	}

	p := writeFile(t, `
node: db1
insecure_no_encryption: true
pool:
  damping: false
  damp_half_life: 30s
  read_fallback: none
sinks:
  file:
    path: `+filepath.Join(dir, "pool.json")+`
    lists_dir: `+dir+`
  haproxy:
    address: 127.0.0.1:9999
    backends:
      - {cluster: default, role: writer, backend: be_w}
history:
  size: 50
  file: `+filepath.Join(dir, "h.jsonl")+`
`)
	c, err := load(t, []string{"--config", p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool.Damping || c.Pool.DampHalfLife != 30*time.Second || c.Pool.ReadFallback != pool.ReadFallbackNone || c.Sinks.File.ListsDir != dir ||
		len(c.Sinks.HAProxy.Backends) != 1 || c.Sinks.HAProxy.Backends[0].Backend != "be_w" ||
		c.History.Size != 50 || c.History.File != filepath.Join(dir, "h.jsonl") {
		t.Fatalf("loaded pool %+v sinks %+v history %+v", c.Pool, c.Sinks, c.History)
	}
}

func TestSinkAndHistoryFlags(t *testing.T) {
	dir := t.TempDir()
	poolFile, histFile := filepath.Join(dir, "pool.json"), filepath.Join(dir, "history.jsonl")
	c, err := load(t, []string{"--insecure-no-encryption", "--pool-file", poolFile, "--pool-lists-dir", dir,
		"--history-file", histFile, "--history-size", "42", "--damping=false", "--damp-half-life", "2m", "--read-fallback", "stale-reader"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"sinks.file.path", c.Sinks.File.Path, poolFile},
		{"sinks.file.lists_dir", c.Sinks.File.ListsDir, dir},
		{"history.file", c.History.File, histFile},
		{"history.size", c.History.Size, 42},
		{"pool.damping", c.Pool.Damping, false},
		{"pool.damp_half_life", c.Pool.DampHalfLife, 2 * time.Minute},
		{"pool.read_fallback", c.Pool.ReadFallback, pool.ReadFallbackStaleReader},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}

	// Defaults without the flags: damping on, no file sink, the default ring.
	c, err = load(t, []string{"--insecure-no-encryption"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Pool.Damping || c.Pool.ReadFallback != pool.ReadFallbackWriter || c.Sinks.FileEnabled() || c.History.File != "" || c.History.WithDefaults().Size != 1000 {
		t.Fatalf("defaults: damping %v read fallback %q file sink %v history %+v", c.Pool.Damping, c.Pool.ReadFallback, c.Sinks.FileEnabled(), c.History)
	}

	// The environment sets the pool and history files too; flags win.
	c, err = load(t, []string{"--insecure-no-encryption", "--history-file", histFile},
		map[string]string{"SHOAL_POOL_FILE": poolFile, "SHOAL_HISTORY_FILE": filepath.Join(dir, "env.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sinks.File.Path != poolFile || c.History.File != histFile {
		t.Fatalf("env: pool file %q history file %q", c.Sinks.File.Path, c.History.File)
	}

	// Bad flag values name the flag's key.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--history-size", "many"}, `history.size (--history-size) "many": not an integer`},
		{[]string{"--history-size", "-1"}, `history.size (--history-size) "-1": must be within`},
		{[]string{"--damping=maybe"}, `pool.damping (--damping) "maybe": not a boolean`},
		{[]string{"--pool-file", filepath.Join(dir, "nope", "pool.json")}, "sinks.file.path (--pool-file) "},
		{[]string{"--pool-lists-dir", dir}, `sinks.file.path (--pool-file) "": required`},
		{[]string{"--history-file", filepath.Join(dir, "nope", "h.jsonl")}, "history.file (--history-file) "},
	} {
		_, err := load(t, append([]string{"--insecure-no-encryption"}, tc.args...), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v\nwant %q", tc.args, err, tc.want)
		}
	}
}

func TestDampingIsABoolFlag(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	BindFlags(fs)
	if typ := fs.Lookup("damping").Value.Type(); typ != "bool" {
		t.Errorf("--damping has type %q, want bool like --rejoin and --writer-serves-reads", typ)
	}
	if err := fs.Parse([]string{"--damping"}); err != nil {
		t.Errorf("bare --damping: %v", err)
	}
}

// TestHTTPBeyondLoopbackNeedsTLSOrOptIn: an API listening beyond loopback
// is refused unless it serves HTTPS or insecure_http opts in; the error
// names http_addr and both ways out.
func TestHTTPBeyondLoopbackNeedsTLSOrOptIn(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8946", "[::]:8946", ":8946", "10.0.0.1:8946"} {
		c := validBase()
		c.HTTPAddr = addr
		err := c.Validate()
		if err == nil {
			t.Errorf("http_addr %s without TLS or insecure_http accepted", addr)
			continue
		}
		for _, want := range []string{`http_addr (--http-addr) "` + addr + `"`, "http_tls_cert_file", "http_tls_key_file", "insecure_http", "--insecure-http"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("http_addr %s: error %q does not mention %q", addr, err, want)
			}
		}
		c.InsecureHTTP = true
		if err := c.Validate(); err != nil {
			t.Errorf("http_addr %s with insecure_http: %v", addr, err)
		}
		c.InsecureHTTP = false
		c.HTTPTLSCertFile, c.HTTPTLSKeyFile = "/etc/shoal/api.crt", "/etc/shoal/api.key"
		if err := c.Validate(); err != nil {
			t.Errorf("http_addr %s with TLS: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8946", "127.0.0.2:0", "[::1]:8946", ""} {
		c := validBase()
		c.HTTPAddr = addr
		if err := c.Validate(); err != nil {
			t.Errorf("loopback http_addr %q: %v", addr, err)
		}
	}
	c := validBase()
	c.HTTPTLSCertFile = "/etc/shoal/api.crt"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http_tls_key_file (--http-tls-key-file)") {
		t.Errorf("cert without key: %v", err)
	}
	c = validBase()
	c.HTTPTLSKeyFile = "/etc/shoal/api.key"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http_tls_cert_file (--http-tls-cert-file)") {
		t.Errorf("key without cert: %v", err)
	}

	// The keys come from the file, the environment and flags.
	p := writeFile(t, "insecure_no_encryption: true\nnode: n1\nhttp_addr: 0.0.0.0:8946\nhttp_tls_cert_file: /c.pem\nhttp_tls_key_file: /k.pem\n")
	c, err := load(t, []string{"--config", p}, nil)
	if err != nil || c.HTTPTLSCertFile != "/c.pem" || c.HTTPTLSKeyFile != "/k.pem" {
		t.Fatalf("file: %+v, %v", c, err)
	}
	c, err = load(t, []string{"--insecure-no-encryption", "--node", "n1", "--http-addr", "0.0.0.0:8946"}, map[string]string{"SHOAL_INSECURE_HTTP": "true"})
	if err != nil || !c.InsecureHTTP {
		t.Fatalf("env SHOAL_INSECURE_HTTP: %v", err)
	}
	c, err = load(t, []string{"--insecure-no-encryption", "--node", "n1", "--http-addr", "0.0.0.0:8946", "--insecure-http"}, nil)
	if err != nil || !c.InsecureHTTP {
		t.Fatalf("--insecure-http: %v", err)
	}
	c, err = load(t, []string{"--insecure-no-encryption", "--node", "n1", "--http-addr", "0.0.0.0:8946", "--http-tls-cert-file", "/c", "--http-tls-key-file", "/k"},
		map[string]string{"SHOAL_HTTP_TLS_CERT_FILE": "/env-c"})
	if err != nil || c.HTTPTLSCertFile != "/c" || c.HTTPTLSKeyFile != "/k" {
		t.Fatalf("TLS flags: %v", err)
	}
}

// TestSecretWarnings: a secret given as a flag is in argv, which every
// local user can read; the agent warns. The environment does not.
func TestSecretWarnings(t *testing.T) {
	key := "c2hvYWwtdGVzdC1rZXktMTYhIQ=="
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f := BindFlags(fs)
	if err := fs.Parse([]string{"--node", "n", "--insecure-no-encryption", "--encrypt", key, "--rpc-auth", "sekrit"}); err != nil {
		t.Fatal(err)
	}
	ws := f.SecretWarnings()
	if len(ws) != 2 || !strings.Contains(ws[0], "--encrypt was given on the command line") || !strings.Contains(ws[0], "SHOAL_ENCRYPT") ||
		!strings.Contains(ws[1], "--rpc-auth") || strings.Contains(strings.Join(ws, " "), key) {
		t.Fatalf("warnings = %q", ws)
	}
	fs = pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f = BindFlags(fs)
	if err := fs.Parse([]string{"--node", "n"}); err != nil {
		t.Fatal(err)
	}
	if ws := f.SecretWarnings(); len(ws) != 0 {
		t.Fatalf("no secret flags: warnings = %q", ws)
	}
}
