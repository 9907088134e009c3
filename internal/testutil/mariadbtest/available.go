package mariadbtest

import (
	"fmt"
	"os"
	"testing"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
)

// findBinaries looks the server's programs up (internal/mariadb/launch).
func findBinaries() (launch.Binaries, error) { return launch.FindBinaries() }

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
