// Package process runs the real shoal binary as processes: agents, the CLI,
// signals.
package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// shoalBin builds the binary once per test run.
func shoalBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shoal-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// Traversable by other users: a test runs the CLI as nobody.
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "shoal")
		cmd := exec.Command("go", "build", "-o", binPath, "../../cmd/shoal")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type proc struct {
	cmd  *exec.Cmd
	log  *testkit.SyncBuffer
	http string
	bind string
	rpc  string // the Serf RPC address
	// tokenFile holds the agent's API token (in a directory of the
	// test's, mode 0700); shoal() tells the CLI of it.
	tokenFile string
	done      chan struct{}
	err       error
}

func startAgent(t *testing.T, name, key string, extra ...string) *proc {
	t.Helper()
	return startAgentAt(t, name, key, ports.Free(t), extra...)
}

// startAgentAt starts an agent gossiping on bind.
func startAgentAt(t *testing.T, name, key, bind string, extra ...string) *proc {
	t.Helper()
	p := &proc{log: &testkit.SyncBuffer{}, http: ports.Free(t), bind: bind, rpc: ports.Free(t), done: make(chan struct{}),
		tokenFile: filepath.Join(t.TempDir(), "api-token")}
	args := append([]string{"agent", "--node", name, "--bind", p.bind, "--http-addr", p.http,
		"--rpc-addr", p.rpc, "--encrypt", key, "--profile", "fast", "--api-token-file", p.tokenFile}, extra...)
	tokenFiles.Store(p.http, p.tokenFile)
	t.Cleanup(func() { tokenFiles.Delete(p.http) })
	p.cmd = exec.Command(shoalBin(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", name, p.log.String())
		}
	})
	return p
}

func shoal(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return shoalEnv(t, nil, args...)
}

// tokenFiles maps the HTTP address of each agent startAgentAt started to
// its token file: the CLI reads the token from the file it is told of.
var tokenFiles sync.Map

// shoalEnv runs the CLI with env added to the test's environment; a
// command for an agent of startAgentAt's gets SHOAL_API_TOKEN_FILE (env
// may override it).
func shoalEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	bin := shoalBin(t) // the build (first call) is not the command's time
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for i, a := range args {
		if a == "--http-addr" && i+1 < len(args) {
			if f, ok := tokenFiles.Load(args[i+1]); ok {
				env = append([]string{"SHOAL_API_TOKEN_FILE=" + f.(string)}, env...)
			}
		}
	}
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return run(t, cmd)
}

// run runs cmd and returns its stdout, stderr and exit status; a command
// that could not run at all fails the test.
func run(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

type member struct {
	Name   string            `json:"name"`
	Addr   string            `json:"addr"`
	Status string            `json:"status"`
	Tags   map[string]string `json:"tags"`
}

func members(t *testing.T, httpAddr string) map[string]member {
	t.Helper()
	out, errOut, code := shoal(t, "members", "--http-addr", httpAddr, "--format", "json")
	if code != 0 {
		return nil
	}
	var r struct {
		Members []member `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("members json: %v\n%s%s", err, out, errOut)
	}
	m := map[string]member{}
	for _, x := range r.Members {
		m[x.Name] = x
	}
	return m
}

func TestAgentsAsProcesses(t *testing.T) {
	out, _, code := shoal(t, "keygen")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	if code != 0 || len(key) != 44 {
		t.Fatalf("keygen: %q exit %d", out, code)
	}
	a := startAgent(t, "a1", key, "--tag", "team=db")
	b := startAgent(t, "b1", key, "--join", a.bind, "--tag", "team=app")
	c := startAgent(t, "c1", key, "--join", a.bind)

	testkit.WaitFor(t, 20*time.Second, "three alive members seen from c1", func() bool {
		m := members(t, c.http)
		return len(m) == 3 && m["a1"].Status == "alive" && m["b1"].Status == "alive" && m["c1"].Status == "alive"
	})
	m := members(t, c.http)
	if m["a1"].Tags["team"] != "db" || m["a1"].Addr != strings.Split(a.bind, ":")[0] {
		t.Errorf("a1 = %+v", m["a1"])
	}
	out, _, _ = shoal(t, "members", "--http-addr", c.http, "--tag", "team=db")
	if !strings.Contains(out, "a1") || strings.Contains(out, "b1") || !strings.HasPrefix(out, "NAME") {
		t.Errorf("filtered table:\n%s", out)
	}

	// SIGHUP reloads without stopping.
	b.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, 5*time.Second, "reload logged", func() bool { return strings.Contains(b.log.String(), "reload done") })

	// SIGTERM: graceful leave, exit 0, peers see "left".
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		if b.err != nil {
			t.Errorf("b1 exit after SIGTERM: %v", b.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b1 did not exit after SIGTERM")
	}
	testkit.WaitFor(t, 10*time.Second, "b1 left", func() bool { return members(t, a.http)["b1"].Status == "left" })

	// kill -9: peers see "failed".
	c.cmd.Process.Kill()
	testkit.WaitFor(t, 15*time.Second, "c1 failed", func() bool { return members(t, a.http)["c1"].Status == "failed" })

	// shoal leave through the API: the agent leaves and exits 0.
	if _, errOut, code := shoal(t, "leave", "--http-addr", a.http); code != 0 {
		t.Fatalf("leave: %d %s", code, errOut)
	}
	select {
	case <-a.done:
		if a.err != nil {
			t.Errorf("a1 exit after leave: %v", a.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a1 did not exit after shoal leave")
	}
	if !strings.Contains(a.log.String(), "left the cluster") {
		t.Error("a1 did not log its leave")
	}
}

func TestDuplicateNameProcessExitsWithError(t *testing.T) {
	key := newKey(t)
	a := startAgent(t, "dup", key)
	testkit.WaitFor(t, 10*time.Second, "a up", func() bool { return members(t, a.http)["dup"].Status == "alive" })
	b := startAgent(t, "dup", key, "--join", a.bind)
	select {
	case <-b.done:
		if b.err == nil || !strings.Contains(b.log.String(), `node name "dup" is already used by a live member at `+a.bind) {
			t.Fatalf("exit %v, log:\n%s", b.err, b.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("duplicate agent kept running")
	}
	if members(t, a.http)["dup"].Status != "alive" {
		t.Fatal("the original lost its name")
	}
}

func TestNoAgentMessage(t *testing.T) {
	addr := ports.Free(t)
	_, errOut, code := shoal(t, "members", "--http-addr", addr)
	if code != 1 || !strings.Contains(errOut, "no shoal agent reachable at "+addr) || !strings.Contains(errOut, "SHOAL_HTTP_ADDR") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestSecondSignalForcesExit: while a graceful leave is waiting on an
// unreachable peer, a second SIGTERM exits at once with status 1, and
// serf's "Shutdown without a Leave" warning, which a completed leave no
// longer logs (TestGracefulLeaveDoesNotWarn), is still there.
func TestSecondSignalForcesExit(t *testing.T) {
	key := newKey(t)
	a := startAgent(t, "stay", key, "--leave-timeout", "30s")
	b := startAgent(t, "go", key, "--join", a.bind, "--leave-timeout", "30s")
	testkit.WaitFor(t, 10*time.Second, "two alive", func() bool { return len(members(t, b.http)) == 2 })
	a.cmd.Process.Signal(syscall.SIGSTOP) // the leave broadcast now waits in vain
	defer a.cmd.Process.Signal(syscall.SIGCONT)
	b.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	select {
	case <-b.done:
		t.Skip("leave completed before the second signal; nothing to force")
	default:
	}
	start := time.Now()
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		if ee, ok := b.err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit after second signal: %v", b.err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("second signal took %s to take effect", d)
		}
		if !strings.Contains(b.log.String(), "second signal") {
			t.Error("forced exit not logged")
		}
		if l := b.log.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, shutdownWithoutLeave) {
			t.Errorf("forced exit: want a WARN %q:\n%s", shutdownWithoutLeave, l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second SIGTERM did not force an exit")
	}
}

// startAnswering starts an agent with startAgent and waits until its API
// answers `shoal info`.
func startAnswering(t *testing.T, name, key string, extra ...string) *proc {
	t.Helper()
	p := startAgent(t, name, key, extra...)
	testkit.WaitFor(t, 20*time.Second, name+" answers", func() bool {
		_, _, code := shoal(t, "info", "--http-addr", p.http)
		return code == 0
	})
	return p
}

// needSetpriv skips (loudly) a test that runs something as uid 65534
// when it is not root or util-linux's setpriv is missing.
func needSetpriv(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("SKIPPED, NOT PASSED: this test %s as uid 65534 and needs root", what)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: setpriv (util-linux) is missing; this test %s as uid 65534", what)
	}
}
