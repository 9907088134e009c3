package process

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestAgentsCannotShareStateFiles: a second agent naming the state files of
// a running one (snapshot, tags file with the maintenance state, history)
// refuses to start with exit status 2, naming the file, the lock file and
// the PID holding it; the first runs on. The lock dies with its process:
// after kill -9 a new agent starts on the same files.
func TestAgentsCannotShareStateFiles(t *testing.T) {
	key := newKey(t)
	dir := t.TempDir()
	snapshot, tagsFile := filepath.Join(dir, "snapshot"), filepath.Join(dir, "tags.json")
	state := []string{"--snapshot", snapshot, "--tags-file", tagsFile, "--history-file", filepath.Join(dir, "history.jsonl")}
	a := startAgent(t, "lock1", key, state...)
	testkit.WaitFor(t, 20*time.Second, "lock1 alive", func() bool { return members(t, a.http)["lock1"].Status == "alive" })

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"same state files", state, fmt.Sprintf(`snapshot (--snapshot) %q: in use by another shoal agent (pid %d, lock file %s.lock)`, snapshot, a.cmd.Process.Pid, snapshot)},
		{"same tags file", []string{"--tags-file", tagsFile}, fmt.Sprintf(`tags_file (--tags-file) %q: in use by another shoal agent (pid %d, lock file %s.lock)`, tagsFile, a.cmd.Process.Pid, tagsFile)},
	} {
		b := startAgent(t, "lock2", key, tc.args...) // its own ports and token file
		if code := exitCode(t, b, 30*time.Second); code != 2 || !strings.Contains(b.log.String(), tc.want) {
			t.Errorf("%s: second agent exited %d, want 2 with %q; log:\n%s", tc.name, code, tc.want, b.log.String())
		}
	}
	select {
	case <-a.done:
		t.Fatalf("the first agent stopped: %v", a.err)
	default:
	}
	if members(t, a.http)["lock1"].Status != "alive" {
		t.Fatal("the first agent no longer answers")
	}

	// kill -9 leaves the lock files, not the locks.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	c := startAgent(t, "lock1", key, state...)
	testkit.WaitFor(t, 20*time.Second, "a new agent on the same files", func() bool { return members(t, c.http)["lock1"].Status == "alive" })
}
