// Package demo_test runs the demo as a newcomer does: make demo, make
// demo-fault, make demo-stop, with real MariaDB, HAProxy and agents.
package demo_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/demo"
	"github.com/shoaldb/shoal/internal/testutil/haproxytest"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// freeBase finds a port base whose 40 ports are free (TCP and UDP), away
// from the default 13300 so a user's demo can run beside the test, and
// below the kernel's ephemeral range (32768 and up): a port found free
// there can be taken by any outgoing connection or test listener in the
// half minute the demo takes to start (seen: "ports in use: [50984]").
func freeBase(t *testing.T) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := 20000 + int(time.Now().UnixNano()%600)*20
		ok := true
		for p := base + 1; p <= base+40 && ok; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
			u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range found")
	return 0
}

type runner struct {
	t    *testing.T
	ctx  context.Context
	root string
	vars []string
}

// make runs a make target with the demo's variables; it returns the output
// and the exit code.
func (r *runner) make(target string) (string, int) {
	r.t.Helper()
	t0 := time.Now()
	cmd := exec.CommandContext(r.ctx, "make", append([]string{"--no-print-directory", target}, r.vars...)...)
	cmd.Dir = r.root
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			r.t.Fatalf("make %s: %v", target, err)
		}
		code = ee.ExitCode()
	}
	r.t.Logf("make %s: exit %d in %s\n%s", target, code, time.Since(t0).Round(100*time.Millisecond), out)
	return string(out), code
}

type poolJSON struct {
	Writers []struct{ Name string } `json:"writers"`
	Readers []struct{ Name string } `json:"readers"`
	Out     []struct{ Name, Reason string }
}

func names(ns []struct{ Name string }) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return strings.Join(out, ",")
}

// TestMakeDemoTourStop: make demo brings up 1 writer and 2 readers behind a
// real HAProxy with a load client writing to the primary; make demo-fault
// reports every fault reflected everywhere and exits 0; make demo twice
// leaves no duplicate; make demo-stop stops every process by PID, exit 0.
func TestMakeDemoTourStop(t *testing.T) {
	mariadbtest.Require(t)
	haproxytest.Bin(t)
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make not found (CI=true: the demo test must not be skipped)")
		}
		t.Skip("make not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root := repoRoot(t)
	dir := t.TempDir()
	base := freeBase(t)
	r := &runner{t: t, ctx: ctx, root: root, vars: []string{"DEMO_DIR=" + dir, "DEMO_PORT_BASE=" + strconv.Itoa(base)}}
	layout, err := demo.NewLayout(dir, base, filepath.Join(root, "bin", "shoal"))
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens, leave nothing running: stop by PID, then kill.
	t.Cleanup(func() {
		pids, _ := layout.PIDFiles()
		if len(pids) == 0 {
			return
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer dcancel()
		_ = exec.CommandContext(dctx, filepath.Join(root, "bin", "shoal-demo"), "down", "--dir", dir, "--port-base", strconv.Itoa(base)).Run()
		for name, pid := range pids {
			if demo.Alive(pid) {
				t.Errorf("cleanup: %s (pid %d) still running: killing it", name, pid)
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	out, code := r.make("demo")
	if code != 0 {
		t.Fatalf("make demo: exit %d", code)
	}
	demoOut := out
	for _, want := range []string{"writer  db1", "reader  db2", "reader  db3", layout.UIURL(), "tail -f", "make demo-fault", "writes 20/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("make demo output lacks %q", want)
		}
	}
	poolOut, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "shoal"), "pool", "--http-addr", layout.HTTPAddr(demo.App), "--format", "json").Output()
	if err != nil {
		t.Fatalf("shoal pool: %v", err)
	}
	var p poolJSON
	if err := json.Unmarshal(poolOut, &p); err != nil {
		t.Fatalf("pool json: %v\n%s", err, poolOut)
	}
	if names(p.Writers) != "db1" || names(p.Readers) != "db2,db3" || len(p.Out) != 0 {
		t.Fatalf("pool after make demo: writers %q readers %q out %v, want db1 / db2,db3 / none", names(p.Writers), names(p.Readers), p.Out)
	}

	out, code = r.make("demo-fault")
	if code != 0 {
		t.Errorf("make demo-fault: exit %d", code)
	}
	for _, want := range []string{
		"db2 out (critical) on every agent (4 of 4 checked)", "HAProxy mysql_ro/db2 -> maint after",
		"db2 in as reader on every agent (4 of 4 checked)", "HAProxy mysql_ro/db2 -> ready after",
		"db3 out (critical) on every agent", "HAProxy mysql_ro/db3 -> maint after", "db3 in as reader on every agent",
		"db2 out (maintenance) on every agent",
		"db2 in as writer on every agent", "HAProxy mysql_rw/db2 -> ready after",
		"db1 in as writer on every agent", "HAProxy mysql_rw/db1 -> ready after",
		"client writes in the next 2 s landed on: db2[2@",
		"db3 out (agent-failed) on every agent (3 of 4 checked)", "member db3 failed on db1, db2, app1",
		"member db3 alive on db1, db2, db3, app1",
		"End: healthy as before",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tour output lacks %q", want)
		}
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("the tour reported a failure")
	}
	if strings.Contains(out, "no history event") {
		t.Errorf("an agent's time is missing from the tour (no history event)")
	}
	// A step line without a time would read "ms" without a number.
	if strings.Count(out, " ms") < 20 {
		t.Errorf("the tour reported %d times, want at least 20", strings.Count(out, " ms"))
	}

	// The client made progress, its writes landing on the primary.
	secs, err := layout.ReadSeconds()
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]int{}
	total := 0
	for _, s := range secs {
		for k, v := range s.WritesBy {
			writes[strings.SplitN(k, "[", 2)[0]] += v
			total += v
		}
	}
	t.Logf("client: %d seconds, writes by server %v", len(secs), writes)
	if len(secs) < 10 || writes["db1"] < 150 || writes["db1"] < total*7/10 {
		t.Errorf("client: %d seconds, writes by server %v: want most of them on db1", len(secs), writes)
	}

	// The maintenance command make demo suggests works as printed (it is
	// a changing command: it has to name the demo's token file).
	runPrinted(t, ctx, root, demoOut, " maint enable ", "out of the pool on every agent")
	runPrinted(t, ctx, root, strings.Replace(lineWith(demoOut, " maint enable "), "enable --reason test", "disable", 1), " maint disable ", "maintenance off")

	// After a switchover by hand, the tour refuses at once, naming the
	// writer and how to move it back.
	sw := exec.CommandContext(ctx, filepath.Join(root, "bin", "shoal"), "switchover", "--to", "db2",
		"--http-addr", layout.HTTPAddr("db3"), "--token-file", layout.Path("api-token"))
	if b, err := sw.CombinedOutput(); err != nil {
		t.Fatalf("shoal switchover --to db2: %v\n%s", err, b)
	}
	began := time.Now()
	out, code = r.make("demo-fault")
	if code == 0 || time.Since(began) > 10*time.Second || !strings.Contains(out, "the pool's writer is db2 (a switchover moved it)") ||
		!strings.Contains(out, "switchover --to db1 --http-addr "+layout.HTTPAddr("db3")) {
		t.Errorf("make demo-fault after a switchover to db2: exit %d after %s; want a quick refusal naming db2 and the way back", code, time.Since(began))
	}

	// make demo again: the first demo is stopped, none of its processes
	// is left beside the second.
	first, err := layout.PIDFiles()
	if err != nil || len(first) != 9 {
		t.Fatalf("pid files before the second make demo: %v (%v), want 9", first, err)
	}
	if _, code := r.make("demo"); code != 0 {
		t.Fatalf("second make demo: exit %d", code)
	}
	for name, pid := range first {
		if demo.Alive(pid) {
			t.Errorf("after the second make demo, %s of the first (pid %d) still runs", name, pid)
		}
	}

	second, err := layout.PIDFiles()
	if err != nil || len(second) != 9 {
		t.Fatalf("pid files before make demo-stop: %v (%v), want 9", second, err)
	}
	out, code = r.make("demo-stop")
	if code != 0 || !strings.Contains(out, "demo stopped: every process exited") {
		t.Errorf("make demo-stop: exit %d", code)
	}
	for name, pid := range second {
		if demo.Alive(pid) {
			t.Errorf("after make demo-stop, %s (pid %d) still runs", name, pid)
		}
	}
	if left, _ := layout.PIDFiles(); len(left) != 0 {
		t.Errorf("pid files left: %v", left)
	}
}

// lineWith is the first line of out that contains s ("" if none).
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// runPrinted runs, from dir, the command of the first line of out that
// contains s, as a user pasting it would (the text before its comment,
// split on spaces; no shell), and wants success and want in its output.
func runPrinted(t *testing.T, ctx context.Context, dir, out, s, want string) {
	t.Helper()
	line := lineWith(out, s)
	argv := strings.Fields(strings.SplitN(line, "#", 2)[0])
	if len(argv) == 0 {
		t.Errorf("no line with %q in:\n%s", s, out)
		return
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), want) {
		t.Errorf("the printed %q: %v\n%s", line, err, got)
	}
}
