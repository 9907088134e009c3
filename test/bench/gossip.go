//go:build bench

package bench

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// Impl is a gossip agent under test: shoal with a profile, or the stock
// serf agent with a profile.
type Impl struct {
	Name    string // as shown in the report
	Serf    bool   // the stock serf agent
	Profile string
}

// Impls are the four agents the host-failure suites compare.
var Impls = []Impl{
	{"shoal fast", false, "fast"},
	{"shoal lan", false, "lan"},
	{"serf lan", true, "lan"},
	{"serf local", true, "local"},
}

// GNode is one gossip agent in a host namespace. Its event handler (the
// stamp program) appends "<nanos> <event> <member>" lines to Stamps.
type GNode struct {
	Name   string
	Host   *e2e.Host
	Dir    string
	Stamps string
	argv   []string
	join   []string

	mu   sync.Mutex
	proc *e2e.Proc
}

// GCluster is N gossip agents of one Impl, each on a host of its own.
type GCluster struct {
	Impl  Impl
	Net   *e2e.Net
	Nodes []*GNode
	serf  string // the stock serf binary (also the RPC client)
}

// NewGCluster creates the hosts and starts the agents; every agent joins
// the first two. It waits until every agent sees all N alive.
func NewGCluster(t testing.TB, impl Impl, n int, key string) *GCluster {
	t.Helper()
	c, err := NewGClusterWith(t, impl, n, key, GOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// GOptions say how NewGClusterWith forms a cluster.
type GOptions struct {
	Stagger   time.Duration // pause between two agents' starts
	HTTP      bool          // shoal only: serve the API and /metrics on the host's loopback (see Metrics)
	FormLimit time.Duration // how long until every agent sees all N alive; 0: 2 minutes
}

// NewGClusterWith is NewGCluster with options. When the cluster does not
// form within the limit it returns the cluster (its agents still run, and
// stop with the test) and the error.
func NewGClusterWith(t testing.TB, impl Impl, n int, key string, o GOptions) (*GCluster, error) {
	t.Helper()
	stamp, serfBin := Tools(t)
	c := &GCluster{Impl: impl, Net: e2e.NewNet(t), serf: serfBin}
	dir := t.TempDir()
	if keep := os.Getenv("BENCH_KEEP"); keep != "" {
		// Keep the agents' logs and stamps for a look afterwards.
		dir = filepath.Join(keep, strings.ReplaceAll(impl.Name, " ", "_")+fmt.Sprintf("-N%d-%s", n, c.Net.Prefix))
	}
	logLevel := "warn"
	if v := os.Getenv("BENCH_LOG_LEVEL"); v != "" {
		logLevel = v
	}
	for i := 1; i <= n; i++ {
		h := c.Net.AddHost(t, i)
		node := &GNode{Name: fmt.Sprintf("n%02d", i), Host: h, Dir: filepath.Join(dir, fmt.Sprintf("n%02d", i))}
		if err := os.MkdirAll(node.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		node.Stamps = filepath.Join(node.Dir, "stamps")
		handler := fmt.Sprintf("member-failed,member-join,member-leave=%s %s", stamp, node.Stamps)
		bind := fmt.Sprintf("%s:%d", h.IP, e2e.GossipPort)
		httpAddr := ""
		if o.HTTP {
			httpAddr = fmt.Sprintf("127.0.0.1:%d", e2e.HTTPPort)
		}
		if impl.Serf {
			node.argv = []string{serfBin, "agent", "-node", node.Name, "-bind", bind, "-rpc-addr", "127.0.0.1:7373",
				"-profile", impl.Profile, "-encrypt", key, "-event-handler", handler, "-log-level", logLevel}
		} else {
			node.argv = []string{e2e.ShoalBin(t), "agent", "--node", node.Name, "--bind", bind, "--rpc-addr", "127.0.0.1:7373",
				"--http-addr", httpAddr, "--profile", impl.Profile, "--encrypt", key, "--event-handler", handler,
				"--snapshot", filepath.Join(node.Dir, "snapshot"), "--log-level", logLevel}
		}
		c.Nodes = append(c.Nodes, node)
	}
	for i, node := range c.Nodes {
		for _, j := range []int{0, 1, 2} {
			if j != i && j < len(c.Nodes) && len(node.join) < 2 {
				node.join = append(node.join, fmt.Sprintf("%s:%d", c.Nodes[j].Host.IP, e2e.GossipPort))
			}
		}
	}
	t.Cleanup(c.Stop)
	for i, node := range c.Nodes {
		if i > 0 {
			time.Sleep(o.Stagger)
		}
		c.Start(t, node)
	}
	if err := c.WaitAllAlive(cmp.Or(o.FormLimit, 2*time.Minute)); err != nil {
		return c, fmt.Errorf("%s N=%d did not form: %w", impl.Name, n, err)
	}
	return c, nil
}

// Start (re)starts node's agent with the join addresses.
func (c *GCluster) Start(t testing.TB, node *GNode) {
	t.Helper()
	argv := append([]string(nil), node.argv...)
	for _, j := range node.join {
		if c.Impl.Serf {
			// -join makes the stock agent exit when the peer is not up yet.
			argv = append(argv, "-retry-join", j, "-retry-interval", "1s")
		} else {
			argv = append(argv, "--join", j)
		}
	}
	p, err := e2e.StartProc(c.Impl.Name+" "+node.Name, node.Host.NS, filepath.Join(node.Dir, "agent.log"), nil, argv...)
	if err != nil {
		t.Fatal(err)
	}
	node.mu.Lock()
	node.proc = p
	node.mu.Unlock()
}

// Proc is the node's current process.
func (n *GNode) Proc() *e2e.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Stop ends every agent.
func (c *GCluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		if p := n.Proc(); p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Kill() }()
		}
	}
	wg.Wait()
}

// MembersOf asks node's agent for its member list through the Serf RPC
// (the stock serf CLI, which speaks to shoal's Serf-compatible RPC too).
func (c *GCluster) MembersOf(node *GNode) (map[string]string, error) {
	out, err := exec.Command("ip", "netns", "exec", node.Host.NS, c.serf, "members", "-rpc-addr", "127.0.0.1:7373", "-format", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("%s members: %w", node.Name, err)
	}
	var doc struct {
		Members []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("%s members: %w", node.Name, err)
	}
	st := map[string]string{}
	for _, m := range doc.Members {
		st[m.Name] = m.Status
	}
	return st, nil
}

// WaitAllAlive waits until every agent sees every node alive.
func (c *GCluster) WaitAllAlive(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for {
		ok := true
		for _, n := range c.Nodes {
			st, err := c.MembersOf(n)
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			for _, m := range c.Nodes {
				if st[m.Name] != "alive" {
					ok, last = false, fmt.Sprintf("%s sees %s %q", n.Name, m.Name, st[m.Name])
					break
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not all alive after %s: %s", limit, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Stamp is one event a node's handler saw.
type Stamp struct {
	At       time.Time
	Observer string
	Event    string
	Member   string
}

// Stamps reads every node's stamp file.
func (c *GCluster) Stamps() []Stamp {
	var out []Stamp
	for _, n := range c.Nodes {
		f, err := os.Open(n.Stamps)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 3 {
				continue
			}
			ns, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				continue
			}
			out = append(out, Stamp{At: time.Unix(0, ns), Observer: n.Name, Event: fs[1], Member: fs[2]})
		}
		f.Close()
	}
	return out
}

// FirstSeen returns, per observer in obs, the first time since `since` it
// logged event for member.
func (c *GCluster) FirstSeen(obs []*GNode, event, member string, since time.Time) map[string]time.Time {
	want := map[string]bool{}
	for _, o := range obs {
		want[o.Name] = true
	}
	got := map[string]time.Time{}
	for _, s := range c.Stamps() {
		if !want[s.Observer] || s.Event != event || s.Member != member || s.At.Before(since) {
			continue
		}
		if old, ok := got[s.Observer]; !ok || s.At.Before(old) {
			got[s.Observer] = s.At
		}
	}
	return got
}

// WaitSeen waits until every observer logged event for member since
// `since`, and returns the first and last of those times measured from
// since; ok is false on timeout (then first/last cover who saw it).
func (c *GCluster) WaitSeen(obs []*GNode, event, member string, since time.Time, limit time.Duration) (first, last time.Duration, seen int, ok bool) {
	deadline := time.Now().Add(limit)
	for {
		got := c.FirstSeen(obs, event, member, since)
		if len(got) == len(obs) || time.Now().After(deadline) {
			first = -1
			for _, at := range got {
				d := at.Sub(since)
				if first < 0 || d < first {
					first = d
				}
				last = max(last, d)
			}
			return first, last, len(got), len(got) == len(obs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Others returns the nodes other than v.
func (c *GCluster) Others(v *GNode) []*GNode {
	var out []*GNode
	for _, n := range c.Nodes {
		if n != v {
			out = append(out, n)
		}
	}
	return out
}

// Jitter sleeps a random time in [0, d): trials start at a random phase of
// the agents' probe rounds.
func Jitter(d time.Duration) { time.Sleep(time.Duration(rand.Int64N(int64(d)))) }

// ProcUsage is a process's resident memory and CPU time, from /proc.
type ProcUsage struct {
	RSSKB int64
	CPU   time.Duration
}

// Usage reads /proc/<pid>/status (VmRSS) and /proc/<pid>/stat (utime+stime).
func Usage(pid int) (ProcUsage, error) {
	var u ProcUsage
	if rss, err := e2e.VmRSS(pid); err == nil {
		u.RSSKB = rss >> 10
	} // a process that is gone fails the stat read below
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	u.CPU = time.Duration(ut+stt) * time.Second / 100 // USER_HZ is 100 on Linux
	return u, nil
}

// Kill sends SIGKILL to node's agent and waits for it to exit.
func (n *GNode) Kill() {
	if p := n.Proc(); p != nil {
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
	}
}

// Metrics reads the node's /metrics (NewGClusterWith with HTTP) and returns
// the samples whose name starts with prefix, keyed by name and labels as
// the exposition writes them (`shoal_x_total{kind="a"}`).
func (n *GNode) Metrics(prefix string) (map[string]float64, error) {
	hc := n.Host.HTTPClient(5 * time.Second)
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", e2e.HTTPPort))
	if err != nil {
		return nil, fmt.Errorf("%s metrics: %w", n.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s metrics: %s", n.Name, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// IdleUsage sleeps for idle and returns each agent's resident memory at the
// end (MB) and CPU over the window (% of a core), from /proc. during, when
// set, runs at the start of the window and again at its end (true), for
// counters read over the same window.
func (c *GCluster) IdleUsage(idle time.Duration, during func(end bool)) (rssMB, cpuPct []float64) {
	before := map[*GNode]ProcUsage{}
	for _, node := range c.Nodes {
		if u, err := Usage(node.Proc().PID()); err == nil {
			before[node] = u
		}
	}
	if during != nil {
		during(false)
	}
	t0 := time.Now()
	time.Sleep(idle)
	wall := time.Since(t0)
	if during != nil {
		during(true)
	}
	for _, node := range c.Nodes {
		u, err := Usage(node.Proc().PID())
		b, ok := before[node]
		if err != nil || !ok {
			continue
		}
		rssMB = append(rssMB, float64(u.RSSKB)/1024)
		cpuPct = append(cpuPct, 100*(u.CPU-b.CPU).Seconds()/wall.Seconds())
	}
	return rssMB, cpuPct
}
