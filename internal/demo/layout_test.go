package demo

import (
	"strings"
	"testing"
)

func TestLayoutPorts(t *testing.T) {
	l, err := NewLayout("/tmp/d", 13300, "/bin/shoal")
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		l.MySQLAddr("db1"): "127.0.0.1:13301", l.MySQLAddr("db3"): "127.0.0.1:13303",
		l.RWAddr(): "127.0.0.1:13307", l.ROAddr(): "127.0.0.1:13308",
		l.GossipAddr("db2"): "127.0.0.1:13312", l.GossipAddr(App): "127.0.0.1:13314",
		l.HTTPAddr(App): "127.0.0.1:13324", l.RPCAddr("db1"): "127.0.0.1:13331",
		l.UIURL(): "http://127.0.0.1:13324/ui", l.HAProxySock(): "/tmp/d/haproxy.sock",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	seen := map[int]bool{}
	for _, p := range l.tcpPorts() {
		if seen[p] {
			t.Errorf("port %d used twice", p)
		}
		seen[p] = true
	}
	if len(seen) != 3+2+12+3 { // MySQL, HAProxy, gossip/HTTP/RPC of 4 agents, raft of 3
		t.Errorf("%d ports, want 20", len(seen))
	}
}

func TestNewLayoutRejects(t *testing.T) {
	for _, c := range []struct {
		dir  string
		base int
		want string
	}{
		{"/tmp/d", 80, "port base 80"},
		{"/tmp/d", 65500, "port base 65500"},
		{"", 13300, "state dir: empty"},
		{"/tmp/" + strings.Repeat("x", 120), 13300, "choose a shorter DEMO_DIR"},
	} {
		_, err := NewLayout(c.dir, c.base, "shoal")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewLayout(%q, %d) = %v, want %q", c.dir, c.base, err, c.want)
		}
	}
}

func TestHAProxyConfigAndWant(t *testing.T) {
	l, _ := NewLayout("/tmp/d", 13300, "shoal")
	cfg := l.haproxyConfig()
	for _, want := range []string{"stats socket /tmp/d/haproxy.sock mode 600 level admin", "listen mysql_rw\n    bind 127.0.0.1:13307",
		"server db1 127.0.0.1:13301 disabled", "listen mysql_ro\n    bind 127.0.0.1:13308", "server db3 127.0.0.1:13303\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("haproxy.cfg lacks %q:\n%s", want, cfg)
		}
	}
	w := wantHAProxy("db2")
	if w["mysql_rw/db2"] != "ready" || w["mysql_rw/db1"] != "maint" || w["mysql_ro/db2"] != "maint" || w["mysql_ro/db1"] != "ready" {
		t.Errorf("wantHAProxy(db2) = %v", w)
	}
}
