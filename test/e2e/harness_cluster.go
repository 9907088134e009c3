//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options shapes a cluster.
type Options struct {
	DBHosts  int // default 3: db1 primary, the others its replicas
	AppHosts int // default 1
	// AppConfig is appended to each app agent's YAML config (e.g.
	// event_handlers).
	AppConfig string
	// AgentFlags are more flags for every agent, db and app (e.g. the
	// pool settings, which every agent of a cluster must share).
	AgentFlags []string
	// DBFlags are more flags for every db agent (e.g. the consensus
	// settings, see ConsensusFlags).
	DBFlags []string
	// AppFlags are more flags for every app agent (e.g. the consensus key,
	// see ConsensusAppFlags).
	AppFlags []string
	// BeforeStart, when set, runs once every host, server and agent is
	// set up and before any agent starts (e.g. to put a proxy between db1's
	// agent and its server, see DelayProxy and Agent.AddFlags).
	BeforeStart func(c *Cluster)
	// FormTimeout bounds the wait for the healthy pool (default 60 s).
	FormTimeout time.Duration
	// ROBalance is the `balance` algorithm of the read-only listener of
	// each app host's HAProxy (e.g. "roundrobin"); "" means leastconn.
	ROBalance string
}

// AppHost is an application host: a shoal agent with the HAProxy sink and
// the HAProxy it drives.
type AppHost struct {
	Name    string
	Host    *Host
	Agent   *Agent
	HAProxy *HAProxy
}

// Cluster is a running set of hosts.
type Cluster struct {
	T    testing.TB
	Net  *Net
	Key  string
	Dir  string
	DBs  []*DBHost
	Apps []*AppHost
	Obs  *Observer
	// Formed is how long the cluster took from the first agent start to
	// the healthy pool on every agent and HAProxy.
	Formed time.Duration

	mu        sync.Mutex
	primary   *DBHost
	nextIndex int
	extra     []*Agent
	checked   bool // CheckNoTwoWriters ran
}

// NewCluster builds the hosts, starts MariaDB with GTID replication, HAProxy
// and the agents, and waits until every agent shows 1 writer and the other
// db hosts as readers, every member alive, and HAProxy matching. Everything
// is torn down in t.Cleanup, by PID; the namespaces go last.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.DBHosts == 0 {
		opts.DBHosts = 3
	}
	if opts.AppHosts == 0 {
		opts.AppHosts = 1
	}
	if opts.FormTimeout == 0 {
		opts.FormTimeout = 60 * time.Second
	}
	c := &Cluster{T: t, Net: NewNet(t)}
	c.Dir = runDir(t, c.Net.Prefix)
	c.Key = Keygen(t)

	for i := 1; i <= opts.DBHosts; i++ {
		h := c.Net.AddHost(t, i)
		c.DBs = append(c.DBs, &DBHost{Name: fmt.Sprintf("db%d", i), Host: h})
	}
	for i := 1; i <= opts.AppHosts; i++ {
		h := c.Net.AddHost(t, opts.DBHosts+i)
		c.Apps = append(c.Apps, &AppHost{Name: fmt.Sprintf("app%d", i), Host: h})
	}
	c.nextIndex = opts.DBHosts + opts.AppHosts + 1

	for _, d := range c.DBs {
		d.Server = startServer(t, d.Name, d.Host)
	}
	c.primary = c.DBs[0]
	for _, d := range c.DBs[1:] {
		d.Server.ReplicateFrom(c.primary.Server)
	}
	setupAccounts(t, c.primary, c.DBs[1:])

	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Host.IP)
	}
	c.Obs = NewObserver(t)
	for _, d := range c.DBs {
		d.Agent = NewAgent(t, d.Host, c.Dir, AgentSpec{Name: d.Name, Role: "db", Key: c.Key, Join: without(seeds, d.Host.IP), Extra: append(slices.Clone(opts.AgentFlags), opts.DBFlags...)})
	}
	for _, a := range c.Apps {
		a.HAProxy = StartHAProxyBalance(t, a.Host, c.Dir, c.DBs, opts.ROBalance)
		cfg := fmt.Sprintf(`sinks:
  haproxy:
    address: unix:%s
    backends:
      - {cluster: main, role: writer, backend: %s}
      - {cluster: main, role: reader, backend: %s}
`, a.HAProxy.Sock, RWBackend, ROBackend) + opts.AppConfig
		a.Agent = NewAgent(t, a.Host, c.Dir, AgentSpec{Name: a.Name, Role: "app", Key: c.Key, Join: seeds, Config: cfg, Extra: append(slices.Clone(opts.AgentFlags), opts.AppFlags...)})
		c.Obs.WatchHAProxy(a.Name, a.HAProxy)
	}
	t.Cleanup(c.stopAgents)
	// A safety property of every scenario: never two writers.
	t.Cleanup(func() {
		c.mu.Lock()
		checked := c.checked
		c.mu.Unlock()
		if !checked {
			c.CheckNoTwoWriters(t)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("e2e: observed timeline (time since the observer started):\n%s", c.Obs.Timeline())
			for _, a := range c.Agents() {
				t.Logf("e2e: --- last lines of %s's log (%s) ---\n%s", a.Name, a.LogPath(), a.LogTail(40))
			}
		}
	})
	if opts.BeforeStart != nil {
		opts.BeforeStart(c)
	}
	start := time.Now()
	for _, a := range c.Agents() {
		a.Start(t, true)
		c.Obs.Watch(a)
	}
	healthy := c.WaitHealthy(start, opts.FormTimeout)
	if !healthy.OK {
		t.Fatalf("e2e: cluster did not form within %s: latest samples:\n%s", opts.FormTimeout, c.Describe())
	}
	c.Formed = healthy.Took
	return c
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

// stopAgents kills every agent (db, app and extra ones) by PID.
func (c *Cluster) stopAgents() {
	for _, a := range c.Agents() {
		a.Kill()
	}
	c.mu.Lock()
	extra := c.extra
	c.mu.Unlock()
	for _, a := range extra {
		a.Kill()
	}
}

// Agents lists the db agents, then the app agents.
func (c *Cluster) Agents() []*Agent {
	var out []*Agent
	for _, d := range c.DBs {
		out = append(out, d.Agent)
	}
	for _, a := range c.Apps {
		out = append(out, a.Agent)
	}
	return out
}

// AgentNames lists the names of the cluster's agents, except those given.
func (c *Cluster) AgentNames(except ...string) []string { return agentNames(c.Agents(), except...) }

// runDir makes the directory of one run's state and logs, deleted at the
// end of the test unless it failed (then its path is logged).
func runDir(t testing.TB, prefix string) string {
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // mariadbd may run as mysql
		t.Fatalf("e2e: %v", err)
	}
	reg.addDir(dir)
	t.Cleanup(func() {
		reg.removeDir(dir)
		if t.Failed() {
			t.Logf("e2e: logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// tailFile returns the last n lines of the file at path (the error, when
// it cannot be read).
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// agentNames lists the names of agents, except those given.
func agentNames(agents []*Agent, except ...string) []string {
	var out []string
	for _, a := range agents {
		if !slices.Contains(except, a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

// describeAgents writes each agent's latest sample, for messages.
func describeAgents(b *strings.Builder, obs *Observer, agents []*Agent) {
	latest := obs.Latest()
	for _, a := range agents {
		s, ok := latest[a.Name]
		switch {
		case !ok:
			fmt.Fprintf(b, "  %s: no sample\n", a.Name)
		case s.Err != "":
			fmt.Fprintf(b, "  %s: %s\n", a.Name, s.Err)
		default:
			fmt.Fprintf(b, "  %s: pool %s members %s\n", a.Name, s.Pool(), s.MembersString())
		}
	}
}

// Primary is the current primary.
func (c *Cluster) Primary() *DBHost {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary
}

// SetPrimary records that d is the primary now (after a switchover the
// agents ran).
//
// A switchover made by something else (shoal switchover) sets read_only at
// runtime only; SetPrimary also writes it to every server's my.cnf, as
// Switchover does and as an operator keeps the configuration files in
// step, so that a restarted server comes up with the role it had.
func (c *Cluster) SetPrimary(d *DBHost) {
	for _, o := range c.DBs {
		o.Server.PersistReadOnly(o != d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.primary = d
}

// Replicas are the db hosts other than the primary.
func (c *Cluster) Replicas() []*DBHost {
	p := c.Primary()
	var out []*DBHost
	for _, d := range c.DBs {
		if d != p {
			out = append(out, d)
		}
	}
	return out
}

// HealthyPool is the expected pool of a healthy cluster, in Snap.Pool form.
func (c *Cluster) HealthyPool() string {
	var readers []string
	for _, d := range c.Replicas() {
		readers = append(readers, d.Name)
	}
	slices.Sort(readers)
	return c.Primary().Name + "|" + strings.Join(readers, ",") + "|"
}

// AllAlive reports whether the sample shows every cluster agent alive.
func (c *Cluster) AllAlive(s Snap) bool {
	for _, a := range c.Agents() {
		if s.Members[a.Name] != "alive" {
			return false
		}
	}
	return true
}

// HealthyHAProxy reports whether an HAProxy sample matches the healthy
// pool: only the primary ready for writes, only the replicas for reads.
func (c *Cluster) HealthyHAProxy(h HXSnap) bool {
	var readers []string
	for _, d := range c.Replicas() {
		readers = append(readers, d.Name)
	}
	slices.Sort(readers)
	return slices.Equal(h.Ready(RWBackend), []string{c.Primary().Name}) && slices.Equal(h.Ready(ROBackend), readers)
}

// WaitHealthy waits until every agent shows the healthy pool with every
// member alive, and every HAProxy matches.
func (c *Cluster) WaitHealthy(since time.Time, limit time.Duration) WaitResult {
	want := c.HealthyPool()
	r := c.Obs.WaitAgents(c.AgentNames(), since, limit, func(s Snap) bool {
		return s.OK() && s.Pool() == want && c.AllAlive(s)
	})
	if !r.OK {
		return r
	}
	for _, a := range c.Apps {
		h := c.Obs.WaitHAProxy(a.Name, since, limit-time.Since(since), c.HealthyHAProxy)
		if !h.OK {
			return h
		}
		r.Took = max(r.Took, h.Took)
	}
	return r
}

// Describe is the latest sample of every agent and HAProxy, for messages.
func (c *Cluster) Describe() string {
	var b strings.Builder
	describeAgents(&b, c.Obs, c.Agents())
	for _, a := range c.Apps {
		if hs := c.Obs.HXSnaps(a.Name, time.Now().Add(-time.Second), time.Now()); len(hs) > 0 {
			fmt.Fprintf(&b, "  haproxy %s: %s\n", a.Name, hxString(hs[len(hs)-1]))
		}
	}
	return b.String()
}

// Get fetches an agent's API path (e.g. /v1/hooks) into out, from inside
// the agent's namespace.
func (c *Cluster) Get(a *Agent, path string, out any) error {
	hc := a.Host.HTTPClient(2 * time.Second)
	defer hc.CloseIdleConnections()
	return getJSON(context.Background(), hc, "http://"+a.HTTPAddr()+path, out)
}

// AddHost adds a host to the network (for agents that are not part of the
// database cluster: a wrong-key newcomer, a storm of short-lived agents).
func (c *Cluster) AddHost(t testing.TB) *Host {
	t.Helper()
	c.mu.Lock()
	i := c.nextIndex
	c.nextIndex++
	c.mu.Unlock()
	return c.Net.AddHost(t, i)
}

// AddAgent creates and starts an extra agent, killed at cleanup.
func (c *Cluster) AddAgent(t testing.TB, h *Host, spec AgentSpec) *Agent {
	t.Helper()
	a := NewAgent(t, h, c.Dir, spec)
	c.mu.Lock()
	c.extra = append(c.extra, a)
	c.mu.Unlock()
	a.Start(t, true)
	return a
}

// CheckNoTwoWriters fails the scenario if any sample so far showed two
// writers on an agent or two ready write servers in an HAProxy, and returns
// the number of such samples. Every scenario checks it at its end anyway.
func (c *Cluster) CheckNoTwoWriters(t testing.TB) int {
	t.Helper()
	c.mu.Lock()
	c.checked = true
	c.mu.Unlock()
	vs := c.Obs.Violations(time.Time{})
	for i, v := range vs {
		if i == 10 {
			t.Errorf("... and %d more", len(vs)-i)
			break
		}
		t.Errorf("two writers at %s: %s", v.At.Format("15:04:05.000"), v.What)
	}
	return len(vs)
}
