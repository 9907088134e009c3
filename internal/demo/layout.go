package demo

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// Defaults a newcomer can type.
const (
	DefaultDir      = ".demo"
	DefaultPortBase = 13300
	// Cluster is the demo's shoal cluster (shard) name.
	Cluster = "demo"
	// App is the app agent's node name.
	App = "app1"
	// Backends of the demo's HAProxy.
	BackendRW = "mysql_rw"
	BackendRO = "mysql_ro"

	maxSocketPath = 107 // sun_path holds 108 bytes with the NUL
	marker        = ".shoal-demo"
)

// DBNodes are the db hosts; db1 starts as the primary. Node dbN has
// server_id N and MariaDB port base+N.
var DBNodes = []string{"db1", "db2", "db3"}

// Layout is where everything of one demo lives: its state directory and its
// ports, all derived from one base port.
//
//	base+1..3    MariaDB db1..db3
//	base+7       HAProxy read-write listener (the writer)
//	base+8       HAProxy read-only listener (the readers)
//	base+11..14  gossip of db1..db3, app1
//	base+21..24  HTTP API of db1..db3, app1 (app1's /ui is the status page)
//	base+31..34  Serf RPC of db1..db3, app1
type Layout struct {
	Dir      string // absolute
	PortBase int
	Shoal    string // the shoal binary
}

// NewLayout checks dir and base and returns the layout.
func NewLayout(dir string, base int, shoal string) (*Layout, error) {
	if base < 1024 || base+40 > 65535 {
		return nil, fmt.Errorf("port base %d: must be from 1024 to 65495 (the demo uses base+1 to base+34)", base)
	}
	if dir == "" {
		return nil, fmt.Errorf("state dir: empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state dir %q: %w", dir, err)
	}
	l := &Layout{Dir: abs, PortBase: base, Shoal: shoal}
	for _, p := range []string{l.HAProxySock(), l.DBConfig("db1").Socket()} {
		if len(p) > maxSocketPath {
			return nil, fmt.Errorf("state dir %q: the unix socket %s would be longer than %d bytes; choose a shorter DEMO_DIR", dir, p, maxSocketPath)
		}
	}
	return l, nil
}

// Nodes are every agent's node name, db hosts first.
func (l *Layout) Nodes() []string { return append(append([]string{}, DBNodes...), App) }

func nodeIndex(node string) int {
	for i, n := range DBNodes {
		if n == node {
			return i + 1
		}
	}
	return len(DBNodes) + 1 // app1
}

// MySQLPort is node's MariaDB port.
func (l *Layout) MySQLPort(node string) int { return l.PortBase + nodeIndex(node) }

// MySQLAddr is node's MariaDB address.
func (l *Layout) MySQLAddr(node string) string { return hostPort(l.MySQLPort(node)) }

// RWAddr and ROAddr are HAProxy's listeners.
func (l *Layout) RWAddr() string { return hostPort(l.PortBase + 7) }
func (l *Layout) ROAddr() string { return hostPort(l.PortBase + 8) }

// GossipAddr, HTTPAddr and RPCAddr are node's agent addresses.
func (l *Layout) GossipAddr(node string) string { return hostPort(l.PortBase + 10 + nodeIndex(node)) }
func (l *Layout) HTTPAddr(node string) string   { return hostPort(l.PortBase + 20 + nodeIndex(node)) }
func (l *Layout) RPCAddr(node string) string    { return hostPort(l.PortBase + 30 + nodeIndex(node)) }

// RaftAddr is a db agent's consensus (raft) address.
func (l *Layout) RaftAddr(node string) string { return hostPort(l.PortBase + 40 + nodeIndex(node)) }

// UIURL is the app agent's status page.
func (l *Layout) UIURL() string { return "http://" + l.HTTPAddr(App) + "/ui" }

func hostPort(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

// Path joins names under the state directory.
func (l *Layout) Path(elem ...string) string {
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}

// HAProxySock is HAProxy's runtime API socket.
func (l *Layout) HAProxySock() string { return l.Path("haproxy.sock") }

// ServerID is dbN's server_id: N.
func ServerID(node string) int { return nodeIndex(node) }

// NodeOfServerID is the node whose server_id is id, or "server_id N".
func NodeOfServerID(id int) string {
	if id >= 1 && id <= len(DBNodes) {
		return DBNodes[id-1]
	}
	return fmt.Sprintf("server_id %d", id)
}

// tcpPorts are every TCP port the demo listens on (gossip also uses UDP).
func (l *Layout) tcpPorts() []int {
	var ps []int
	for _, n := range DBNodes {
		ps = append(ps, l.MySQLPort(n))
	}
	ps = append(ps, l.PortBase+7, l.PortBase+8)
	for _, n := range l.Nodes() {
		for _, off := range []int{10, 20, 30} {
			ps = append(ps, l.PortBase+off+nodeIndex(n))
		}
	}
	for _, n := range DBNodes {
		ps = append(ps, l.PortBase+40+nodeIndex(n))
	}
	return ps
}

// checkPortsFree says which of the demo's ports something else holds.
func (l *Layout) checkPortsFree() error {
	var busy []int
	for _, p := range l.tcpPorts() {
		ln, err := net.Listen("tcp", hostPort(p))
		if err != nil {
			busy = append(busy, p)
			continue
		}
		ln.Close()
	}
	for _, n := range l.Nodes() {
		p := l.PortBase + 10 + nodeIndex(n)
		c, err := net.ListenPacket("udp", hostPort(p))
		if err != nil {
			busy = append(busy, p)
			continue
		}
		c.Close()
	}
	if len(busy) > 0 {
		return fmt.Errorf("ports in use on 127.0.0.1: %v; stop what holds them or choose another DEMO_PORT_BASE (now %d)", busy, l.PortBase)
	}
	return nil
}

// readSecret reads a one-line secret file written by up.
func (l *Layout) readSecret(name string) (string, error) {
	b, err := os.ReadFile(l.Path(name))
	if err != nil {
		return "", fmt.Errorf("read %s (is the demo set up? make demo): %w", l.Path(name), err)
	}
	return string(trimNL(b)), nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
