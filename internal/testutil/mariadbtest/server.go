package mariadbtest

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
)

// Options configures a Server. The zero value is a writable primary.
type Options struct {
	// ReadOnly starts the server with read_only=ON in its my.cnf.
	ReadOnly bool
	// ExtraConfig lines are appended to the [mariadbd] section of my.cnf,
	// e.g. "slave_net_timeout=4".
	ExtraConfig []string
	// StartTimeout bounds each wait for the server to accept connections
	// (default 60 s; the first start in a fresh cache also builds the
	// template).
	StartTimeout time.Duration

	// Netns runs mariadbd inside this named network namespace (through
	// `ip netns exec NETNS`, which execs in place, so the PID is still the
	// server's). Admin statements keep using the unix socket, which every
	// namespace can reach. Needs root.
	Netns string
	// BindAddress is the server's bind-address (default 127.0.0.1), e.g.
	// "0.0.0.0" so that it answers on 127.0.0.1 and on the namespace's
	// own address.
	BindAddress string
	// Host is the address other servers and clients use to reach this one:
	// what Addr reports and what ReplicateFrom gives replicas as the
	// primary's MASTER_HOST and the primary as the replica's account host.
	// Default: BindAddress unless it is a wildcard, else 127.0.0.1.
	Host string
	// Port is a fixed TCP port; 0 picks a free 127.0.0.1 port (and retries
	// if another process takes it first). With Netns each namespace has
	// its own ports, so e.g. 3306 can be used by every server.
	Port int
}

// host returns the address peers use to reach the server.
func (o Options) host() string {
	switch {
	case o.Host != "":
		return o.Host
	case o.BindAddress != "" && o.BindAddress != "0.0.0.0" && o.BindAddress != "::" && o.BindAddress != "*":
		return o.BindAddress
	default:
		return "127.0.0.1"
	}
}

// serverConfig is an instance's launch config and, for the e2e hosts, the
// network namespace it runs in ("" is the caller's).
type serverConfig struct {
	launch.Config
	netns string
}

// nextServerID makes server_id unique within the test process.
var nextServerID atomic.Int32

// Server is one running mariadbd. Methods that take no error return call
// t.Fatal on failure and must be called from the test goroutine.
type Server struct {
	t    testing.TB
	opts Options

	mu  sync.Mutex
	cfg serverConfig
	pr  *process
	db  *sql.DB
}

// Start initialises a datadir, starts mariadbd (by default on a free
// 127.0.0.1 port; see Options) and waits until it accepts connections. The server is killed in t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bins, err := findBinaries()
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	tpl, err := launch.Template(bins)
	if err != nil {
		t.Fatalf("mariadbtest: build template datadir: %v", err)
	}
	// Not t.TempDir: the unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "mdt-")
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	s := &Server{t: t, opts: opts}
	s.cfg = serverConfig{
		Config: launch.Config{
			Dir:      dir,
			ServerID: int(nextServerID.Add(1)),
			ReadOnly: opts.ReadOnly,
			Bind:     opts.BindAddress,
			Extra:    opts.ExtraConfig,
		},
		netns: opts.Netns,
	}
	t.Cleanup(s.cleanup)
	if err := launch.CopyTree(tpl, s.cfg.Datadir()); err != nil {
		t.Fatalf("mariadbtest: copy template datadir: %v", err)
	}
	// A free port can be taken between probing and binding: retry.
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				t.Fatalf("mariadbtest: %v", err)
			}
		}
		s.cfg.Port = port
		err = s.launch(bins.Mariadbd)
		if err == nil {
			break
		}
		if opts.Port != 0 || attempt >= 5 || !strings.Contains(s.errorLogTail(20), "already in use") {
			t.Fatalf("mariadbtest: start mariadbd: %v\n%s", err, s.errorLogTail(30))
		}
	}
	return s
}

// launch writes my.cnf, starts the process and waits until it is ready.
func (s *Server) launch(bin string) error {
	if err := s.cfg.Write(); err != nil {
		return err
	}
	pr, err := startProcess(bin, s.cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pr = pr
	s.mu.Unlock()
	if err := s.waitReady(pr, s.opts.StartTimeout); err != nil {
		pr.kill(10 * time.Second)
		return err
	}
	return nil
}

// waitReady polls the unix socket until the server answers a ping.
func (s *Server) waitReady(pr *process, timeout time.Duration) error {
	db := s.DB()
	deadline := time.Now().Add(timeout)
	for {
		err := pingOnce(db, time.Second)
		if err == nil {
			return nil
		}
		select {
		case <-pr.exited:
			return fmt.Errorf("mariadbd exited during start-up: %v", pr.waitErr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd not ready after %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the server's TCP address, Host:port (127.0.0.1:port by default).
func (s *Server) Addr() string {
	return net.JoinHostPort(s.opts.host(), strconv.Itoa(s.cfg.Port))
}

// Host is the address peers use to reach the server (Options.Host).
func (s *Server) Host() string { return s.opts.host() }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.cfg.Port }

// Socket is the path of the server's unix socket.
func (s *Server) Socket() string { return s.cfg.Socket() }

// ServerID is the server's server_id.
func (s *Server) ServerID() int { return s.cfg.ServerID }

// Dir is the instance directory (datadir, my.cnf, error.log).
func (s *Server) Dir() string { return s.cfg.Dir }

// ErrorLog returns the last n lines of the server's error log.
func (s *Server) ErrorLog(n int) string { return s.errorLogTail(n) }

// PID is the process id of the running mariadbd, or 0 if none runs.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pr == nil || s.pr.done() {
		return 0
	}
	return s.pr.cmd.Process.Pid
}

// Kill sends SIGKILL (kill -9) and waits for the process to exit.
func (s *Server) Kill() {
	s.t.Helper()
	if err := s.process().kill(10 * time.Second); err != nil {
		s.t.Fatalf("mariadbtest: kill -9: %v", err)
	}
}

// Stop sends SIGSTOP: the server hangs with its sockets open.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.process().signal(sigStop); err != nil {
		s.t.Fatalf("mariadbtest: SIGSTOP: %v", err)
	}
}

// Cont sends SIGCONT to a server stopped with Stop.
func (s *Server) Cont() {
	s.t.Helper()
	if err := s.process().signal(sigCont); err != nil {
		s.t.Fatalf("mariadbtest: SIGCONT: %v", err)
	}
}

// Restart stops the server (SIGTERM, or nothing if it is already dead) and
// starts it again with the same datadir, config and port.
func (s *Server) Restart() {
	s.t.Helper()
	if pr := s.process(); !pr.done() {
		if err := pr.terminate(60 * time.Second); err != nil {
			s.t.Fatalf("mariadbtest: stop for restart: %v", err)
		}
	}
	bins, err := findBinaries()
	if err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
	if err := s.launch(bins.Mariadbd); err != nil {
		s.t.Fatalf("mariadbtest: restart: %v\n%s", err, s.errorLogTail(30))
	}
}

func (s *Server) process() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pr
}

// cleanup kills the process, closes the admin pool and removes the
// directory; on a failed test it logs the error log first.
func (s *Server) cleanup() {
	if pr := s.process(); pr != nil {
		if err := pr.kill(10 * time.Second); err != nil {
			s.t.Errorf("mariadbtest: cleanup: %v", err)
		}
	}
	s.mu.Lock()
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
	s.mu.Unlock()
	if s.t.Failed() {
		s.t.Logf("mariadbtest: server %s (server_id %d) error log tail:\n%s", s.Addr(), s.cfg.ServerID, s.errorLogTail(40))
	}
	os.RemoveAll(s.cfg.Dir)
}

func (s *Server) errorLogTail(n int) string {
	b, err := os.ReadFile(s.cfg.ErrorLog())
	if err != nil {
		return fmt.Sprintf("(no error log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePort asks the kernel for a free 127.0.0.1 port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
