package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
	"github.com/shoaldb/shoal/internal/sink/haproxy"
)

// haproxyConfig is the demo HAProxy: a read-write listener whose servers
// start disabled (no writes until shoal says which is the writer) and a
// read-only listener; no health checks: the app agent sets each server
// ready or maint through the runtime API.
func (l *Layout) haproxyConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# written by shoal-demo: the app host's HAProxy, driven by the app agent (app1)
global
    stats socket %s mode 600 level admin
    stats timeout 30s

defaults
    mode tcp
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    option redispatch
    retries 2

listen %s
    bind %s
`, l.HAProxySock(), BackendRW, l.RWAddr())
	for _, n := range DBNodes {
		fmt.Fprintf(&b, "    server %s %s disabled\n", n, l.MySQLAddr(n))
	}
	fmt.Fprintf(&b, "\nlisten %s\n    bind %s\n    balance roundrobin\n", BackendRO, l.ROAddr())
	for _, n := range DBNodes {
		fmt.Fprintf(&b, "    server %s %s\n", n, l.MySQLAddr(n))
	}
	return b.String()
}

func (l *Layout) startHAProxy(ctx context.Context) error {
	bin, err := launch.Lookup("haproxy")
	if err != nil {
		return err
	}
	cfg := l.Path("haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(l.haproxyConfig()), 0o600); err != nil {
		return err
	}
	if _, err := l.spawn("haproxy", []string{bin, "-f", cfg, "-db"}, nil, l.Path("haproxy.log")); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := l.haproxyCommand("show info")
		if err == nil {
			return nil
		}
		if l.running("haproxy") == 0 {
			return fmt.Errorf("haproxy exited during start-up; %s ends:\n%s", l.Path("haproxy.log"), tail(l.Path("haproxy.log"), 15))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("haproxy runtime API %s not up after 10 s: %w", l.HAProxySock(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// haproxyCommand sends one runtime API command and returns the answer.
func (l *Layout) haproxyCommand(cmd string) (string, error) {
	c, err := haproxy.NewClient("unix:"+l.HAProxySock(), 2*time.Second)
	if err != nil {
		return "", err
	}
	return c.Do(context.Background(), cmd)
}

// HAProxyStates maps "backend/server" to ready, drain or maint: the admin
// state the runtime API sets (what shoal drives; there are no checks).
func (l *Layout) HAProxyStates() (map[string]string, error) {
	resp, err := l.haproxyCommand("show servers state")
	if err != nil {
		return nil, fmt.Errorf("haproxy show servers state: %w", err)
	}
	return parseServersState(resp)
}

func parseServersState(resp string) (map[string]string, error) {
	servers, err := haproxy.ParseServersState(resp)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, sv := range servers {
		out[sv.Backend+"/"+sv.Name] = string(sv.Effective())
	}
	return out, nil
}

// wantHAProxy is the HAProxy state for a healthy demo with writer w.
func wantHAProxy(w string) map[string]string {
	out := map[string]string{}
	for _, n := range DBNodes {
		out[BackendRW+"/"+n] = "maint"
		out[BackendRO+"/"+n] = "ready"
		if n == w {
			out[BackendRW+"/"+n] = "ready"
			out[BackendRO+"/"+n] = "maint"
		}
	}
	return out
}
