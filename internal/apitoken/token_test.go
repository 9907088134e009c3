package apitoken

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestCheckDir: owner the agent's user or root, no write for group
// or other; a missing directory is fine.
func TestCheckDir(t *testing.T) {
	d := t.TempDir()
	euid := os.Geteuid()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o700, true}, {0o750, true}, {0o755, true}, {0o770, false}, {0o777, false}, {0o777 | os.ModeSticky, false}} {
		os.Chmod(d, tc.mode)
		err := CheckDir(d, euid)
		if tc.ok != (err == nil) {
			t.Errorf("mode %04o: %v", tc.mode, err)
		}
	}
	os.Chmod(d, 0o700)
	if err := CheckDir(d+"/missing", euid); err != nil {
		t.Errorf("missing: %v", err)
	}
	if euid != 0 {
		if err := CheckDir(d, euid+1); err == nil || !strings.Contains(err.Error(), "is owned by uid") {
			t.Errorf("another user's: %v", err)
		}
	}
}

// TestLoadOrCreate: the first call creates a 0600 token in a new 0700
// directory, the next reads the same token, and the file is never
// replaced.
func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", FileName)
	tok, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	if err := Check(tok); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %04o", p, st.Mode().Perm(), err, want)
		}
	}
	again, created, err := LoadOrCreate(path)
	if err != nil || created || again != tok {
		t.Fatalf("second: %q created %v, %v; want the first token", again, created, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestLoadOrCreateRace: agents starting at once with one path end up with
// one token, created by exactly one of them, and no temp file is left.
func TestLoadOrCreateRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", FileName)
	const n = 8
	type result struct {
		tok     string
		created bool
		err     error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, created, err := LoadOrCreate(path)
			results <- result{tok, created, err}
		}()
	}
	wg.Wait()
	close(results)
	tokens, creators := map[string]bool{}, 0
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		tokens[r.tok] = true
		if r.created {
			creators++
		}
	}
	if len(tokens) != 1 || creators != 1 {
		t.Errorf("%d tokens, %d creators; want one token, one creator", len(tokens), creators)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestLoadOrCreateRefusesAnOpenDirectory: a directory that appeared between
// the config check and the token's creation (here: already there, mode
// 0777) does not receive a token.
func TestLoadOrCreateRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, _, err := LoadOrCreate(filepath.Join(dir, FileName))
	if err == nil || !strings.Contains(err.Error(), "writable by no one else") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err == nil {
		t.Error("a token was written into the open directory")
	}
}

// TestReadRefusesLooseOrShortTokens: a token file readable by group or
// other, or holding a short or non-printable token, is refused.
func TestReadRefusesLooseOrShortTokens(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want       string
	}{
		{"loose", strings.Repeat("a", 43) + "\n", 0o644, ""},
		{"short", "abc\n", 0o600, "want at least"},
		{"space", strings.Repeat("a", 20) + " b\n", 0o600, "space"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.body), tc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, tc.mode)
		_, err := Read(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
