package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes body to dir/name with exactly mode, whatever the umask
// (the permission checks under test read it), and returns the path.
func WriteFile(t testing.TB, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}
