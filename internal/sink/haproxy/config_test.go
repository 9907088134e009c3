package haproxy

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Timeout != 2*time.Second || c.Interval != time.Second || c.Match != MatchName ||
		c.ServerName != "{{.Name}}" || c.DrainState != StateMaint || c.Weight != 0 {
		t.Errorf("defaults: %+v", c)
	}
	if c := (Config{Match: MatchAddr}).WithDefaults(); c.ServerName != "" {
		t.Errorf("match addr got server_name %q", c.ServerName)
	}
	if err := testConfig().Validate(); err != nil {
		t.Errorf("test config: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want []string // each must appear in the error; none means valid
	}{
		{"tcp address", func(c *Config) { c.Address = "127.0.0.1:9999" }, nil},
		{"ipv6 address", func(c *Config) { c.Address = "[::1]:9999" }, nil},
		{"addr match", func(c *Config) { c.Match = MatchAddr }, nil},
		{"drain, weight, bounds", func(c *Config) {
			c.DrainState, c.Weight, c.Interval, c.Timeout = StateDrain, 256, MinInterval, MinTimeout
		}, nil},
		{"no address", func(c *Config) { c.Address = "" }, []string{`address "": required`}},
		{"relative socket", func(c *Config) { c.Address = "unix:admin.sock" }, []string{`address "unix:admin.sock": unix socket path must be absolute`}},
		{"long socket", func(c *Config) { c.Address = "unix:/" + strings.Repeat("x", 107) }, []string{"longer than 107 bytes"}},
		{"no port", func(c *Config) { c.Address = "localhost" }, []string{`address "localhost": want "unix:/path" or "host:port"`}},
		{"bad port", func(c *Config) { c.Address = "localhost:0" }, []string{`address "localhost:0": port "0" must be within 1-65535`}},
		{"no host", func(c *Config) { c.Address = ":9999" }, []string{`address ":9999": host is empty`}},
		{"interval", func(c *Config) { c.Interval = 100 * time.Millisecond }, []string{`interval "100ms": must be within 500ms-10m0s`}},
		{"timeout", func(c *Config) { c.Timeout = time.Minute }, []string{`timeout "1m0s": must be within 10ms-30s`}},
		{"match", func(c *Config) { c.Match = "ip" }, []string{`match "ip": must be "name" or "addr"`}},
		{"template with addr", func(c *Config) { c.Match, c.ServerName = MatchAddr, "{{.Name}}" }, []string{`server_name "{{.Name}}": must be empty with match "addr"`}},
		{"template parse", func(c *Config) { c.ServerName = "{{.Name" }, []string{`server_name "{{.Name": parse template:`}},
		{"template field", func(c *Config) { c.ServerName = "{{.Role}}" }, []string{`server_name "{{.Role}}": with node`, "can't evaluate field Role"}},
		{"template empty result", func(c *Config) { c.ServerName = "{{/* nothing */}}" }, []string{"empty"}},
		{"weight", func(c *Config) { c.Weight = 300 }, []string{`weight "300": must be within 0-256`}},
		{"drain state", func(c *Config) { c.DrainState = "ready" }, []string{`drain_state "ready": must be "maint" or "drain"`}},
		{"no backends", func(c *Config) { c.Backends = nil }, []string{`backends "[]": at least one mapping`}},
		{"mapping fields", func(c *Config) { c.Backends[1] = Mapping{Role: "primary", Backend: "db ro"} }, []string{
			`backends[1].cluster "": required`,
			`backends[1].role "primary": must be "writer" or "reader"`,
			`backends[1].backend "db ro": invalid character ' '`,
		}},
		{"injection", func(c *Config) { c.Backends[0].Backend = "a;shutdown" }, []string{`invalid character ';'`}},
		{"duplicate backend", func(c *Config) { c.Backends[1].Backend = "db_rw" }, []string{`backends[1].backend "db_rw": already mapped by backends[0]`}},
		{"every problem", func(c *Config) { c.Address, c.Weight = "", -1 }, []string{"address ", `weight "-1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig()
			c.Backends = append([]Mapping(nil), c.Backends...)
			tt.mod(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}
