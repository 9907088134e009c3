package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/shoaldb/shoal/internal/sink"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Mode != "0644" || c.Interval != 5*time.Second || c.Path != "" || c.ListsDir != "" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestConfigYAML(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want os.FileMode
	}{
		{"mode: 0640", 0o640},
		{`mode: "0640"`, 0o640},
		{"mode: 600", 0o600},
		{"mode: 0o400", 0o400},
		{"mode: 0", 0},
	} {
		var c Config
		dec := yaml.NewDecoder(strings.NewReader("path: /tmp/pool.json\nlists_dir: /tmp\ninterval: 250ms\n" + tt.yaml))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", tt.yaml, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tt.yaml, err)
		}
		if m, err := parseMode(c.Mode); err != nil || m != tt.want {
			t.Errorf("%s: mode %q = %v, %v; want %v", tt.yaml, c.Mode, m, err, tt.want)
		}
		if c.Path != "/tmp/pool.json" || c.ListsDir != "/tmp" || c.Interval != 250*time.Millisecond {
			t.Errorf("%s: %+v", tt.yaml, c)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	lists := filepath.Join(dir, "lists")
	regular := filepath.Join(dir, "regular")
	for _, d := range []string{lists, filepath.Join(dir, "taken.json")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(regular, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Relative paths are accepted; run from dir so they resolve there.
	t.Chdir(dir)

	tests := []struct {
		name string
		mod  func(*Config)
		want []string // each must appear in the error; none means valid
	}{
		{"minimal", func(c *Config) { c.ListsDir, c.Mode, c.Interval = "", "", 0 }, nil},
		{"relative path", func(c *Config) { c.Path = "pool.json" }, nil},
		{"relative lists_dir", func(c *Config) { c.ListsDir = "lists" }, nil},
		{"existing file", func(c *Config) { c.Path = regular }, nil},
		{"bounds", func(c *Config) { c.Mode, c.Interval = "0777", MinInterval }, nil},
		{"max interval", func(c *Config) { c.Mode, c.Interval = "0", MaxInterval }, nil},
		{"no path", func(c *Config) { c.Path = "" }, []string{`path "": required`}},
		{"missing directory", func(c *Config) { c.Path = "x/y.json" }, []string{`path "x/y.json": directory x does not exist`}},
		{"directory is a file", func(c *Config) { c.Path = "regular/y.json" }, []string{`path "regular/y.json": directory regular is not a directory`}},
		{"path is a directory", func(c *Config) { c.Path = "taken.json" }, []string{`path "taken.json": is a directory, want a file`}},
		{"trailing slash", func(c *Config) { c.Path = dir + "/" }, []string{`path "` + dir + `/": names a directory`}},
		{"missing lists_dir", func(c *Config) { c.ListsDir = "nope" }, []string{`lists_dir "nope": does not exist`}},
		{"lists_dir is a file", func(c *Config) { c.ListsDir = regular }, []string{`lists_dir "` + regular + `": is not a directory`}},
		{"mode not octal", func(c *Config) { c.Mode = "0999" }, []string{`mode "0999": want an octal mode such as "0644"`}},
		{"mode not a number", func(c *Config) { c.Mode = "rw-r--r--" }, []string{`mode "rw-r--r--": want an octal mode`}},
		{"mode too large", func(c *Config) { c.Mode = "01000" }, []string{`mode "01000": must be within 0-0777`}},
		{"interval too short", func(c *Config) { c.Interval = 50 * time.Millisecond }, []string{`interval "50ms": must be within 100ms-10m0s`}},
		{"interval too long", func(c *Config) { c.Interval = time.Hour }, []string{`interval "1h0m0s": must be within 100ms-10m0s`}},
		{"every problem", func(c *Config) { c.Path, c.ListsDir, c.Mode, c.Interval = "", "nope", "8", -1 }, []string{
			`path "": required`, `lists_dir "nope"`, `mode "8"`, `interval "-1ns"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Path: filepath.Join(dir, "pool.json"), ListsDir: lists, Mode: "0640", Interval: time.Second}
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
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "path ") && !strings.HasPrefix(line, "lists_dir ") &&
					!strings.HasPrefix(line, "mode ") && !strings.HasPrefix(line, "interval ") {
					t.Errorf("error line %q does not start with its key", line)
				}
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}, "db1", sink.Options{}); err == nil || !strings.Contains(err.Error(), `path "": required`) {
		t.Errorf("New with empty config: %v", err)
	}
	path := filepath.Join(t.TempDir(), "pool.json")
	if _, err := New(Config{Path: path}, "db1", sink.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("New wrote %s: %v", path, err)
	}
}
