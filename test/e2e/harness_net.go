//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Subnet is the documentation range (RFC 5737) the hosts live in. Nothing in
// the root namespace has an address in it and no host has a default route,
// so no test packet can leave the machine.
const Subnet = "198.51.100."

// Net is one run's network: a bridge in a namespace of its own
// (<prefix>-fabric) and one namespace per host (<prefix>-h<N>), each joined
// to the bridge by a veth pair (eth0 in the host, vh<N> on the bridge).
type Net struct {
	Prefix string
	Fabric string

	mu    sync.Mutex
	hosts []*Host
}

// Host is one simulated machine: a network namespace with lo and eth0.
type Host struct {
	Index int
	NS    string // namespace name
	IP    string // 198.51.100.(10+Index)
	Veth  string // bridge-side interface in the fabric namespace

	net    *Net
	dialer *NSDialer
}

// run runs a command and returns its combined output in the error.
func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewPrefix returns a run prefix: "sh" and 6 random hex digits.
func NewPrefix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "sh" + hex.EncodeToString(b)
}

// NewNet creates the fabric namespace and its bridge. t.Cleanup deletes
// every namespace of the Net, one `ip netns del` per namespace.
func NewNet(t testing.TB) *Net {
	t.Helper()
	n := &Net{Prefix: NewPrefix()}
	n.Fabric = n.Prefix + "-fabric"
	t.Cleanup(n.Delete)
	if err := n.addNS(n.Fabric); err != nil {
		t.Fatalf("e2e net: %v", err)
	}
	for _, argv := range [][]string{
		{"ip", "-n", n.Fabric, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", n.Fabric, "link", "set", "br0", "up"},
	} {
		if err := run(argv...); err != nil {
			t.Fatalf("e2e net: %v", err)
		}
	}
	return n
}

func (n *Net) addNS(name string) error {
	if err := run("ip", "netns", "add", name); err != nil {
		return err
	}
	reg.addNetns(name)
	return run("ip", "-n", name, "link", "set", "lo", "up")
}

// AddHost creates host index (1..239): namespace <prefix>-h<index>,
// address 198.51.100.(10+index)/24 on eth0, plugged into the bridge.
func (n *Net) AddHost(t testing.TB, index int) *Host {
	t.Helper()
	h := &Host{Index: index, NS: fmt.Sprintf("%s-h%d", n.Prefix, index), IP: fmt.Sprintf("%s%d", Subnet, 10+index),
		Veth: fmt.Sprintf("vh%d", index), net: n}
	if err := n.addNS(h.NS); err != nil {
		t.Fatalf("e2e net: %v", err)
	}
	for _, argv := range [][]string{
		{"ip", "-n", h.NS, "link", "add", "eth0", "type", "veth", "peer", "name", h.Veth, "netns", n.Fabric},
		{"ip", "-n", n.Fabric, "link", "set", h.Veth, "master", "br0"},
		{"ip", "-n", n.Fabric, "link", "set", h.Veth, "up"},
		{"ip", "-n", h.NS, "addr", "add", h.IP + "/24", "dev", "eth0"},
		{"ip", "-n", h.NS, "link", "set", "eth0", "up"},
	} {
		if err := run(argv...); err != nil {
			t.Fatalf("e2e net: %v", err)
		}
	}
	d, err := newNSDialer("/run/netns/" + h.NS)
	if err != nil {
		t.Fatalf("e2e net: %v", err)
	}
	h.dialer = d
	n.mu.Lock()
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	return h
}

// Delete stops the dialers and deletes the namespaces, hosts first, one
// `ip netns del` per namespace (`ip netns del A B` deletes only A). Call it
// only once the processes in them are gone.
func (n *Net) Delete() {
	n.mu.Lock()
	hosts := n.hosts
	n.hosts = nil
	n.mu.Unlock()
	for _, h := range hosts {
		h.dialer.Close()
	}
	for _, ns := range append(namesOf(hosts), n.Fabric) {
		err := run("ip", "netns", "del", ns)
		if err != nil && !strings.Contains(err.Error(), "No such file") {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err) // kept in the registry: the signal teardown retries
			continue
		}
		reg.removeNetns(ns)
	}
}

func namesOf(hosts []*Host) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.NS)
	}
	return out
}

// LinkDown cuts the host's cable on the bridge side: its processes see
// timeouts, not errors, and local traffic inside the host still flows.
func (h *Host) LinkDown() error { return run("ip", "-n", h.net.Fabric, "link", "set", h.Veth, "down") }

// LinkUp plugs the cable back in.
func (h *Host) LinkUp() error { return run("ip", "-n", h.net.Fabric, "link", "set", h.Veth, "up") }

// IPTables runs iptables-legacy inside the host's namespace (-w: the xtables
// lock is shared by every namespace).
func (h *Host) IPTables(args ...string) error {
	return run(append([]string{"ip", "netns", "exec", h.NS, "iptables-legacy", "-w"}, args...)...)
}

// SetLoss drops incoming packets from the network (eth0, not loopback) with
// probability p. There is no netem here; dropping on OUTPUT would return
// EPERM to the sender instead of losing the packet.
func (h *Host) SetLoss(p float64) error {
	return h.IPTables("-A", "INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random",
		"--probability", fmt.Sprintf("%.4f", p), "-j", "DROP")
}

// LossDrops is how many packets the SetLoss rules dropped so far.
func (h *Host) LossDrops() (int64, error) {
	out, err := exec.Command("ip", "netns", "exec", h.NS, "iptables-legacy", "-w", "-L", "INPUT", "-v", "-x", "-n").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("iptables -L in %s: %w: %s", h.NS, err, out)
	}
	var total int64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == "DROP" && strings.Contains(line, "statistic mode random") {
			var n int64
			if _, err := fmt.Sscan(f[0], &n); err == nil {
				total += n
			}
		}
	}
	return total, nil
}

// DropFrom drops every packet arriving from the given hosts.
func (h *Host) DropFrom(others ...*Host) error {
	for _, o := range others {
		if err := h.IPTables("-A", "INPUT", "-s", o.IP, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// tcpCutRules are the two INPUT rules of CutTCP: in client's namespace
// what comes from server's port, in server's what goes to it from client.
func tcpCutRules(client, server *Host, port int) [2][]string {
	return [2][]string{
		{"INPUT", "-s", server.IP, "-p", "tcp", "--sport", fmt.Sprint(port), "-j", "DROP"},
		{"INPUT", "-s", client.IP, "-p", "tcp", "--dport", fmt.Sprint(port), "-j", "DROP"},
	}
}

// CutTCP freezes the TCP connections from client to server's port, both
// ways, without a reset: each side drops on INPUT what the other sends, as
// a silently failed link or firewall does (no RST, no ICMP, the sockets stay
// established). Every other traffic between the two hosts (gossip, the API)
// still flows.
func CutTCP(client, server *Host, port int) error {
	r := tcpCutRules(client, server, port)
	if err := client.IPTables(append([]string{"-A"}, r[0]...)...); err != nil {
		return err
	}
	return server.IPTables(append([]string{"-A"}, r[1]...)...)
}

// HealTCP removes CutTCP's rules.
func HealTCP(client, server *Host, port int) error {
	r := tcpCutRules(client, server, port)
	err1 := client.IPTables(append([]string{"-D"}, r[0]...)...)
	err2 := server.IPTables(append([]string{"-D"}, r[1]...)...)
	if err1 != nil {
		return err1
	}
	return err2
}

// ClearRules removes every INPUT rule of the host.
func (h *Host) ClearRules() error { return h.IPTables("-F", "INPUT") }

// Partition cuts all traffic between group a and group b (each host drops
// what comes from the other side).
func Partition(a, b []*Host) error {
	for _, h := range a {
		if err := h.DropFrom(b...); err != nil {
			return err
		}
	}
	for _, h := range b {
		if err := h.DropFrom(a...); err != nil {
			return err
		}
	}
	return nil
}

// HTTPClient is an HTTP client whose connections start inside the host's
// namespace (its loopback and its agent's API are reachable).
func (h *Host) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: h.dialer.DialContext}}
}

// LinkBytes is what the host's eth0 has received and sent so far (bytes,
// the kernel's interface counters).
func (h *Host) LinkBytes() (rx, tx uint64, err error) {
	out, err := exec.Command("ip", "-n", h.NS, "-j", "-s", "link", "show", "dev", "eth0").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("link counters of %s: %w", h.NS, err)
	}
	var links []struct {
		Stats struct {
			RX struct{ Bytes uint64 } `json:"rx"`
			TX struct{ Bytes uint64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return 0, 0, fmt.Errorf("link counters of %s: %v: %s", h.NS, err, out)
	}
	return links[0].Stats.RX.Bytes, links[0].Stats.TX.Bytes, nil
}

// neighLimits are the kernel's ARP table thresholds, shared by every
// namespace.
var neighLimits = []string{"net.ipv4.neigh.default.gc_thresh1", "net.ipv4.neigh.default.gc_thresh2", "net.ipv4.neigh.default.gc_thresh3"}

// RaiseNeighbourLimits makes room in the kernel's ARP table (one table for
// every namespace) for n hosts that all talk to each other, about n²
// entries: with the defaults (128/512/1024) hosts beyond about 30 cannot
// resolve their peers and their joins time out. Values already higher are
// kept; t.Cleanup puts back the ones it raised.
func RaiseNeighbourLimits(t testing.TB, n int) {
	t.Helper()
	want := 2*n*n + 1024
	for i, key := range neighLimits {
		path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		cur, err := strconv.Atoi(strings.TrimSpace(string(old)))
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		v := want / (4 >> i) // a quarter, a half, all of it
		if cur >= v {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(v)), 0o644); err != nil {
			t.Fatalf("raise %s to %d: %v", key, v, err)
		}
		t.Cleanup(func() { _ = os.WriteFile(path, old, 0o644) })
	}
}
