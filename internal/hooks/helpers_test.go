package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

// TestMain lets the test binary act as a handler: "hook-helper dump DIR"
// writes its environment (NUL-separated) to DIR/env and its stdin to
// DIR/stdin. Being exec'd directly, it shows exactly what a handler that is
// not a shell receives.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "hook-helper" {
		os.Exit(helper(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func helper(args []string) int {
	if len(args) != 2 || args[0] != "dump" {
		fmt.Fprintln(os.Stderr, "usage: hook-helper dump DIR")
		return 2
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Write stdin first: the test waits for the env file.
	if err := os.WriteFile(filepath.Join(args[1], "stdin"), in, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := strings.Join(os.Environ(), "\x00")
	if err := os.WriteFile(filepath.Join(args[1], "env.tmp"), []byte(env), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Rename(filepath.Join(args[1], "env.tmp"), filepath.Join(args[1], "env")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperSpec is a spec running this test binary as "hook-helper dump dir".
func helperSpec(t *testing.T, filter, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return filter + "=" + shQuote(exe) + " hook-helper dump " + shQuote(dir)
}

// logBuffer collects JSON log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the records whose msg is msg.
func (l *logBuffer) records(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			panic(fmt.Sprintf("log line %q: %v", line, err))
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

var testSelf = serf.Member{Name: "db1", Tags: map[string]string{"role": "db", "dc": "east"}}

// newTestRunner starts a runner running specs in a temporary directory,
// closed at the end of the test.
func newTestRunner(t *testing.T, cfg Config, specs ...string) (*Runner, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if cfg.Logger == nil {
		cfg.Logger = newJSONLogger(logs)
	}
	if cfg.Self == nil {
		cfg.Self = func() serf.Member { return testSelf }
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	parsed, err := ParseSpecs(specs)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg, parsed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, r) })
	return r, logs
}

// closeWithin closes r, failing (not hanging) the test when Close does
// not return within a generous bound.
func closeWithin(t *testing.T, r *Runner) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Errorf("Close did not return within 60s")
	}
}

// stats returns the stats of the handler with spec raw.
func stats(t *testing.T, r *Runner, raw string) HandlerStats {
	t.Helper()
	for _, s := range r.Stats() {
		if s.Spec == raw {
			return s
		}
	}
	t.Fatalf("no handler %q", raw)
	return HandlerStats{}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readPIDs reads the whitespace-separated PIDs a handler wrote to path.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(readFile(t, path)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid %q in %s: %v", f, path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether pid runs: it exists and is not a zombie (in a
// container nothing may reap the orphans we killed).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// killOnCleanup makes sure a test never leaves pids behind, whatever it
// asserts.
func killOnCleanup(t *testing.T, pids []int) {
	t.Cleanup(func() {
		for _, pid := range pids {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}
