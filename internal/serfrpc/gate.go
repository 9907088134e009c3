// Package serfrpc puts a gate in front of serf's own RPC server (the
// AgentIPC of serf's agent package), so that stock serf tooling keeps
// working while what changes the agent or reveals a secret needs a token.
//
// serf's AgentIPC serves the protocol on an in-process listener that only
// the gate can reach (Backend). The gate accepts the real client
// connections, handles handshake and auth itself, refuses what the client
// may not run, validates tag changes, and relays the rest: requests
// forwarded one by one under the gate's own sequence numbers, responses
// relayed message by message (header, plus body when serf sends one) under
// the client's. Its own answers take the same write lock, so they never
// land inside a relayed message.
package serfrpc

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/backoff"
)

// Defaults of the bounds in Config.
const (
	DefaultMaxConns        = 64
	DefaultMaxRequestBytes = 64 << 10
	DefaultSetupTimeout    = 10 * time.Second
)

// maxRecordSeqs bounds the streams, monitors and queries one connection may
// have open or stopped (a stopped stream may still have records in flight,
// so its entry is kept until the connection closes; a query's goes at its
// "done" record).
const maxRecordSeqs = 1024

// Config configures a Gate.
type Config struct {
	// Token is what the auth command must carry. Required.
	Token string
	// Strict: every command but handshake and auth needs auth (serf's rule
	// when rpc_auth is set). Otherwise members, members-filtered, stats and
	// get-coordinate are served without it.
	Strict bool
	// CheckTags validates a tags command (tags to set, tags to delete)
	// before it reaches the agent; its error is the client's answer.
	// nil: no check.
	CheckTags func(set map[string]string, del []string) error
	// EventHandlers, when set, gives the event_handlers section of the
	// stats response (what `serf info` lists): serf's agent builds it from
	// its own handler config, which shoal does not use. authed says
	// whether the client authenticated, so that arguments that may hold a
	// secret can be hidden from the others. nil: relayed unchanged.
	EventHandlers func(authed bool) map[string]string
	// Leave, when set, serves an authorized leave instead of serf's agent
	// (whose handler shuts serf down under the agent, which then cannot
	// tell a requested leave from a crash). It does the graceful leave;
	// its error is the client's answer. Once that answer is written (or
	// could not be), the gate calls AfterLeave (when set: the agent exits,
	// and its shutdown closes the connection), the order serf's handler
	// follows.
	Leave      func() error
	AfterLeave func()
	// MaxConns bounds the client connections open at once; more are closed
	// at accept. 0: DefaultMaxConns.
	MaxConns int
	// MaxRequestBytes bounds the bytes one request (header and body) may
	// take. 0: DefaultMaxRequestBytes.
	MaxRequestBytes int
	// SetupTimeout bounds the wait for the client's handshake and for the
	// agent side to take the connection. 0: DefaultSetupTimeout.
	SetupTimeout time.Duration
	Logger       *slog.Logger
}

// Gate accepts Serf RPC clients on a listener and relays what they may run
// to the agent's RPC server on Backend.
type Gate struct {
	cfg     Config
	log     *slog.Logger
	ln      net.Listener
	backend *pipeListener
	done    chan struct{}

	mu     sync.Mutex
	closed bool
	conns  map[*conn]struct{}
	nextID uint64

	wg sync.WaitGroup
}

// New starts a gate accepting on ln. Serve serf's RPC on Backend().
func New(ln net.Listener, cfg Config) (*Gate, error) {
	if cfg.Token == "" {
		return nil, errors.New("serf rpc gate: token is empty")
	}
	if cfg.MaxConns < 0 || cfg.MaxRequestBytes < 0 || cfg.SetupTimeout < 0 {
		return nil, fmt.Errorf("serf rpc gate: negative bound (max conns %d, max request bytes %d, setup timeout %s)",
			cfg.MaxConns, cfg.MaxRequestBytes, cfg.SetupTimeout)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.SetupTimeout == 0 {
		cfg.SetupTimeout = DefaultSetupTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gate{
		cfg:     cfg,
		log:     cfg.Logger,
		ln:      ln,
		backend: newPipeListener(),
		done:    make(chan struct{}),
		conns:   map[*conn]struct{}{},
	}
	g.wg.Add(1)
	go g.acceptLoop()
	return g, nil
}

// Backend is the listener serf's AgentIPC serves on. Only the gate dials
// it. Closing it is the AgentIPC's job (its Shutdown).
func (g *Gate) Backend() net.Listener { return g.backend }

// Addr is the address clients connect to.
func (g *Gate) Addr() net.Addr { return g.ln.Addr() }

// Close stops accepting, closes every client connection and its agent side,
// and waits for the gate's goroutines. It is idempotent.
func (g *Gate) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	close(g.done)
	_ = g.ln.Close()
	for c := range g.conns {
		c.close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

func (g *Gate) acceptLoop() {
	defer g.wg.Done()
	// Accept errors (too many open files) are retried (backoff.Accept).
	retry := backoff.New(backoff.Accept, nil)
	for {
		nc, err := g.ln.Accept()
		if err != nil {
			select {
			case <-g.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				g.log.Error("serf rpc listener closed", "err", err)
				return
			}
			delay := retry.Next()
			g.log.Error("accept a serf rpc client", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-g.done:
				return
			}
			continue
		}
		retry.Reset()
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			_ = nc.Close()
			return
		}
		if len(g.conns) >= g.cfg.MaxConns {
			g.mu.Unlock()
			g.log.Warn("serf rpc connection refused: too many open connections", "remote", nc.RemoteAddr().String(), "max_conns", g.cfg.MaxConns)
			_ = nc.Close()
			continue
		}
		g.nextID++
		c := newConn(g, g.nextID, nc)
		g.conns[c] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go func() {
			defer g.wg.Done()
			defer g.forget(c)
			defer c.recoverPanic("serve")
			c.serve()
		}()
	}
}

func (g *Gate) forget(c *conn) {
	c.close()
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}
