package fsutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// holdsOnly fails unless dir holds exactly names, sorted (hidden ones
// too: no temp file left).
func holdsOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

// checkFile fails unless path holds want with mode perm.
func checkFile(t *testing.T, path, want string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s = %q, %v; want %q", path, b, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != perm {
		t.Errorf("%s: mode %v, %v; want %04o", path, fi.Mode().Perm(), err, perm)
	}
}

// TestWriteFileAtomicReplaces: a new file and a replaced one hold the data
// with exactly the mode given, whatever the old mode and the umask, and
// nothing else is left in the directory.
func TestWriteFileAtomicReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := WriteFileAtomic(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, "one\n", 0o600)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	if err := WriteFileAtomic(path, []byte("two\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, "two\n", 0o640)
	holdsOnly(t, dir, "state")
}

// TestWriteFileAtomicOwner: the new file belongs to the writing process,
// not to the old file's owner (checked as root, who can give the old file
// away).
func TestWriteFileAtomicOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFileAtomic(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if uid, ok := Owner(fi); !ok || uid != os.Geteuid() {
		t.Errorf("owner %d (%v), want the process's uid %d", uid, ok, os.Geteuid())
	}
}

// TestFailedReplaceKeepsTheOldFile: when the new content cannot be
// written (the writer fails, or the directory is read-only), the old file
// is untouched, the error names the path, and no temp file is left.
func TestFailedReplaceKeepsTheOldFile(t *testing.T) {
	full := errors.New("no space left on device")
	for _, tc := range []struct {
		name     string
		readOnly bool // the directory, after the old file is written
		write    func(path string) error
		want     error
	}{
		{"failing write", false, func(path string) error {
			return replaceFile(path, 0o600, func(f *os.File) error {
				if _, err := f.WriteString("half of the ne"); err != nil {
					return err
				}
				return full
			})
		}, full},
		{"read-only directory", true, func(path string) error {
			return WriteFileAtomic(path, []byte("new\n"), 0o600)
		}, os.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.readOnly && os.Geteuid() == 0 {
				t.Skip("a read-only directory does not stop root")
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "state")
			if err := WriteFileAtomic(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.readOnly {
				if err := os.Chmod(dir, 0o500); err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(dir, 0o700)
			}
			if err := tc.write(path); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v: want %v, naming the path", err, tc.want)
			}
			checkFile(t, path, "old\n", 0o644)
			holdsOnly(t, dir, "state")
		})
	}
}

// TestReplaceRefused: a directory in the way of the path, or a missing
// directory, is an error naming the path, and nothing changes.
func TestReplaceRefused(t *testing.T) {
	dir := t.TempDir()
	inTheWay := filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(inTheWay, "keep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(inTheWay, []byte("new"), 0o600); err == nil || !strings.Contains(err.Error(), inTheWay) {
		t.Errorf("over a directory: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(inTheWay, "keep")); err != nil || !fi.IsDir() {
		t.Errorf("the directory in the way changed: %v", err)
	}
	holdsOnly(t, dir, "state")
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "state"), []byte("new"), 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("in a missing directory: %v, want not exist", err)
	}
	holdsOnly(t, dir, "state")
}

// TestConcurrentWriters: writers racing on one path each replace it whole;
// a reader meanwhile sees one writer's complete content every time, never
// a mix or a short file; no temp file is left.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	// Writer w writes rounds of w+1 KiB of its own letter.
	content := func(w int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, (w+1)<<10) }
	valid := func(b []byte) bool {
		return len(b) > 0 && bytes.Equal(b, content(int(b[0]-'a')))
	}
	if err := WriteFileAtomic(path, content(0), 0o600); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := WriteFileAtomic(path, content(w), 0o600); err != nil {
					errs <- err
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	reads := 0
	for stop := false; !stop; reads++ {
		select {
		case <-done:
			stop = true
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil || !valid(b) {
			t.Fatalf("read %d: %d bytes starting %q, %v: not one writer's whole content", reads, len(b), b[:min(len(b), 8)], err)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	holdsOnly(t, dir, "state")
	t.Logf("%d reads during %d writes", reads, writers*rounds)
}

// TestTempBase: the base of a temp file's name, "" for a name that is
// not one.
func TestTempBase(t *testing.T) {
	for name, want := range map[string]string{
		".state.tmp123":   "state",
		".tags.json.tmp9": "tags.json",
		"state.tmp123":    "", // not hidden
		".state.tmp":      "", // no digits
		".state.tmp12a":   "", // not only digits
		"..tmp1":          "", // no base
		".state":          "",
	} {
		if base, ok := tempBase(name); base != want || ok != (want != "") {
			t.Errorf("tempBase(%q) = %q, %v; want %q", name, base, ok, want)
		}
	}
}

// TestRemoveStaleTemps: old temp files of a matching base go; fresh ones,
// other bases and other files stay; a missing directory is no error.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{".state.tmp1", ".state.tmp2", ".other.tmp3", "state", ".state.tmpx"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if n != ".state.tmp2" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed, err := RemoveStaleTemps(dir, func(base string) bool { return base == "state" }, time.Minute)
	if err != nil || !slices.Equal(removed, []string{filepath.Join(dir, ".state.tmp1")}) {
		t.Errorf("removed %q, %v; want only the old .state.tmp1", removed, err)
	}
	holdsOnly(t, dir, ".other.tmp3", ".state.tmp2", ".state.tmpx", "state")
	if removed, err := RemoveStaleTemps(filepath.Join(dir, "missing"), func(string) bool { return true }, 0); err != nil || removed != nil {
		t.Errorf("missing directory: %q, %v", removed, err)
	}
}
