//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Galera: a real MariaDB Galera cluster (galera-4), one node per host
// namespace, each with a db agent, plus app agents without a router.
//
// mariadbtest cannot run Galera nodes: only the first node is bootstrapped
// (--wsrep-new-cluster on its first start only, the galera_new_cluster
// semantics), the joiners start from an empty datadir and get it by SST,
// and the nodes run as the mysql user (rsync SST runs an rsync daemon that,
// started by root, would drop to nobody and fail to write the datadir),
// started through setpriv so that they keep their parent-death signal.

// Galera ports, the same on every host (each host has its own address).
const (
	GaleraPort    = 4567 // group communication
	GaleraISTPort = 4568
	GaleraSSTPort = 4444
)

// galeraProviders are where distributions put the galera-4 library.
var galeraProviders = []string{
	"/usr/lib/galera/libgalera_smm.so",
	"/usr/lib/galera4/libgalera_smm.so",
	"/usr/lib64/galera-4/libgalera_smm.so",
	"/usr/lib/libgalera_smm.so",
}

// GaleraMissing lists what the Galera scenario needs beyond the suite.
func GaleraMissing() []string {
	var miss []string
	if galeraProvider() == "" {
		miss = append(miss, "libgalera_smm.so (apt-get install -y galera-4)")
	}
	for _, bin := range []string{"rsync", "wsrep_sst_rsync", "mariadb-install-db", "setpriv"} {
		if _, err := lookPath(bin); err != nil {
			pkg := map[string]string{"rsync": "rsync", "setpriv": "util-linux"}[bin]
			if pkg == "" {
				pkg = "mariadb-server"
			}
			miss = append(miss, fmt.Sprintf("%s (apt-get install -y %s)", bin, pkg))
		}
	}
	if _, err := user.Lookup("mysql"); err != nil {
		miss = append(miss, "the mysql user (apt-get install -y mariadb-server)")
	}
	return miss
}

// RequireGalera is Require plus GaleraMissing: skip, or fail under CI=true.
func RequireGalera(t testing.TB) {
	t.Helper()
	Require(t)
	if miss := GaleraMissing(); len(miss) > 0 {
		msg := "galera scenario needs: " + strings.Join(miss, "; ")
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: must not be skipped)", msg)
		}
		t.Skip(msg)
	}
}

func galeraProvider() string {
	for _, p := range galeraProviders {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// GaleraNode is one mariadbd with wsrep on, in a host's namespace.
type GaleraNode struct {
	Name     string
	Host     *Host
	Dir      string
	ServerID int

	mu   sync.Mutex
	proc *Proc
	db   *sql.DB
}

func (g *GaleraNode) cnf() string    { return filepath.Join(g.Dir, "my.cnf") }
func (g *GaleraNode) socket() string { return filepath.Join(g.Dir, "mysqld.sock") }
func (g *GaleraNode) datadir() string {
	return filepath.Join(g.Dir, "data")
}

// ErrorLogTail returns the last n lines of the node's error log.
func (g *GaleraNode) ErrorLogTail(n int) string {
	return tailFile(filepath.Join(g.Dir, "error.log"), n)
}

// newGaleraNode writes the node's my.cnf. members are every node's host.
func newGaleraNode(t testing.TB, dir string, index int, h *Host, members []*Host, timeouts string) *GaleraNode {
	t.Helper()
	g := &GaleraNode{Name: fmt.Sprintf("db%d", index), Host: h, Dir: filepath.Join(dir, fmt.Sprintf("db%d", index)), ServerID: index}
	if err := os.MkdirAll(g.datadir(), 0o755); err != nil {
		t.Fatalf("e2e galera: %v", err)
	}
	var addrs []string
	for _, m := range members {
		addrs = append(addrs, m.IP)
	}
	lines := []string{
		"# written by the e2e harness (Galera node)",
		"[mariadbd]",
		"user=mysql",
		"datadir=" + g.datadir(),
		"socket=" + g.socket(),
		"pid-file=" + filepath.Join(g.Dir, "mysqld.pid"),
		"log-error=" + filepath.Join(g.Dir, "error.log"),
		fmt.Sprintf("port=%d", MySQLPort),
		"bind-address=0.0.0.0",
		"skip-name-resolve",
		fmt.Sprintf("server-id=%d", index),
		// Small and fast: test data only.
		"performance_schema=OFF",
		"innodb_buffer_pool_size=16M",
		"innodb_log_buffer_size=2M",
		"innodb_log_file_size=4M",
		"innodb_doublewrite=0",
		"innodb_flush_log_at_trx_commit=2",
		"aria_pagecache_buffer_size=8M",
		"key_buffer_size=1M",
		"max_connections=100",
		// What Galera requires.
		"binlog_format=ROW",
		"default_storage_engine=InnoDB",
		"innodb_autoinc_lock_mode=2",
		"wsrep_on=ON",
		"wsrep_provider=" + galeraProvider(),
		"wsrep_cluster_name=shoal-e2e",
		"wsrep_cluster_address=gcomm://" + strings.Join(addrs, ","),
		"wsrep_node_address=" + h.IP,
		"wsrep_node_name=" + g.Name,
		"wsrep_sst_method=rsync",
		"wsrep_provider_options=" + timeouts,
	}
	if err := os.WriteFile(g.cnf(), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatalf("e2e galera: %v", err)
	}
	if err := chownMySQL(g.Dir); err != nil {
		t.Fatalf("e2e galera: %v", err)
	}
	return g
}

func chownMySQL(dir string) error {
	u, err := user.Lookup("mysql")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// initDatadir runs mariadb-install-db (only the bootstrap node needs one).
func (g *GaleraNode) initDatadir() error {
	bin, err := lookPath("mariadb-install-db")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--defaults-file="+g.cnf(), "--user=mysql",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db for %s: %w\n%s", g.Name, err, out)
	}
	return nil
}

// Start starts mariadbd; bootstrap adds --wsrep-new-cluster (first node,
// first start only).
func (g *GaleraNode) Start(bootstrap bool) error {
	bin, err := lookPath("mariadbd")
	if err != nil {
		return err
	}
	setpriv, err := lookPath("setpriv")
	if err != nil {
		return err
	}
	// Started as mysql rather than switching to it by itself: a process
	// that changes its credentials loses its parent-death signal, so a
	// test binary killed by its -timeout would leave the nodes running.
	// setpriv drops to mysql first, then sets the signal, then execs.
	argv := []string{setpriv, "--reuid", "mysql", "--regid", "mysql", "--init-groups", "--pdeathsig", "KILL",
		bin, "--defaults-file=" + g.cnf()}
	if bootstrap {
		argv = append(argv, "--wsrep-new-cluster")
	}
	// mariadbd runs the SST scripts, which need the sbin and bin dirs.
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	p, err := StartProc("mariadbd "+g.Name, g.Host.NS, filepath.Join(g.Dir, "stdout.log"), env, argv...)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.proc = p
	g.mu.Unlock()
	return nil
}

// Kill sends SIGKILL to mariadbd and waits for the exit.
func (g *GaleraNode) Kill() {
	g.mu.Lock()
	p := g.proc
	g.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Wipe empties the datadir of a stopped node, so that it rejoins by SST.
func (g *GaleraNode) Wipe() error {
	g.mu.Lock()
	p := g.proc
	g.mu.Unlock()
	if p != nil && !p.Exited() {
		return fmt.Errorf("%s: wipe of a running node", g.Name)
	}
	entries, err := os.ReadDir(g.datadir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(g.datadir(), e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// DB is a small pool of root connections over the unix socket.
func (g *GaleraNode) DB() *sql.DB {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.db == nil {
		c := mysql.NewConfig()
		c.User, c.Net, c.Addr = "root", "unix", g.socket()
		c.Timeout, c.ReadTimeout = 2*time.Second, 5*time.Second
		c.Logger = &mysql.NopLogger{}
		conn, err := mysql.NewConnector(c)
		if err != nil {
			panic(fmt.Sprintf("e2e galera: connector: %v", err)) // static config
		}
		g.db = sql.OpenDB(conn)
		g.db.SetMaxOpenConns(2)
		g.db.SetConnMaxIdleTime(time.Second)
	}
	return g.db
}

// Exec runs one statement as root (bounded to 10 s).
func (g *GaleraNode) Exec(query string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.DB().ExecContext(ctx, query); err != nil {
		return fmt.Errorf("%s: %q: %w", g.Name, query, err)
	}
	return nil
}

// WsrepStatus is a node's wsrep_local_state_comment and wsrep_cluster_status
// (and cluster size), as root sees them.
func (g *GaleraNode) WsrepStatus() (state, cluster string, size int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := g.DB().QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
		"('wsrep_local_state_comment', 'wsrep_cluster_status', 'wsrep_cluster_size')")
	if err != nil {
		return "", "", 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return "", "", 0, err
		}
		switch strings.ToLower(k) {
		case "wsrep_local_state_comment":
			state = v
		case "wsrep_cluster_status":
			cluster = v
		case "wsrep_cluster_size":
			size, _ = strconv.Atoi(v)
		}
	}
	return state, cluster, size, rows.Err()
}

// WaitSynced waits until the node is Synced in a Primary component of at
// least size nodes.
func (g *GaleraNode) WaitSynced(size int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var state, cluster string
	var n int
	var err error
	for {
		state, cluster, n, err = g.WsrepStatus()
		if err == nil && state == "Synced" && cluster == "Primary" && n >= size {
			return nil
		}
		g.mu.Lock()
		p := g.proc
		g.mu.Unlock()
		if p != nil && p.Exited() {
			return fmt.Errorf("%s: mariadbd exited; error log:\n%s", g.Name, g.ErrorLogTail(30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not synced in a primary component of %d within %s: state %q cluster %q size %d err %v; error log:\n%s",
				g.Name, size, timeout, state, cluster, n, err, g.ErrorLogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// GaleraCluster is a running Galera cluster with a db agent per node and
// app agents (no router: the pool is checked through their API).
type GaleraCluster struct {
	Net    *Net
	Key    string
	Dir    string
	Nodes  []*GaleraNode
	DBs    []*Agent // DBs[i] is Nodes[i]'s agent
	Apps   []*Agent
	Obs    *Observer
	Synced time.Duration // bootstrap start to all nodes synced
	Formed time.Duration // first agent start to the expected pool everywhere
}

// GaleraOptions shapes a Galera cluster.
type GaleraOptions struct {
	Nodes    int // default 3
	AppHosts int // default 1
	// ProviderOptions is wsrep_provider_options (failure detection).
	ProviderOptions string
}

// DefaultGaleraProviderOptions shortens Galera's failure detection from its
// defaults (suspect 5 s, inactive 15 s) so a cut node leaves the primary
// component in about 3 s; the gcache is small.
const DefaultGaleraProviderOptions = "gcache.size=16M;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;" +
	"evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;evs.install_timeout=PT2.5S"

// NewGaleraCluster bootstraps db1, creates the accounts, joins the other
// nodes by rsync SST, then starts the agents and waits until every agent
// shows writer db1 and the other nodes as readers.
func NewGaleraCluster(t testing.TB, opts GaleraOptions) *GaleraCluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.AppHosts == 0 {
		opts.AppHosts = 1
	}
	if opts.ProviderOptions == "" {
		opts.ProviderOptions = DefaultGaleraProviderOptions
	}
	c := &GaleraCluster{Net: NewNet(t)}
	// Not under a 0700 directory: mariadbd runs as mysql.
	c.Dir = runDir(t, c.Net.Prefix)
	c.Key = Keygen(t)

	var hosts []*Host
	for i := 1; i <= opts.Nodes; i++ {
		hosts = append(hosts, c.Net.AddHost(t, i))
	}
	for i, h := range hosts {
		c.Nodes = append(c.Nodes, newGaleraNode(t, filepath.Join(c.Dir, "galera"), i+1, h, hosts, opts.ProviderOptions))
	}
	for _, g := range c.Nodes {
		g := g
		key := g.Host.NS + "/mariadbd"
		reg.addPIDFunc(key, func() int {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.proc == nil || g.proc.Exited() {
				return 0
			}
			return g.proc.PID()
		})
		t.Cleanup(func() {
			g.Kill()
			g.mu.Lock()
			if g.db != nil {
				g.db.Close()
			}
			g.mu.Unlock()
			reg.removePIDFunc(key)
			if t.Failed() {
				t.Logf("e2e galera: %s error log tail:\n%s", g.Name, g.ErrorLogTail(30))
			}
		})
	}

	start := time.Now()
	first := c.Nodes[0]
	if err := first.initDatadir(); err != nil {
		t.Fatalf("e2e galera: %v", err)
	}
	if err := first.Start(true); err != nil {
		t.Fatalf("e2e galera: %v", err)
	}
	if err := first.WaitSynced(1, 30*time.Second); err != nil {
		t.Fatalf("e2e galera: bootstrap: %v", err)
	}
	// Replicated to the joiners by SST (DDL and account statements are
	// total-order isolated in Galera).
	for _, q := range clientSchema() {
		if err := first.Exec(q); err != nil {
			t.Fatalf("e2e galera: %v", err)
		}
	}
	// Joiners one at a time: each is an SST from a synced donor.
	for i, g := range c.Nodes[1:] {
		if err := g.Start(false); err != nil {
			t.Fatalf("e2e galera: %v", err)
		}
		if err := g.WaitSynced(i+2, 60*time.Second); err != nil {
			t.Fatalf("e2e galera: join: %v", err)
		}
	}
	c.Synced = time.Since(start)

	var seeds []string
	for _, h := range hosts {
		seeds = append(seeds, h.IP)
	}
	c.Obs = NewObserver(t)
	for i, g := range c.Nodes {
		c.DBs = append(c.DBs, NewAgent(t, g.Host, c.Dir, AgentSpec{Name: g.Name, Role: "db", Key: c.Key, Join: without(seeds, hosts[i].IP)}))
	}
	for i := 1; i <= opts.AppHosts; i++ {
		h := c.Net.AddHost(t, opts.Nodes+i)
		c.Apps = append(c.Apps, NewAgent(t, h, c.Dir, AgentSpec{Name: fmt.Sprintf("app%d", i), Role: "app", Key: c.Key, Join: seeds}))
	}
	t.Cleanup(func() {
		for _, a := range c.Agents() {
			a.Kill()
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("e2e galera: observed timeline (time since the observer started):\n%s", c.Obs.Timeline())
			for _, a := range c.Agents() {
				t.Logf("e2e galera: --- last lines of %s's log (%s) ---\n%s", a.Name, a.LogPath(), a.LogTail(30))
			}
		}
	})
	agentsStart := time.Now()
	for _, a := range c.Agents() {
		a.Start(t, true)
		c.Obs.Watch(a)
	}
	want := c.ExpectPool(c.Nodes[0].Name)
	r := c.Obs.WaitAgents(c.AgentNames(), agentsStart, 60*time.Second, func(s Snap) bool {
		return s.OK() && s.Pool() == want && c.allAlive(s)
	})
	if !r.OK {
		t.Fatalf("e2e galera: agents did not show pool %q within 60 s; latest:\n%s", want, c.Describe())
	}
	c.Formed = r.Took
	return c
}

// Agents lists the db agents, then the app agents.
func (c *GaleraCluster) Agents() []*Agent { return append(append([]*Agent(nil), c.DBs...), c.Apps...) }

// AgentNames lists the agents' names.
func (c *GaleraCluster) AgentNames(except ...string) []string {
	return agentNames(c.Agents(), except...)
}

func (c *GaleraCluster) allAlive(s Snap) bool {
	for _, a := range c.Agents() {
		if s.Members[a.Name] != "alive" {
			return false
		}
	}
	return true
}

// ExpectPool is the Snap.Pool form of "writer w, every other node a
// reader, nothing out".
func (c *GaleraCluster) ExpectPool(w string) string {
	var readers []string
	for _, g := range c.Nodes {
		if g.Name != w {
			readers = append(readers, g.Name)
		}
	}
	return w + "|" + strings.Join(readers, ",") + "|"
}

// Describe is every agent's latest sample and every node's wsrep status.
func (c *GaleraCluster) Describe() string {
	var b strings.Builder
	describeAgents(&b, c.Obs, c.Agents())
	for _, g := range c.Nodes {
		st, cl, n, err := g.WsrepStatus()
		fmt.Fprintf(&b, "  mariadbd %s: %s %s size %d (err %v)\n", g.Name, st, cl, n, err)
	}
	return b.String()
}
