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

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
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
	if got := entries(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q, want only the file", got)
	}
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

// TestFailedWriteKeepsTheOldFile: when writing the new content fails, the
// old file is untouched and the temp file is gone.
func TestFailedWriteKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := WriteFileAtomic(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	err := replaceFile(path, 0o600, func(f *os.File) error {
		if _, err := f.WriteString("half of the ne"); err != nil {
			return err
		}
		return full
	})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v: want the write's, naming the path", err)
	}
	checkFile(t, path, "old\n", 0o644)
	if got := entries(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q after a failed write, want only the old file", got)
	}
}

// TestFailedReplaceLeavesNothing: a path that cannot be replaced (a
// directory in the way, a missing directory, a read-only one) gives an
// error naming it, keeps what was there and leaves no temp file.
func TestFailedReplaceLeavesNothing(t *testing.T) {
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
	if got := entries(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q, want no temp file", got)
	}

	missing := filepath.Join(dir, "missing", "state")
	if err := WriteFileAtomic(missing, []byte("new"), 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("in a missing directory: %v, want not exist", err)
	}

	if os.Geteuid() == 0 {
		t.Log("running as root: a read-only directory does not stop root, that case is skipped")
		return
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(ro, "state")
	if err := WriteFileAtomic(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o700)
	if err := WriteFileAtomic(path, []byte("new"), 0o600); !errors.Is(err, os.ErrPermission) {
		t.Errorf("in a read-only directory: %v, want permission denied", err)
	}
	checkFile(t, path, "old", 0o600)
	if got := entries(t, ro); !slices.Equal(got, []string{"state"}) {
		t.Errorf("read-only directory holds %q", got)
	}
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
	if got := entries(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q after the writers, want only the file", got)
	}
	t.Logf("%d reads during %d writes", reads, writers*rounds)
}

func TestTempBase(t *testing.T) {
	for _, tc := range []struct {
		name, base string
		ok         bool
	}{
		{".state.tmp123", "state", true},
		{".tags.json.tmp9", "tags.json", true},
		{"state.tmp123", "", false},  // not hidden
		{".state.tmp", "", false},    // no digits
		{".state.tmp12a", "", false}, // not only digits
		{"..tmp1", "", false},        // no base
		{".state", "", false},
	} {
		base, ok := tempBase(tc.name)
		if base != tc.base || ok != tc.ok {
			t.Errorf("tempBase(%q) = %q, %v; want %q, %v", tc.name, base, ok, tc.base, tc.ok)
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
	if got := entries(t, dir); !slices.Equal(got, []string{".other.tmp3", ".state.tmp2", ".state.tmpx", "state"}) {
		t.Errorf("left %q", got)
	}
	if removed, err := RemoveStaleTemps(filepath.Join(dir, "missing"), func(string) bool { return true }, 0); err != nil || removed != nil {
		t.Errorf("missing directory: %q, %v", removed, err)
	}
}
