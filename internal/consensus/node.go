package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
)

// Config is what Open needs. The agent builds it from Settings.
type Config struct {
	ID        string // this agent's node name: its raft server ID
	Bind      string // host:port the raft listener binds
	Advertise string // host:port the other voters dial
	// AltAddrs are other raft addresses this voter is reached at (the
	// agent gives its gossip IP with the raft port, the address the other
	// voters see in the gossip): its certificate binds them with
	// Advertise.
	AltAddrs        []string
	DataDir         string // raft log, stable store and snapshots
	Keyring         *Keyring
	BootstrapExpect int
	// Timeouts as raft.Config has them; zero keeps raft's default.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	Log                                                   *slog.Logger
	// OnApply is called with each term a grant made current (may be nil).
	// It runs on raft's apply goroutine (see NewFSM): it must not block
	// nor do I/O; hand the term to a TermQueue and do the work elsewhere.
	OnApply func(pool.Term)
	// OnRefused is called for each raft connection refused (may be nil).
	OnRefused func(remote net.Addr, reason string, err error)
	// Clock is the clock of the node's loop (its tickers), of the retry
	// windows and of the terms' grant times; nil is the real clock. Raft
	// keeps its own timers, and deadlines of contexts and connections
	// stay on the real clock.
	Clock clockwork.Clock
}

// Node is this agent's raft server: a voter in the fleet's one raft group,
// whose FSM holds each cluster's writer term.
type Node struct {
	cfg    Config
	log    *slog.Logger
	clock  clockwork.Clock
	creds  *Credentials // this voter's identity in raft handshakes
	fsm    *FSM
	raft   *raft.Raft
	stream *StreamLayer
	trans  *raft.NetworkTransport
	store  *raftboltdb.BoltStore
	peers  *peerContact
	// bootSet is the voter set MaybeBootstrap saw at its previous call
	// (only the loop calls it).
	bootSet string
	// refusedPeers: peers whose admission handshake failed, and until when
	// Reconcile does not try them again (only the loop uses it).
	refusedPeers map[string]time.Time
	// unprovenWriters: writers whose proof before a grant failed, and
	// until when it is not tried again.
	proveMu         sync.Mutex // guards: unprovenWriters
	unprovenWriters map[string]time.Time
	// gossipIPs are the IPs of the voters the gossip showed at the loop's
	// last membership round (trusted).
	gossipIPs atomic.Pointer[map[netip.Addr]bool]

	// rounds counts the loops' completed rounds (tests wait on them).
	rounds struct{ decide, membership atomic.Uint64 }

	closeOnce sync.Once
	closeErr  error
}

// Open starts the raft server: it opens (or creates) the stores in
// cfg.DataDir and binds cfg.Bind. A node with no state waits to be
// bootstrapped (MaybeBootstrap) or added by the leader.
func Open(cfg Config) (n *Node, err error) {
	if cfg.ID == "" || cfg.Keyring == nil || cfg.DataDir == "" {
		return nil, errors.New("consensus: node ID, keyring and data directory are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	n = &Node{cfg: cfg, log: log, clock: clock, fsm: NewFSM(cfg.OnApply), peers: newPeerContact(), refusedPeers: map[string]time.Time{}, unprovenWriters: map[string]time.Time{}}
	defer func() {
		if err != nil {
			n.closeParts()
		}
	}()
	addrs := []string{cfg.Advertise}
	for _, a := range cfg.AltAddrs {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if n.creds, err = cfg.Keyring.Issue(Identity{Node: cfg.ID, Addrs: addrs}); err != nil {
		return nil, fmt.Errorf("consensus: %w", err)
	}
	if err = os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("consensus data directory: %w", err)
	}
	hl := newHCLog(log)
	if n.store, err = openStore(cfg.DataDir, cfg.ID, storeLockTimeout); err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hl)
	if err != nil {
		return nil, fmt.Errorf("consensus snapshots in %s: %w", cfg.DataDir, err)
	}
	if err = n.listen(hl); err != nil {
		return nil, err
	}
	rc := n.raftConfig(hl)
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.store, n.store, snaps, n.trans); err != nil {
		return nil, fmt.Errorf("consensus: start raft: %w", err)
	}
	n.stream.SetExpect(n.voterAt)
	n.raft.RegisterObserver(raft.NewObserver(n.peers.ch, false, nil))
	n.stream.SetTrusted(n.trusted)
	go n.peers.run()
	return n, nil
}

func (n *Node) listen(hl hclogger) error {
	adv, err := net.ResolveTCPAddr("tcp", n.cfg.Advertise)
	if err != nil {
		return fmt.Errorf("consensus advertise %q: %w", n.cfg.Advertise, err)
	}
	ln, err := net.Listen("tcp", n.cfg.Bind)
	if err != nil {
		return fmt.Errorf("consensus listen on %s: %w", n.cfg.Bind, err)
	}
	n.stream = NewStreamLayer(ln, n.creds, adv, StreamOptions{OnRefused: n.cfg.OnRefused})
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: n.stream, MaxPool: 3, Timeout: 5 * time.Second, Logger: hl,
	})
	return nil
}

func (n *Node) raftConfig(hl hclogger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.Logger = hl
	if n.cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	}
	if n.cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = n.cfg.ElectionTimeout
	}
	if n.cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	}
	// Terms are few and small: snapshot often enough that the log stays short.
	rc.SnapshotThreshold = 1024
	rc.TrailingLogs = 1024
	return rc
}

// voterAt names the server the raft configuration has at addr: the voter
// raft's transport must find there.
func (n *Node) voterAt(addr string) (string, bool) {
	f := n.raft.GetConfiguration() // not blocking: raft keeps the latest configuration
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.Address) == addr {
			return string(s.ID), true
		}
	}
	return "", false
}

// Identity is what this voter proves in raft handshakes.
func (n *Node) Identity() Identity { return n.creds.Identity() }

// trusted reports whether ip is a known voter's: a server of the current
// raft configuration, or, while this node is in none (before the
// bootstrap), a voter the gossip showed at the last membership round: any
// holder of the gossip key can advertise the voter tag, so once a
// configuration exists only its servers are trusted. Their connections may
// take the stream layer's reserved slots. Addresses that are not IP
// literals never match (no lookup here).
func (n *Node) trusted(ip netip.Addr) bool {
	f := n.raft.GetConfiguration() // non-blocking: the latest configuration
	if f.Error() != nil {
		return false
	}
	if m := n.gossipIPs.Load(); m != nil && (*m)[ip] && len(f.Configuration().Servers) == 0 {
		return true
	}
	for _, s := range f.Configuration().Servers {
		if hostIP(string(s.Address)) == ip {
			return true
		}
	}
	return false
}

// setGossipPeers records the IPs of the voters the gossip shows.
func (n *Node) setGossipPeers(alive []Peer) {
	m := make(map[netip.Addr]bool, len(alive))
	for _, p := range alive {
		if ip := hostIP(p.Addr); ip.IsValid() {
			m[ip] = true
		}
	}
	n.gossipIPs.Store(&m)
}

// hostIP is the IP of a host:port address, the zero Addr if its host is
// no IP literal.
func hostIP(addr string) netip.Addr {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// FSM returns the replicated terms.
func (n *Node) FSM() *FSM { return n.fsm }

// ID returns this node's raft server ID.
func (n *Node) ID() string { return n.cfg.ID }

// IsLeader reports whether this node is the raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// HasState reports whether this node has joined a raft configuration
// (bootstrapped, or added by a leader): it then never bootstraps again.
func (n *Node) HasState() bool {
	f := n.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}

// Voters returns the voters of the current configuration, by ID.
func (n *Node) Voters() map[string]string {
	f := n.raft.GetConfiguration()
	out := map[string]string{}
	if f.Error() != nil {
		return out
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out[string(s.ID)] = string(s.Address)
		}
	}
	return out
}

// Grant applies a grant through the quorum and returns the granted term.
// Only the leader can; ErrStale means another grant came first. It waits
// until the entry is applied here, raft refuses it (leadership lost), or
// ctx ends: raft is given ctx's deadline to take the entry in, or
// defaultApplyTimeout without one. When ctx ends first the error wraps
// ctx's, and the grant may still be applied (a grant decided again then
// meets ErrStale, never a second writer).
func (n *Node) Grant(ctx context.Context, g pool.Grant) (pool.Term, error) {
	b, err := EncodeGrant(g)
	if err != nil {
		return pool.Term{}, err
	}
	return n.applyGrant(ctx, b, g)
}

// applyGrant applies a grant's entry and returns the term it made current.
func (n *Node) applyGrant(ctx context.Context, b []byte, g pool.Grant) (pool.Term, error) {
	r, err := n.apply(ctx, b)
	if err != nil {
		return pool.Term{}, fmt.Errorf("grant term %d in %q: %w", g.Term.Number, g.Term.Cluster, err)
	}
	switch r := r.(type) {
	case pool.Term:
		return r, nil
	case error:
		return pool.Term{}, r
	}
	return pool.Term{}, fmt.Errorf("grant term %d in %q: no result", g.Term.Number, g.Term.Cluster)
}

// BeginSwitch records a switchover's intent through the quorum (see
// SwitchIntent); the same intent again changes nothing.
func (n *Node) BeginSwitch(ctx context.Context, in SwitchIntent) (SwitchIntent, error) {
	b, err := EncodeSwitchBegin(in)
	if err != nil {
		return SwitchIntent{}, err
	}
	return n.applyIntent(ctx, b, "record switchover "+in.ID)
}

// EndSwitch ends a recorded switchover: rolled back (only before its
// grant: else ErrSwitchGranted) or done.
func (n *Node) EndSwitch(ctx context.Context, cluster, id, outcome string, rollback bool) (SwitchIntent, error) {
	b, err := EncodeSwitchEnd(cluster, id, outcome, rollback)
	if err != nil {
		return SwitchIntent{}, err
	}
	return n.applyIntent(ctx, b, "end switchover "+id)
}

// GrantSwitch grants the term of a recorded switchover, and marks it
// granted.
func (n *Node) GrantSwitch(ctx context.Context, id string, g pool.Grant) (pool.Term, error) {
	b, err := EncodeGrantSwitch(id, g)
	if err != nil {
		return pool.Term{}, err
	}
	return n.applyGrant(ctx, b, g)
}

// applyIntent applies an intent's entry and returns the FSM's intent.
func (n *Node) applyIntent(ctx context.Context, b []byte, what string) (SwitchIntent, error) {
	r, err := n.apply(ctx, b)
	if err != nil {
		return SwitchIntent{}, fmt.Errorf("%s: %w", what, err)
	}
	switch r := r.(type) {
	case SwitchIntent:
		return r, nil
	case error:
		return SwitchIntent{}, r
	}
	return SwitchIntent{}, fmt.Errorf("%s: no result", what)
}

// defaultApplyTimeout bounds raft's wait to take in an entry, a barrier
// or a configuration change when the caller's context has no deadline.
const defaultApplyTimeout = 5 * time.Second

// raftTimeout is the timeout raft is given for an operation under ctx:
// what is left of ctx's deadline (a context's deadline is on the real
// clock), else defaultApplyTimeout. It fails when ctx has ended.
func raftTimeout(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return 0, context.DeadlineExceeded
		}
		return d, nil
	}
	return defaultApplyTimeout, nil
}

// await waits for f, or until ctx ends (f's operation may then still
// complete).
func await(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }() // raft answers every future: it ends
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply applies one entry through the quorum and returns the FSM's
// response.
func (n *Node) apply(ctx context.Context, b []byte) (any, error) {
	d, err := raftTimeout(ctx)
	if err != nil {
		return nil, err
	}
	f := n.raft.Apply(b, d)
	if err := await(ctx, f); err != nil {
		return nil, err
	}
	return f.Response(), nil
}

// Barrier waits until every entry committed before it is applied here:
// a new leader calls it before it decides on the terms it holds. It
// gives up when ctx ends; raft is given ctx's deadline (5 s without one).
func (n *Node) Barrier(ctx context.Context) error {
	d, err := raftTimeout(ctx)
	if err != nil {
		return fmt.Errorf("raft barrier: %w", err)
	}
	if err := await(ctx, n.raft.Barrier(d)); err != nil {
		return fmt.Errorf("raft barrier: %w", err)
	}
	return nil
}

// Close shuts raft down and closes the stores; safe to call twice.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.raft != nil {
			n.closeErr = n.raft.Shutdown().Error()
		}
		n.closeParts()
	})
	return n.closeErr
}

func (n *Node) closeParts() {
	if n.peers != nil {
		n.peers.stop()
	}
	if n.trans != nil {
		_ = n.trans.Close()
	} else if n.stream != nil {
		_ = n.stream.Close()
	}
	if n.store != nil {
		_ = n.store.Close()
	}
}
