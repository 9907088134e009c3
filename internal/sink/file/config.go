package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/setting"
)

// Defaults and bounds.
const (
	DefaultMode     = "0644"
	DefaultInterval = 5 * time.Second

	// MinInterval keeps the retry of a failed apply from spinning.
	MinInterval = 100 * time.Millisecond
	MaxInterval = 10 * time.Minute
	// MaxMode is the largest file mode: permission bits only.
	MaxMode = 0o777
)

// Config configures the file sink. Zero fields take the defaults (see
// WithDefaults).
type Config struct {
	// Path is the JSON file holding the pool. Required; its directory must
	// exist.
	Path string `yaml:"path"`
	// ListsDir, when set, also receives one plain-text list of "host:port"
	// per cluster and role: <cluster>-writers.txt and <cluster>-readers.txt.
	// It must exist.
	ListsDir string `yaml:"lists_dir"`
	// Mode is the files' permission bits as an octal string, such as "0640"
	// (default "0644", at most "0777").
	Mode string `yaml:"mode"`
	// Interval between retries of the last pool after a failed apply
	// (default 5 s, minimum 100 ms). Nothing is rewritten while applies
	// succeed.
	Interval time.Duration `yaml:"interval"`
}

// WithDefaults returns c with zero fields replaced by their defaults.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = DefaultMode
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	return c
}

// Validate checks c after applying defaults. Every problem is reported, as
// a *setting.Error naming the key and the bad value (the agent's config
// adds the section, sinks.file). It checks that the directories exist.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs setting.Errors
	if msg := checkPath(c.Path); msg != "" {
		errs.Addf("path", c.Path, "%s", msg)
	}
	if c.ListsDir != "" {
		if msg := checkDir(c.ListsDir); msg != "" {
			errs.Addf("lists_dir", c.ListsDir, "%s", msg)
		}
	}
	if _, err := parseMode(c.Mode); err != nil {
		errs.Add("mode", c.Mode, err)
	}
	if c.Interval < MinInterval || c.Interval > MaxInterval {
		errs.Addf("interval", c.Interval, "must be within %s-%s", MinInterval, MaxInterval)
	}
	return errs.Err()
}

// checkPath describes what is wrong with the JSON file's path, or returns "".
func checkPath(path string) string {
	if path == "" {
		return "required"
	}
	if strings.HasSuffix(path, "/") {
		return "names a directory, want a file"
	}
	dir := filepath.Dir(path)
	if msg := checkDir(dir); msg != "" {
		return "directory " + dir + " " + msg
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "is a directory, want a file"
	}
	return ""
}

// checkDir describes what is wrong with dir, or returns "".
func checkDir(dir string) string {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case err != nil:
		return err.Error()
	case !fi.IsDir():
		return "is not a directory"
	}
	return ""
}

// parseMode reads an octal file mode such as "0640", "640" or "0o640".
func parseMode(s string) (os.FileMode, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	n, err := strconv.ParseUint(digits, 8, 32)
	if err != nil || digits == "" {
		return 0, errors.New(`want an octal mode such as "0644"`)
	}
	if n > MaxMode {
		return 0, fmt.Errorf("must be within 0-%#o", MaxMode)
	}
	return os.FileMode(n), nil
}
