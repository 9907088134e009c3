package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shoaldb/shoal/internal/setting"
)

// Defaults and bounds.
const (
	DefaultSize     = 1000
	DefaultMaxBytes = 10 << 20
	DefaultKeep     = 3

	MaxSize     = 1_000_000
	MinMaxBytes = 4 << 10
	MaxKeep     = 100
)

// Config configures a Log; it is the agent's history section, with its yaml
// keys. Zero fields take the defaults (see WithDefaults).
type Config struct {
	// Size is the ring's capacity in entries (default 1000, 1-1,000,000).
	Size int `yaml:"size"`
	// File, when set, is the JSON-lines file every entry is appended to.
	// Its directory must exist. Empty keeps the ring only.
	File string `yaml:"file"`
	// MaxBytes is the size the file is rotated at: a line that would make
	// it larger starts a fresh file (default 10 MiB, minimum 4 KiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// Keep is how many rotated files (File.1 … File.Keep) are kept
	// (default 3, 1-100).
	Keep int `yaml:"keep"`
}

// DefaultConfig returns a Config with every default filled in (ring only).
func DefaultConfig() Config {
	return Config{}.WithDefaults()
}

// WithDefaults returns c with zero fields replaced by their defaults.
func (c Config) WithDefaults() Config {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Keep == 0 {
		c.Keep = DefaultKeep
	}
	return c
}

// Validate checks c after applying defaults. Every problem is reported, as
// a *setting.Error naming the key (size, file, max_bytes, keep: the
// agent's history section) and the bad value.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs setting.Errors
	if c.Size < 1 || c.Size > MaxSize {
		errs.Addf("size", c.Size, "must be within 1-%d", MaxSize)
	}
	if c.MaxBytes < MinMaxBytes {
		errs.Addf("max_bytes", c.MaxBytes, "must be at least %d", MinMaxBytes)
	}
	if c.Keep < 1 || c.Keep > MaxKeep {
		errs.Addf("keep", c.Keep, "must be within 1-%d", MaxKeep)
	}
	if c.File != "" {
		errs.Add("file", c.File, checkFile(c.File))
	}
	return errs.Err()
}

// checkFile checks that path can name the history file: its directory
// exists, and path itself is not a directory.
func checkFile(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return errors.New("exists and is not a regular file")
	}
	return nil
}
