package process

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// fullDir mounts a 64 KiB tmpfs on a new directory and returns it with a
// function that fills it up. The mount is removed at the end of the test.
func fullDir(t *testing.T) (string, func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PASSED: this test mounts a tiny tmpfs to fill the state directory and needs root (run: sudo go test ./test/process/ -run MaintOnAFullDisk)")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: cannot mount a tmpfs (a container without CAP_SYS_ADMIN?): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	fill := func() {
		f, err := os.Create(filepath.Join(dir, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		page := make([]byte, 4096)
		for i := 0; i < 1024; i++ {
			if _, err := f.Write(page); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", dir, err)
				}
				return
			}
		}
		t.Fatalf("%s did not fill up", dir)
	}
	return dir, fill
}

// TestMaintOnAFullDisk: `shoal maint enable` on a node whose state
// directory is full drains the node anyway (every agent's pool holds it
// out for maintenance) and succeeds with a warning that the drain was not
// saved and ends if the agent restarts. It used to fail and leave the node
// in the pool.
func TestMaintOnAFullDisk(t *testing.T) {
	dir, fill := fullDir(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", "x")
	key := newKey(t)
	tagsFile := filepath.Join(dir, "tags.json")
	db := startAgent(t, "full1", key, "--role", "db", "--mysql-addr", ports.Free(t), "--mysql-user", "shoal", "--tags-file", tagsFile)
	app := startAgent(t, "app1", key, "--join", db.bind)
	testkit.WaitFor(t, 20*time.Second, "app1 sees full1", func() bool { return members(t, app.http)["full1"].Status == "alive" })
	fill()

	out, errOut, code := shoal(t, "maint", "enable", "--reason", "disk full", "--http-addr", db.http)
	want := "WARNING: maintenance is in effect on every agent but was not saved to tags_file " + tagsFile
	if code != 0 || !strings.Contains(out, "MAINTENANCE on (NOT SAVED") || !strings.Contains(out, want) ||
		!strings.Contains(out, "no space left on device") || !strings.Contains(out, "it ENDS if this agent restarts") {
		t.Fatalf("maint enable on a full disk: exit %d, want 0 with %q\n%s%s", code, want, out, errOut)
	}
	testkit.WaitFor(t, 20*time.Second, "full1 out for maintenance on app1", func() bool {
		out, _, code := shoal(t, "pool", "--http-addr", app.http, "--format", "json")
		var p poolJSON
		if code != 0 || json.Unmarshal([]byte(out), &p) != nil {
			return false
		}
		return len(p.Out) == 1 && p.Out[0].Name == "full1" && p.Out[0].Reason == "maintenance" && p.Out[0].Detail == "disk full"
	})
	// The state says so while the file does not hold it.
	out, _, _ = shoal(t, "maint", "--http-addr", db.http, "--format", "json")
	var st struct {
		Enabled   bool   `json:"enabled"`
		Persisted bool   `json:"persisted"`
		Warning   string `json:"warning"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Enabled || st.Persisted || !strings.Contains(st.Warning, "no space left on device") {
		t.Errorf("maint state: %v %+v\n%s", err, st, out)
	}
	if strings.Contains(mustRead(t, tagsFile), "maint") {
		t.Error("the tags file holds the maintenance state although it could not be written")
	}
	if !strings.Contains(db.log.String(), "maintenance state not saved") {
		t.Error("full1 did not log the failed save")
	}

	// Space again: enabling again saves it, and the warning goes.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = shoal(t, "maint", "enable", "--reason", "disk full", "--http-addr", db.http)
	if code != 0 || !strings.Contains(out, "survives restarts") || strings.Contains(out, "WARNING") {
		t.Fatalf("maint enable with space: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(mustRead(t, tagsFile), `"maint": "disk full"`) {
		t.Errorf("tags file after the retry:\n%s", mustRead(t, tagsFile))
	}
}
