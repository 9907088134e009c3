package hooks

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestTimeoutKillsEscapedChildren: a hook's children that left its process
// group and session (setsid), directly or through a double fork whose
// middle process exited at once, die with the hook when it times out, and
// are reaped (no zombie stays behind).
func TestTimeoutKillsEscapedChildren(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("no /usr/bin/setsid (util-linux)")
	}
	for name, script := range map[string]string{
		"setsid":      "setsid sleep 300 &\necho $! > pids.tmp; mv pids.tmp pids\n",
		"double fork": "( setsid sleep 300 & echo $! > pids.tmp; mv pids.tmp pids ) &\nwait\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			// Marks this subtest's processes, found through /proc whatever
			// pid setsid ended up with.
			mark := fmt.Sprintf("SHOAL_HOOKS_TEST_MARK=%d-%s", time.Now().UnixNano(), strings.ReplaceAll(name, " ", "-"))
			t.Setenv("SHOAL_HOOKS_TEST_MARK", strings.TrimPrefix(mark, "SHOAL_HOOKS_TEST_MARK="))
			t.Cleanup(func() { killMarked(mark) })
			path := filepath.Join(dir, "hook.sh")
			body := "#!/bin/sh\n" + script + "sleep 1000\n"
			if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			spec := "user=" + path
			r, _ := newTestRunner(t, Config{Dir: dir, Timeout: 3 * time.Second, KillGrace: 500 * time.Millisecond,
				EnvAllow: []string{"SHOAL_HOOKS_TEST_MARK"}}, spec)
			r.Enqueue(serf.UserEvent{Name: "x"})
			testkit.WaitFor(t, 60*time.Second, "the run to time out", func() bool { return stats(t, r, spec).TimedOut == 1 })
			if !fileExists(filepath.Join(dir, "pids")) {
				t.Fatal("the hook did not start its background sleep before the timeout")
			}
			pids := readPIDs(t, filepath.Join(dir, "pids"))
			testkit.WaitFor(t, 30*time.Second, "no sleep 300 of the hook to remain", func() bool {
				return len(marked(mark, "sleep\x00300\x00")) == 0
			})
			// Reaped, not a zombie: the agent (here the test binary) is their
			// subreaper and must wait for them.
			testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("pid %v to be reaped", pids), func() bool {
				_, err := os.Stat(fmt.Sprintf("/proc/%d", pids[0]))
				return os.IsNotExist(err)
			})
		})
	}
}

// TestDetachedOrphanIsReaped: a detached background process outlives its
// hook, as with Serf, and is reaped by the agent (its subreaper) when it
// exits.
func TestDetachedOrphanIsReaped(t *testing.T) {
	dir := t.TempDir()
	spec := `user=sh -c 'sleep 2 >/dev/null 2>&1 & echo $! > pid.tmp; mv pid.tmp pid'`
	r, _ := newTestRunner(t, Config{Dir: dir}, spec)
	r.Enqueue(serf.UserEvent{Name: "x"})
	testkit.WaitFor(t, 30*time.Second, "the run to finish", func() bool { return stats(t, r, spec).Ran == 1 })
	pid := readPIDs(t, filepath.Join(dir, "pid"))[0]
	killOnCleanup(t, []int{pid})
	testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("pid %d to exit and be reaped", pid), func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err)
	})
}

func TestParseStat(t *testing.T) {
	st, err := parseStat([]byte("42 (a) b (c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 1000 10"))
	if err != nil || st.ppid != 7 || st.start != 12345 || st.zombie {
		t.Errorf("got %+v, %v", st, err)
	}
	st, err = parseStat([]byte("42 (z) Z 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 99 0 0"))
	if err != nil || !st.zombie || st.start != 99 {
		t.Errorf("zombie: got %+v, %v", st, err)
	}
	for _, bad := range []string{"", "42 no paren", "42 (x) S", "42 (x) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// marked returns the live processes whose environment holds mark and whose
// command line is cmdline (NUL-separated).
func marked(mark, cmdline string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if cmdline != "" && string(cl) != cmdline {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, v := range bytes.Split(env, []byte{0}) {
			if string(v) == mark {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// killMarked kills what a failed test left behind.
func killMarked(mark string) {
	for _, pid := range marked(mark, "") {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
}
