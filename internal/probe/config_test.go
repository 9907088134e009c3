package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
)

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	if c.Host != "127.0.0.1" || c.Port != 3306 || c.Interval != 250*time.Millisecond ||
		c.Timeout != 500*time.Millisecond || c.Rise != 2 || c.Fall != 2 || c.ReconnectMax != time.Second {
		t.Errorf("defaults: %+v", c)
	}
	s := Config{Socket: "/run/mysqld/mysqld.sock"}.WithDefaults()
	if s.Host != "" || s.Port != 0 {
		t.Errorf("socket config got host %q port %d", s.Host, s.Port)
	}
	if err := (Config{User: "shoal"}).Validate(); err != nil {
		t.Errorf("defaults with a user: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{User: "shoal"}
	tests := []struct {
		name string
		mod  func(*Config)
		want []string // substrings of the error; nil = valid
	}{
		{"valid tcp", func(c *Config) {}, nil},
		{"valid socket", func(c *Config) { c.Socket = "/run/mysqld/mysqld.sock" }, nil},
		{"socket with localhost", func(c *Config) { c.Socket = "/tmp/m.sock"; c.Host = "localhost" }, nil},
		{"minimum interval", func(c *Config) { c.Interval = 50 * time.Millisecond }, nil},
		{"no user", func(c *Config) { c.User = "" }, []string{"probe user", "required"}},
		{"interval too small", func(c *Config) { c.Interval = 10 * time.Millisecond }, []string{"probe interval = 10ms", "50ms"}},
		{"negative interval", func(c *Config) { c.Interval = -time.Second }, []string{"probe interval = -1s"}},
		{"timeout too big", func(c *Config) { c.Timeout = time.Minute }, []string{"probe timeout = 1m0s", "10s"}},
		{"timeout too small", func(c *Config) { c.Timeout = time.Millisecond }, []string{"probe timeout = 1ms"}},
		{"rise", func(c *Config) { c.Rise = -1 }, []string{"probe rise = -1"}},
		{"fall", func(c *Config) { c.Fall = 1000 }, []string{"probe fall = 1000"}},
		{"port", func(c *Config) { c.Port = 70000 }, []string{"probe port = 70000"}},
		{"relative socket", func(c *Config) { c.Socket = "mysqld.sock" }, []string{`probe socket = "mysqld.sock"`, "absolute"}},
		{"long socket", func(c *Config) { c.Socket = "/" + strings.Repeat("x", 200) }, []string{"probe socket", "longer than 107"}},
		{"socket and host", func(c *Config) { c.Socket = "/tmp/m.sock"; c.Host = "10.0.0.1" }, []string{`probe host = "10.0.0.1"`, "socket"}},
		{"reconnect below interval", func(c *Config) { c.Interval = time.Second; c.ReconnectMax = 500 * time.Millisecond }, []string{"probe reconnect_max = 500ms"}},
		{"all errors reported", func(c *Config) { c.User = ""; c.Rise = -1; c.Fall = -1 }, []string{"user", "rise", "fall"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigNeverPrintsPassword(t *testing.T) {
	c := Config{User: "shoal", Password: "s3cret-pw"}.WithDefaults()
	if s := c.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "password_set=true") {
		t.Errorf("String() = %q", s)
	}
	if _, err := New(Config{Password: "s3cret-pw"}, nil, nil); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New error %v", err)
	}
}

// The settings' defaults are the Config's, and their limits the ones
// Validate applies, each error naming the setting's key.
func TestSettings(t *testing.T) {
	d := DefaultSettings()
	pc, err := Settings{Addr: "127.0.0.1:3306", User: "u", Interval: d.Interval, Timeout: d.Timeout, Rise: d.Rise, Fall: d.Fall}.Config(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{User: "u"}).WithDefaults(); pc != want {
		t.Errorf("default settings give %+v, want the default Config %+v", pc, want)
	}
	if err := d.Check(); err != nil {
		t.Errorf("DefaultSettings().Check() = %v", err)
	}
	for _, tc := range []struct {
		mod  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.Timeout = 20 * time.Second }, `timeout "20s": must be from 10ms to 10s`},
		{func(s *Settings) { s.Interval = MaxInterval + 1 }, `interval "1m0.000000001s": must be from 50ms to 1m`},
		{func(s *Settings) { s.Rise = 0 }, `rise "0": must be from 1 to 100`},
		{func(s *Settings) { s.Addr = "db" }, `addr "db": want host:port`},
		{func(s *Settings) { s.Addr, s.Socket = "db:3306", "/s" }, `socket "/s": give mysql.addr or mysql.socket, not both`},
		{func(s *Settings) { s.Port = 70000 }, `port "70000": must be from 1 to 65535`},
	} {
		s := DefaultSettings()
		tc.mod(&s)
		if err := s.Check(); setting.One(err) == nil || err.Error() != tc.want {
			t.Errorf("Check() = %v, want the one *setting.Error %q", err, tc.want)
		}
	}
	if p := (Settings{Addr: "db:3307"}).PublishedPort(); p != 3307 {
		t.Errorf("PublishedPort of db:3307 = %d", p)
	}
	if p := (Settings{Socket: "/s", Port: 6033}).PublishedPort(); p != 6033 {
		t.Errorf("PublishedPort with port 6033 = %d", p)
	}
	if p := (Settings{Socket: "/s"}).PublishedPort(); p != DefaultPort {
		t.Errorf("PublishedPort of a socket = %d", p)
	}
}
