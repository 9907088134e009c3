package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// rollbackConfig is an agent with every part Start can start: a db agent
// (probe, against a refused port), a file sink, a history file, a hook,
// a snapshot (peers file loops), failure confirmation, the Serf RPC.
func rollbackConfig(t *testing.T, dir string) *config.Config {
	c := testConfig(t, "rollback", "fast", "")
	c.Role = tags.RoleDB
	c.MySQL.Addr = "127.0.0.1:1"
	c.MySQL.User = "shoal"
	c.Sinks.File.Path = filepath.Join(dir, "pool.json")
	c.History.File = filepath.Join(dir, "history.jsonl")
	c.EventHandlers = []string{writeScript(t, dir, "h.sh", "cat >/dev/null\n")}
	c.Snapshot = filepath.Join(dir, "snapshot")
	c.RPCAddr = ports.Free(t)
	c.Gossip.ConfirmFailures = true
	t.Setenv("SHOAL_MYSQL_PASSWORD", "x")
	return c
}

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) `)

// partGoroutines returns the stacks of the goroutines above id floor that
// run shoal's, serf's or memberlist's code (not the testing framework's).
func partGoroutines(floor int) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		m := goroutineHeader.FindStringSubmatch(g)
		if m == nil {
			continue
		}
		if id, _ := strconv.Atoi(m[1]); id <= floor {
			continue
		}
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "partGoroutines") {
			continue
		}
		if strings.Contains(g, "shoaldb/shoal/") || strings.Contains(g, "hashicorp/serf") || strings.Contains(g, "hashicorp/memberlist") {
			out = append(out, g)
		}
	}
	return out
}

// maxGoroutineID is the highest goroutine id alive now: goroutines started
// later have higher ids.
func maxGoroutineID() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	top := 0
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if m := goroutineHeader.FindStringSubmatch(line); m != nil {
			id, _ := strconv.Atoi(m[1])
			top = max(top, id)
		}
	}
	return top
}

// openUnder lists this process's open files under dir.
func openUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, fd := range fds {
		p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(p, dir) {
			out = append(out, p)
		}
	}
	return out
}

// checkReleased fails unless every goroutine the agent started has ended,
// its gossip (TCP and UDP) and RPC ports can be bound again, and no file
// under dir is open.
func checkReleased(t *testing.T, floor int, c *config.Config, dir string) {
	t.Helper()
	var left []string
	testkit.WaitFor(t, 20*time.Second, "no goroutine of the agent left", func() bool {
		left = partGoroutines(floor)
		return len(left) == 0
	})
	if t.Failed() {
		t.Logf("goroutines left:\n%s", strings.Join(left, "\n\n"))
		return
	}
	for _, addr := range []string{c.Bind, c.RPCAddr} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("tcp %s still bound: %v", addr, err)
			continue
		}
		_ = ln.Close()
	}
	pc, err := net.ListenPacket("udp", c.Bind)
	if err != nil {
		t.Errorf("udp %s still bound: %v", c.Bind, err)
	} else {
		_ = pc.Close()
	}
	if open := openUnder(t, dir); len(open) > 0 {
		t.Errorf("files left open: %v", open)
	}
}

// A failure at any step of Start leaves nothing running: no goroutine of
// shoal, serf or memberlist, no bound port, no open file. The failure is
// injected after each step (so everything the steps started so far is
// running), the last one included.
func TestStartRollsBackEveryStep(t *testing.T) {
	injected := errors.New("injected start failure")
	for _, step := range (&Agent{}).startSteps() {
		t.Run(step.name, func(t *testing.T) {
			dir := t.TempDir()
			c := rollbackConfig(t, dir)
			floor := maxGoroutineID()
			buf := &testkit.SyncBuffer{}
			a, err := New(c, logging.New(buf, "text", slog.LevelDebug))
			if err != nil {
				t.Fatal(err)
			}
			var ran []string
			a.life.afterStep = func(s string) error {
				ran = append(ran, s)
				if s == step.name {
					return injected
				}
				return nil
			}
			err = a.Start(context.Background())
			if !errors.Is(err, injected) {
				t.Fatalf("Start after %v: %v, want the injected failure\n%s", ran, err, buf)
			}
			checkReleased(t, floor, c, dir)
			if t.Failed() {
				t.Logf("--- log ---\n%s", buf)
			}
			a.Shutdown() // what the CLI does after a failed Start: a no-op now
		})
	}
}

// Real failures roll back too: a Serf RPC address already in use fails the
// rpc step with serf, the transport, the hooks and the history running.
func TestStartRollsBackRPCAddrInUse(t *testing.T) {
	dir := t.TempDir()
	c := rollbackConfig(t, dir)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c.RPCAddr = taken.Addr().String()
	floor := maxGoroutineID()
	a, err := New(c, logging.New(&testkit.SyncBuffer{}, "text", slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rpc_addr") {
		t.Fatalf("Start with a taken rpc_addr: %v, want an rpc_addr error", err)
	}
	_ = taken.Close()
	checkReleased(t, floor, c, dir)
}
