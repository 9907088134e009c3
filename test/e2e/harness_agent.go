//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/apitoken"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/pkg/client"
)

// Agent is one `shoal agent` process in a host's namespace: gossip on
// host:7946, HTTP API on host:8946, Serf RPC on the namespace's loopback,
// profile fast, encrypted with the cluster key, with a snapshot file.
type Agent struct {
	Name string
	Role string // db or app
	Host *Host
	Dir  string // snapshot, config, log

	args []string // everything but --join
	join []string
	env  []string
	bin  string

	mu   sync.Mutex
	proc *Proc
}

// HTTPAddr is the agent's HTTP API address (reachable from its namespace).
func (a *Agent) HTTPAddr() string { return fmt.Sprintf("%s:%d", a.Host.IP, HTTPPort) }

// GossipAddr is the agent's gossip address.
func (a *Agent) GossipAddr() string { return fmt.Sprintf("%s:%d", a.Host.IP, GossipPort) }

// LogPath is the file the agent's output goes to (all its runs).
func (a *Agent) LogPath() string { return filepath.Join(a.Dir, "agent.log") }

// AgentSpec describes an agent to create.
type AgentSpec struct {
	Name  string
	Role  string // db: probes 127.0.0.1:3306 in its namespace; app: no probe
	Key   string
	Join  []string // gossip addresses tried at the first start
	Extra []string // more flags; "{dir}" in them becomes the agent's directory
	// Config is a YAML file body (e.g. the HAProxy sink); written to
	// Dir/agent.yaml and passed with --config.
	Config string
	// Ports, when not zero, override the gossip and HTTP ports (several
	// agents in one namespace).
	GossipPort, HTTPPort int
}

// NewAgent prepares an agent (not started) with its own directory under
// dir.
func NewAgent(t testing.TB, h *Host, dir string, spec AgentSpec) *Agent {
	t.Helper()
	a := &Agent{Name: spec.Name, Role: spec.Role, Host: h, Dir: filepath.Join(dir, spec.Name), bin: ShoalBin(t), join: spec.Join}
	if err := os.MkdirAll(a.Dir, 0o700); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	gossip, http := GossipPort, HTTPPort
	if spec.GossipPort != 0 {
		gossip, http = spec.GossipPort, spec.HTTPPort
	}
	a.args = []string{"agent", "--node", spec.Name,
		"--bind", fmt.Sprintf("%s:%d", h.IP, gossip),
		"--encrypt", spec.Key, "--profile", "fast",
		"--snapshot", filepath.Join(a.Dir, "snapshot"),
		// Flap damping holds a reader out after repeated removals; the
		// scenarios move the same replicas in and out within seconds,
		// which it would (rightly) damp. It has its own tests.
		"--damping=false",
	}
	// Each agent keeps its API token in its own directory (the harness
	// only reads the API, which needs no token).
	a.args = append(a.args, "--api-token-file", filepath.Join(a.Dir, "api-token"))
	if http > 0 {
		// The API listens on the namespace's address so that the harness
		// can read it from outside: plain HTTP beyond loopback is an
		// explicit opt-in.
		a.args = append(a.args, "--http-addr", fmt.Sprintf("%s:%d", h.IP, http), "--insecure-http",
			"--rpc-addr", fmt.Sprintf("127.0.0.1:%d", 7373+gossip-GossipPort))
	} else {
		a.args = append(a.args, "--http-addr", "", "--rpc-addr", "")
	}
	if spec.Role == "db" {
		a.args = append(a.args, "--mysql-addr", fmt.Sprintf("127.0.0.1:%d", MySQLPort), "--mysql-user", ProbeUser,
			"--mysql-port", fmt.Sprint(MySQLPort), "--cluster", "main")
		a.env = []string{"SHOAL_MYSQL_PASSWORD=" + ProbePassword}
		// The account a former writer replicates with after shoal
		// switchover demoted it.
		pw := filepath.Join(a.Dir, "repl.password")
		if err := os.WriteFile(pw, []byte(mariadbtest.ReplPassword+"\n"), 0o600); err != nil {
			t.Fatalf("e2e: %v", err)
		}
		a.args = append(a.args, "--mysql-replication-user", mariadbtest.ReplUser, "--mysql-replication-password-file", pw)
	}
	if spec.Config != "" {
		cfg := filepath.Join(a.Dir, "agent.yaml")
		if err := os.WriteFile(cfg, []byte(spec.Config), 0o600); err != nil {
			t.Fatalf("e2e: %v", err)
		}
		a.args = append(a.args, "--config", cfg)
	}
	for _, f := range spec.Extra {
		a.args = append(a.args, strings.ReplaceAll(f, "{dir}", a.Dir))
	}
	return a
}

// AddFlags adds flags to the agent's command line, from its next start
// on; a flag given again overrides the earlier value ("{dir}" becomes the
// agent's directory, as in AgentSpec.Extra).
func (a *Agent) AddFlags(flags ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range flags {
		a.args = append(a.args, strings.ReplaceAll(f, "{dir}", a.Dir))
	}
}

// Start starts the agent; withJoin adds the --join addresses (a restart
// without them must rejoin from the snapshot).
func (a *Agent) Start(t testing.TB, withJoin bool) {
	t.Helper()
	a.mu.Lock()
	argv := append([]string{a.bin}, a.args...)
	a.mu.Unlock()
	if withJoin {
		for _, j := range a.join {
			argv = append(argv, "--join", j)
		}
	}
	p, err := StartProc("agent "+a.Name, a.Host.NS, a.LogPath(), a.env, argv...)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	a.mu.Lock()
	a.proc = p
	a.mu.Unlock()
}

// Proc is the current process (nil before Start).
func (a *Agent) Proc() *Proc {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc
}

// Kill sends SIGKILL (kill -9) and waits for the exit.
func (a *Agent) Kill() {
	if p := a.Proc(); p != nil {
		p.Kill()
	}
}

// Signal sends sig (SIGSTOP, SIGCONT, ...) to the agent.
func (a *Agent) Signal(sig syscall.Signal) error {
	p := a.Proc()
	if p == nil {
		return fmt.Errorf("agent %s not started", a.Name)
	}
	return p.Signal(sig)
}

// Stop leaves gracefully (SIGTERM) and waits up to timeout for the exit.
func (a *Agent) Stop(timeout time.Duration) {
	if p := a.Proc(); p != nil {
		p.Terminate(timeout)
	}
}

// LogTail returns the last n lines of the agent's log.
func (a *Agent) LogTail(n int) string { return tailFile(a.LogPath(), n) }

// Log returns the whole log.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.LogPath())
	return string(b)
}

// SnapshotMissing returns the peers that the agent's snapshot file does not
// list as alive (what a restart without --join could rejoin through).
func (a *Agent) SnapshotMissing(peers []string) []string {
	b, _ := os.ReadFile(filepath.Join(a.Dir, "snapshot"))
	alive := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "alive: "); ok {
			name, _, _ := strings.Cut(rest, " ")
			alive[name] = true
		} else if rest, ok := strings.CutPrefix(line, "not-alive: "); ok {
			delete(alive, strings.TrimSpace(rest))
		}
	}
	var missing []string
	for _, p := range peers {
		if !alive[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

// Client is a pkg/client client of the agent's API, dialing from inside
// its namespace, with the agent's API token (the closed routes need it).
func (a *Agent) Client() (*client.Client, error) {
	tok, err := apitoken.Read(filepath.Join(a.Dir, "api-token"))
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: a.Host.dialer.DialContext}}
	return client.New(a.HTTPAddr(), client.WithToken(tok), client.WithHTTPClient(hc), client.WithTimeout(5*time.Second)), nil
}
