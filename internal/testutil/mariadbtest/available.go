package mariadbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binaries are the paths of the programs a Server needs.
type binaries struct {
	mariadbd  string
	installDB string
}

var (
	findOnce sync.Once
	found    binaries
	errFind  error
)

// searchDirs are looked at after $PATH: sbin is often not in a test's PATH.
var searchDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"}

func lookup(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range searchDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in $PATH or %v", name, searchDirs)
}

func findBinaries() (binaries, error) {
	findOnce.Do(func() {
		var errs []error
		var err error
		if found.mariadbd, err = lookup("mariadbd"); err != nil {
			errs = append(errs, err)
		}
		if found.installDB, err = lookup("mariadb-install-db"); err != nil {
			errs = append(errs, err)
		}
		errFind = errors.Join(errs...)
	})
	return found, errFind
}

// Available reports whether mariadbd and mariadb-install-db are installed.
// The error says what is missing.
func Available() error {
	if _, err := findBinaries(); err != nil {
		return fmt.Errorf("mariadb server not available: %w", err)
	}
	return nil
}

// Require skips the test when MariaDB is not installed, or fails it when the
// environment variable CI is "true": CI must run these tests, never skip them.
func Require(t testing.TB) {
	t.Helper()
	err := Available()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v (CI=true: real-server tests must not be skipped; install mariadb-server)", err)
	}
	t.Skipf("%v (install mariadb-server to run this test)", err)
}
