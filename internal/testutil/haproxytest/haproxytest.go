// Package haproxytest runs a real HAProxy (Debian package haproxy) for
// tests. Without one, tests skip, except under CI=true, where they fail.
package haproxytest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// Bin returns the haproxy binary: $SHOAL_HAPROXY_BIN if set, else haproxy in
// PATH or /usr/sbin. Without one it skips, or fails under CI=true.
func Bin(t testing.TB) string {
	t.Helper()
	where := "$SHOAL_HAPROXY_BIN (" + os.Getenv("SHOAL_HAPROXY_BIN") + ")"
	candidates := []string{os.Getenv("SHOAL_HAPROXY_BIN")}
	if candidates[0] == "" {
		where = "PATH or /usr/sbin"
		candidates = []string{"haproxy", "/usr/sbin/haproxy"}
	}
	for _, c := range candidates {
		if bin, err := exec.LookPath(c); err == nil {
			return bin
		}
	}
	msg := fmt.Sprintf("haproxy not found in %s; apt-get install -y haproxy", where)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: real-HAProxy tests must not be skipped)", msg)
	}
	t.Skip(msg)
	return ""
}

// Proc is a real HAProxy running in the foreground as a child.
type Proc struct {
	t   testing.TB
	bin string
	cfg string
	// Dir is a short private directory (unix socket paths are limited to
	// 108 bytes) for the admin socket and any frontend sockets.
	Dir string
	// Sock is the admin socket; Addr is the runtime API address "unix:Sock".
	Sock, Addr string

	cmd *exec.Cmd
	out *testkit.SyncBuffer
}

// Start writes the configuration and starts HAProxy; t.Cleanup kills it.
// config is given the Proc (for Sock and Dir) and returns the configuration
// text, which must declare `stats socket <Sock> level admin`.
func Start(t testing.TB, config func(p *Proc) string) *Proc {
	t.Helper()
	bin := Bin(t)
	dir, err := os.MkdirTemp("", "shoal-hx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &Proc{t: t, bin: bin, Dir: dir, cfg: filepath.Join(dir, "haproxy.cfg"), Sock: filepath.Join(dir, "admin.sock")}
	p.Addr = "unix:" + p.Sock
	if err := os.WriteFile(p.cfg, []byte(config(p)), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start()
	t.Cleanup(p.Stop)
	return p
}

func (p *Proc) start() {
	p.t.Helper()
	p.out = &testkit.SyncBuffer{}
	p.cmd = exec.Command(p.bin, "-f", p.cfg, "-db")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start haproxy: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := p.Command("show info")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.Stop()
			p.t.Fatalf("haproxy runtime api not up after 10s: %v\n%s", err, p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills HAProxy by its PID and reaps it. It is idempotent.
func (p *Proc) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Restart loses every runtime state, like a reload without a state file.
func (p *Proc) Restart() {
	p.t.Helper()
	p.Stop()
	p.start()
}

// Output is what HAProxy printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Command sends one runtime API command and returns the response.
func (p *Proc) Command(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", p.Sock, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\n")); err != nil {
		return "", err
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(c)
	return b.String(), err
}

// States returns "backend/server=state" for every server, in HAProxy's
// order, where state is ready, drain or maint as the runtime API set it
// (admin state; health checks are not considered).
func (p *Proc) States() string {
	p.t.Helper()
	resp, err := p.Command("show servers state")
	if err != nil {
		p.t.Fatalf("show servers state: %v", err)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(resp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
		if len(f) < 7 || strings.HasPrefix(f[0], "#") {
			continue
		}
		state := "ready"
		var admin int
		fmt.Sscan(f[6], &admin)
		switch {
		case admin&0x01 != 0 || admin&0x02 != 0 || admin&0x20 != 0: // 0x04 (config "disabled") stays set after ready
			state = "maint"
		case admin&0x08 != 0 || admin&0x10 != 0:
			state = "drain"
		}
		out = append(out, fmt.Sprintf("%s/%s=%s", f[1], f[3], state))
	}
	return strings.Join(out, " ")
}

// WriterReaderConfig is an HAProxy configuration with a writer backend
// (db_rw) and a reader backend (db_ro) over the servers at addrs, named db1,
// db2, ... in order, and the runtime API on sock. No health checks: only
// shoal changes server states. Writer servers start disabled, as the README
// recommends, so nothing is written anywhere until shoal says where.
func WriterReaderConfig(sock string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    stats socket %s mode 600 level admin\n", sock)
	b.WriteString("defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n")
	b.WriteString("backend db_rw\n")
	for i, a := range addrs {
		fmt.Fprintf(&b, "    server db%d %s disabled\n", i+1, a)
	}
	b.WriteString("backend db_ro\n")
	for i, a := range addrs {
		fmt.Fprintf(&b, "    server db%d %s\n", i+1, a)
	}
	return b.String()
}
