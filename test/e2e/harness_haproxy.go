//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Backends of the app hosts' HAProxy.
const (
	RWBackend = "mysql_rw"
	ROBackend = "mysql_ro"
)

// HAProxy is a real HAProxy in an app host's namespace, configured as the
// README's "Application hosts" section says: no health checks, writer
// servers start disabled, the shoal agent sets states through the runtime
// API (a unix socket, reachable from any namespace).
type HAProxy struct {
	Host *Host
	Dir  string
	Sock string
	cfg  string // configuration file

	mu   sync.Mutex
	proc *Proc
}

// haproxyConfig renders the configuration for the db hosts; the read-only
// listener uses `balance roBalance` ("" means leastconn).
func haproxyConfig(sock string, dbs []*DBHost, roBalance string) string {
	if roBalance == "" {
		roBalance = "leastconn"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `global
    stats socket %s mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    option redispatch
    retries 2
listen %s
    bind 127.0.0.1:%d
`, sock, RWBackend, RWPort)
	for _, d := range dbs {
		fmt.Fprintf(&b, "    server %s %s disabled\n", d.Name, d.Addr())
	}
	fmt.Fprintf(&b, "listen %s\n    bind 127.0.0.1:%d\n    balance %s\n", ROBackend, ROPort, roBalance)
	for _, d := range dbs {
		fmt.Fprintf(&b, "    server %s %s\n", d.Name, d.Addr())
	}
	return b.String()
}

// StartHAProxy starts HAProxy in h's namespace, in the foreground (-db),
// and waits for its runtime API. Its read-only listener uses
// `balance leastconn`.
func StartHAProxy(t testing.TB, h *Host, dir string, dbs []*DBHost) *HAProxy {
	t.Helper()
	return StartHAProxyBalance(t, h, dir, dbs, "")
}

// StartHAProxyBalance is StartHAProxy with the read-only listener's
// `balance` algorithm ("" means leastconn, as StartHAProxy).
func StartHAProxyBalance(t testing.TB, h *Host, dir string, dbs []*DBHost, roBalance string) *HAProxy {
	t.Helper()
	hx := &HAProxy{Host: h, Dir: filepath.Join(dir, "haproxy-"+h.NS)}
	if err := os.MkdirAll(hx.Dir, 0o700); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	hx.Sock = filepath.Join(hx.Dir, "admin.sock")
	cfg := filepath.Join(hx.Dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(hx.Sock, dbs, roBalance)), 0o600); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	hx.cfg = cfg
	hx.start(t)
	return hx
}

// start starts HAProxy with its configuration and waits for its runtime
// API; t.Cleanup kills it.
func (hx *HAProxy) start(t testing.TB) {
	t.Helper()
	bin, err := lookPath("haproxy")
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	p, err := StartProc("haproxy "+hx.Host.NS, hx.Host.NS, filepath.Join(hx.Dir, "haproxy.log"), nil, bin, "-f", hx.cfg, "-db")
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	hx.mu.Lock()
	hx.proc = p
	hx.mu.Unlock()
	t.Cleanup(func() { p.Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := hx.Command("show info"); err == nil {
			return
		} else if time.Now().After(deadline) || p.Exited() {
			log, _ := os.ReadFile(p.LogPath)
			t.Fatalf("e2e: haproxy runtime API not up: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart kills HAProxy (kill -9: its runtime state is lost, as on a
// restart or reload) and starts it again with the same configuration: the
// writer servers disabled, every reader ready, until the sink reconciles.
func (hx *HAProxy) Restart(t testing.TB) {
	t.Helper()
	hx.mu.Lock()
	p := hx.proc
	hx.mu.Unlock()
	p.Kill()
	_ = os.Remove(hx.Sock)
	hx.start(t)
}

// Command sends one runtime API command and returns the answer.
func (hx *HAProxy) Command(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", hx.Sock, time.Second)
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

// States returns "backend/server" → ready, drain or maint, as the runtime
// API set the admin state (there are no health checks).
func (hx *HAProxy) States() (map[string]string, error) {
	resp, err := hx.Command("show servers state")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(resp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
		if len(f) < 7 || strings.HasPrefix(f[0], "#") {
			continue
		}
		var admin int
		if _, err := fmt.Sscan(f[6], &admin); err != nil {
			continue
		}
		state := "ready"
		switch {
		case admin&0x01 != 0 || admin&0x02 != 0 || admin&0x20 != 0: // 0x04 (config "disabled") stays set after ready
			state = "maint"
		case admin&0x08 != 0 || admin&0x10 != 0:
			state = "drain"
		}
		out[f[1]+"/"+f[3]] = state
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("show servers state: no servers in %q", resp)
	}
	return out, sc.Err()
}
