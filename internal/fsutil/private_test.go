package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestReadPrivateFile: a regular file no group or other may access is
// read, up to MaxSecretFile; anything looser, not regular, too large or
// missing is refused with the path and the fix.
func TestReadPrivateFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		return testkit.WriteFile(t, dir, name, string(data), mode)
	}
	for _, mode := range []os.FileMode{0o600, 0o400, 0o700} {
		p := write(fmt.Sprintf("ok%o", mode), []byte("s3cret\n"), mode)
		if b, err := ReadPrivateFile(p); err != nil || string(b) != "s3cret\n" {
			t.Errorf("mode %04o: %q, %v", mode, b, err)
		}
	}
	if b, err := ReadPrivateFile(write("max", make([]byte, MaxSecretFile), 0o600)); err != nil || len(b) != MaxSecretFile {
		t.Errorf("%d bytes: %d, %v", MaxSecretFile, len(b), err)
	}
	for _, tc := range []struct {
		name string
		path string
		want string
	}{
		{"group readable", write("g", []byte("x"), 0o640), "has mode 0640"},
		{"other readable", write("o", []byte("x"), 0o604), "chmod 600"},
		{"group writable", write("gw", []byte("x"), 0o620), "must not be accessible by group or other"},
		{"too large", write("big", make([]byte, MaxSecretFile+1), 0o600), "larger than 64 KiB"},
		{"a directory", dir, "not a regular file"},
	} {
		_, err := ReadPrivateFile(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", tc.name, err, tc.path, tc.want)
		}
	}
	if _, err := ReadPrivateFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v, want not exist", err)
	}
}

// TestReadPrivateFileFollowsTheOpenedFile: the mode checked is the file's
// the path leads to, through a symlink.
func TestReadPrivateFileFollowsTheOpenedFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrivateFile(link); err == nil || !strings.Contains(err.Error(), "has mode 0644") {
		t.Errorf("a link to a 0644 file: %v", err)
	}
}

func TestOwner(t *testing.T) {
	fi, err := os.Stat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if uid, ok := Owner(fi); !ok || uid != os.Geteuid() {
		t.Errorf("Owner = %d, %v; want %d", uid, ok, os.Geteuid())
	}
}
