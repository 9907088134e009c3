package consensus

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testVoters names the voter of each test layer's address, as a raft
// configuration would: every test layer dials by it.
var testVoters sync.Map // address -> node

func testVoterAt(addr string) (string, bool) {
	v, ok := testVoters.Load(addr)
	if !ok {
		return "", false
	}
	return v.(string), true
}

// testCreds issues credentials of kr for node at addr.
func testCreds(t testing.TB, kr *Keyring, node, addr string) *Credentials {
	t.Helper()
	c, err := kr.Issue(Identity{Node: node, Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// listenLayer serves a stream layer on a fresh 127.0.0.1 port, closed at
// the end of the test, as voter "node-<port>".
func listenLayer(t *testing.T, kr *Keyring, opts StreamOptions) *StreamLayer {
	t.Helper()
	return listenLayerAs(t, kr, "", opts)
}

// listenLayerAs is listenLayer as voter node ("": "node-<port>").
func listenLayerAs(t *testing.T, kr *Keyring, node string, opts StreamOptions) *StreamLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if node == "" {
		node = "node-" + addr[strings.LastIndex(addr, ":")+1:]
	}
	testVoters.Store(addr, node)
	s := NewStreamLayer(ln, testCreds(t, kr, node, addr), nil, opts)
	s.SetExpect(testVoterAt)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close stream layer: %v", err)
		}
	})
	return s
}

// acceptAll runs Accept in a loop until the layer closes and hands over
// what it returns; the connections are closed at the end of the test.
func acceptAll(t *testing.T, s *StreamLayer) <-chan net.Conn {
	t.Helper()
	out := make(chan net.Conn, 16)
	go func() {
		defer close(out)
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			out <- c
		}
	}()
	t.Cleanup(func() {
		_ = s.Close()
		for c := range out {
			_ = c.Close()
		}
	})
	return out
}

func nextConn(t *testing.T, acc <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-acc:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5 s")
		return nil
	}
}

// noConn checks that Accept returned nothing.
func noConn(t *testing.T, acc <-chan net.Conn) {
	t.Helper()
	select {
	case c := <-acc:
		t.Fatalf("Accept returned a connection from %s", c.RemoteAddr())
	default:
	}
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitRefused(t *testing.T, s *StreamLayer, reason string, n uint64) {
	t.Helper()
	waitFor(t, reason+" refusals", func() bool { return s.Refused()[reason] >= n })
	if got := s.Refused()[reason]; got != n {
		t.Fatalf("Refused()[%s] = %d, want %d (all: %v)", reason, got, n, s.Refused())
	}
}

// exchange dials to from from, and checks that bytes go both ways over the
// connection that to's Accept returns.
func exchange(t *testing.T, from, to *StreamLayer, acc <-chan net.Conn) {
	t.Helper()
	c, err := from.Dial(raft.ServerAddress(to.Addr().String()), 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", to.Addr(), err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("write ping: %v", err)
	}
	srv := nextConn(t, acc)
	defer func() { _ = srv.Close() }()
	if srv.RemoteAddr().String() != c.LocalAddr().String() {
		t.Fatalf("accepted %s, want the dialer %s", srv.RemoteAddr(), c.LocalAddr())
	}
	if v := srv.(*tls.Conn).ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("TLS version %x, want 1.3", v)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v, want ping", buf, err)
	}
	if _, err := srv.Write([]byte("pong")); err != nil {
		t.Fatalf("write pong: %v", err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v, want pong", buf, err)
	}
}

func TestStreamExchange(t *testing.T) {
	k := newKey(t)
	a := listenLayer(t, mustKeyring(t, k), StreamOptions{})
	b := listenLayer(t, mustKeyring(t, k), StreamOptions{})
	accA, accB := acceptAll(t, a), acceptAll(t, b)
	exchange(t, a, b, accB)
	exchange(t, b, a, accA)
	if len(a.Refused())+len(b.Refused()) != 0 {
		t.Errorf("refusals %v %v, want none", a.Refused(), b.Refused())
	}
}

func TestStreamRotation(t *testing.T) {
	k1, k2, k3 := newKey(t), newKey(t), newKey(t)
	server := listenLayer(t, mustKeyring(t, k2, k1), StreamOptions{})
	acc := acceptAll(t, server)
	old := listenLayer(t, mustKeyring(t, k1), StreamOptions{})
	exchange(t, old, server, acc) // server presents k1, the key the client announces
	accOld := acceptAll(t, old)
	exchange(t, server, old, accOld) // the client presents back k1, the server's key
	stranger := listenLayer(t, mustKeyring(t, k3), StreamOptions{})
	_, err := stranger.Dial(raft.ServerAddress(server.Addr().String()), 2*time.Second)
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("dial with [k3]: %v, want ErrUnknownKey", err)
	}
	waitRefused(t, server, RefusedHandshake, 1) // the client's alert
	noConn(t, acc)
}

// refusal is one way of reaching the port without the key.
type refusal struct {
	name   string
	reason string
	dial   func(t *testing.T, addr string) net.Conn
}

func refusals(t *testing.T) []refusal {
	other := mustKeyring(t, newKey(t))
	return []refusal{
		{"tls with another key", RefusedBadKey, func(t *testing.T, addr string) net.Conn {
			// A client that trusts any server, so the server's check is
			// the one that refuses.
			c, err := tls.Dial("tcp", addr, &tls.Config{
				InsecureSkipVerify: true,
				Certificates:       []tls.Certificate{*other.keys[0].cert},
				MinVersion:         tls.VersionTLS13,
			})
			if err != nil {
				t.Fatalf("tls dial: %v", err)
			}
			_, _ = c.Write([]byte{0, 1, 2, 3}) // raft bytes, never delivered
			return c
		}},
		{"plain raft bytes", RefusedHandshake, func(t *testing.T, addr string) net.Conn {
			return rawDial(t, addr, append([]byte{0}, bytes.Repeat([]byte{0x85}, 40)...))
		}},
		{"garbage", RefusedHandshake, func(t *testing.T, addr string) net.Conn {
			junk := make([]byte, 64)
			_, _ = rand.Read(junk)
			junk[0] = 0xff // not a TLS handshake record (0x16)
			return rawDial(t, addr, junk)
		}},
		{"silent", RefusedTimeout, func(t *testing.T, addr string) net.Conn {
			return rawDial(t, addr, nil)
		}},
	}
}

func rawDial(t *testing.T, addr string, payload []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(payload); err != nil {
		t.Fatalf("write: %v", err)
	}
	return c
}

// refusalLog records OnRefused calls.
type refusalLog struct {
	mu    sync.Mutex
	calls map[string]string // remote address -> reason
}

func (l *refusalLog) record(remote net.Addr, reason string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = make(map[string]string)
	}
	l.calls[remote.String()] = reason
}

func (l *refusalLog) reason(remote string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[remote]
}

func TestStreamRefusesStrangers(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	var log refusalLog
	server := listenLayer(t, kr, StreamOptions{HandshakeTimeout: 300 * time.Millisecond, OnRefused: log.record})
	acc := acceptAll(t, server)
	good := listenLayer(t, kr, StreamOptions{})
	addr := server.Addr().String()
	for _, r := range refusals(t) {
		t.Run(r.name, func(t *testing.T) {
			before := server.Refused()[r.reason]
			c := r.dial(t, addr)
			defer func() { _ = c.Close() }()
			waitRefused(t, server, r.reason, before+1)
			if got := log.reason(c.LocalAddr().String()); got != r.reason {
				t.Errorf("OnRefused reason for %s = %q, want %q", c.LocalAddr(), got, r.reason)
			}
			// The refused connection is closed by the server.
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.ReadAll(c); err != nil && !isRemoteAlert(err) {
				t.Errorf("read from a refused connection: %v, want EOF or an alert", err)
			}
			noConn(t, acc)
			exchange(t, good, server, acc) // the listener still serves
		})
	}
	want := map[string]uint64{RefusedBadKey: 1, RefusedHandshake: 2, RefusedTimeout: 1}
	if got := server.Refused(); len(got) != len(want) || got[RefusedBadKey] != 1 ||
		got[RefusedHandshake] != 2 || got[RefusedTimeout] != 1 {
		t.Errorf("Refused() = %v, want %v", got, want)
	}
}

func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

func TestStreamOverload(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	server := listenLayer(t, kr, StreamOptions{HandshakeTimeout: 500 * time.Millisecond, MaxPending: 2})
	acc := acceptAll(t, server)
	idle := make([]net.Conn, 5)
	for i := range idle {
		idle[i] = rawDial(t, server.Addr().String(), nil)
		defer func() { _ = idle[i].Close() }()
	}
	waitRefused(t, server, RefusedOverload, 3)
	// The overloaded connections are closed at once, the first two are held.
	for i, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if i < 2 && !isTimeout(err) {
			t.Errorf("idle conn %d (in handshake): read %v, want a timeout", i, err)
		}
		if i >= 2 && (err == nil || isTimeout(err)) {
			t.Errorf("idle conn %d (overload): read %v, want closed", i, err)
		}
	}
	waitRefused(t, server, RefusedTimeout, 2)
	exchange(t, listenLayer(t, kr, StreamOptions{}), server, acc)
	if got := server.Refused(); got[RefusedOverload] != 3 || got[RefusedTimeout] != 2 || len(got) != 2 {
		t.Errorf("Refused() = %v, want overload 3, timeout 2", got)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStreamClose(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewStreamLayer(ln, testCreds(t, kr, "closing", "192.0.2.1:7373"), &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7373}, StreamOptions{})
	if got := s.Addr().String(); got != "192.0.2.1:7373" {
		t.Errorf("Addr() = %s, want the advertised address", got)
	}
	silent := rawDial(t, ln.Addr().String(), nil) // a handshake in flight
	defer func() { _ = silent.Close() }()
	done := make(chan error, 1)
	go func() {
		_, err := s.Accept()
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("close took %v with a silent handshake in flight", d)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still blocked after Close")
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if _, err := s.Dial(raft.ServerAddress(ln.Addr().String()), time.Second); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close: %v, want net.ErrClosed", err)
	}
	if got := s.Refused(); len(got) != 0 {
		t.Errorf("Refused() = %v after Close, want nothing (shutdown is no refusal)", got)
	}
}

func TestProbe(t *testing.T) {
	k1, k2, k3 := newKey(t), newKey(t), newKey(t)
	server := listenLayerAs(t, mustKeyring(t, k1), "db1", StreamOptions{})
	acc := acceptAll(t, server)
	addr := server.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, keys := range [][]string{{k1}, {k2, k1}} {
		id, err := Probe(ctx, addr, testCreds(t, mustKeyring(t, keys...), "db2", "127.0.0.1:1"), "db1")
		if err != nil || !id.Has("db1", addr) {
			t.Errorf("probe with %d keys: %v, %v", len(keys), id, err)
		}
	}
	if _, err := Probe(ctx, addr, testCreds(t, mustKeyring(t, k3), "db2", "127.0.0.1:1"), "db1"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("probe with another key: %v, want ErrUnknownKey", err)
	}
	// A port that accepts and says nothing: Probe gives up at ctx's deadline.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := Probe(short, ln.Addr().String(), testCreds(t, mustKeyring(t, k1), "db2", "127.0.0.1:1"), "db1"); err == nil {
		t.Error("probe of a silent port succeeded")
	}
	waitFor(t, "two probe connections", func() bool { return len(acc) == 2 })
}

// testFSM records the entries applied.
type testFSM struct {
	mu      sync.Mutex
	applied []string
}

func (f *testFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, string(l.Data))
	return nil
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) { return testSnapshot{}, nil }
func (f *testFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

func (f *testFSM) has(entry string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.applied, entry)
}

type testSnapshot struct{}

func (testSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (testSnapshot) Release()                             {}

// logBuffer keeps the first MiB of raft's logs, shown if the test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < 1<<20 {
		b.buf.Write(p)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type raftNode struct {
	id    raft.ServerID
	raft  *raft.Raft
	trans *raft.NetworkTransport
	layer *StreamLayer
	fsm   *testFSM
}

func (n *raftNode) server() raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: n.id, Address: n.trans.LocalAddr()}
}

func startRaft(t *testing.T, id string, kr *Keyring, logs io.Writer) *raftNode {
	t.Helper()
	layer := listenLayerAs(t, kr, id, StreamOptions{HandshakeTimeout: 2 * time.Second})
	trans := raft.NewNetworkTransport(layer, 3, 2*time.Second, logs)
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(id)
	conf.HeartbeatTimeout = 500 * time.Millisecond
	conf.ElectionTimeout = 500 * time.Millisecond
	conf.LeaderLeaseTimeout = 250 * time.Millisecond
	conf.CommitTimeout = 10 * time.Millisecond
	conf.LogOutput, conf.LogLevel = logs, "INFO"
	store := raft.NewInmemStore()
	fsm := &testFSM{}
	r, err := raft.NewRaft(conf, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatalf("start raft %s: %v", id, err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() }) // closes trans and layer
	return &raftNode{id: raft.ServerID(id), raft: r, trans: trans, layer: layer, fsm: fsm}
}

// startCluster starts n voters sharing kr's keys and waits for a leader.
func startCluster(t *testing.T, keys []string, n int, logs io.Writer) ([]*raftNode, *raftNode) {
	t.Helper()
	nodes := make([]*raftNode, n)
	var cfg raft.Configuration
	for i := range nodes {
		nodes[i] = startRaft(t, fmt.Sprintf("n%d", i+1), mustKeyring(t, keys...), logs)
		cfg.Servers = append(cfg.Servers, nodes[i].server())
	}
	for _, node := range nodes {
		if err := node.raft.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatalf("bootstrap %s: %v", node.id, err)
		}
	}
	var leader *raftNode
	waitFor(t, "a leader", func() bool {
		for _, node := range nodes {
			if node.raft.State() == raft.Leader {
				leader = node
				return true
			}
		}
		return false
	})
	return nodes, leader
}

func applyEverywhere(t *testing.T, leader *raftNode, nodes []*raftNode, entry string) {
	t.Helper()
	if err := leader.raft.Apply([]byte(entry), 5*time.Second).Error(); err != nil {
		t.Fatalf("apply %q on leader %s: %v", entry, leader.id, err)
	}
	waitFor(t, entry+" on every node", func() bool {
		for _, node := range nodes {
			if !node.fsm.has(entry) {
				return false
			}
		}
		return true
	})
}

func TestRaftOverStreamLayer(t *testing.T) {
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("raft logs:\n%s", logs)
		}
	})
	nodes, leader := startCluster(t, []string{newKey(t)}, 3, logs)
	applyEverywhere(t, leader, nodes, "db1 term 1")
	term := leader.raft.CurrentTerm()
	members := []raft.Server{nodes[0].server(), nodes[1].server(), nodes[2].server()}

	// A raft node with another key campaigns with itself in the cluster.
	intruder := startRaft(t, "intruder", mustKeyring(t, newKey(t)), logs)
	bootstrap := raft.Configuration{Servers: append(slices.Clone(members), intruder.server())}
	if err := intruder.raft.BootstrapCluster(bootstrap).Error(); err != nil {
		t.Fatalf("bootstrap intruder: %v", err)
	}
	// Its transport, one that trusts any server and a plain TCP one send
	// AppendEntries with a far higher term and a configuration that adds it.
	forged := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte(intruder.trans.LocalAddr())},
		Term:      term + 100,
		Entries: []*raft.Log{{Index: 100, Term: term + 100, Type: raft.LogConfiguration,
			Data: raft.EncodeConfiguration(bootstrap)}},
		LeaderCommitIndex: 100,
	}
	for _, tr := range []raft.Transport{intruder.trans, trustingTransport(t, logs), plainTransport(t, logs)} {
		for _, m := range members {
			var resp raft.AppendEntriesResponse
			if err := tr.AppendEntries(m.ID, m.Address, forged, &resp); err == nil {
				t.Errorf("forged AppendEntries to %s succeeded: %+v", m.ID, resp)
			}
		}
	}
	for _, node := range nodes {
		waitRefused(t, node.layer, RefusedBadKey, 1) // the trusting transport
		// The plain transport, the intruder's transport and its campaign.
		waitFor(t, "refused handshakes", func() bool { return node.layer.Refused()[RefusedHandshake] >= 3 })
	}
	for _, node := range nodes {
		f := node.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatalf("configuration of %s: %v", node.id, err)
		}
		if got := f.Configuration().Servers; !slices.Equal(got, members) {
			t.Errorf("configuration of %s = %v, want %v", node.id, got, members)
		}
		if got := node.raft.CurrentTerm(); got != term {
			t.Errorf("term of %s = %d, want %d", node.id, got, term)
		}
		t.Logf("%s refused %v", node.id, node.layer.Refused())
	}
	if intruder.raft.State() == raft.Leader {
		t.Error("the intruder became leader")
	}
	applyEverywhere(t, leader, nodes, "db1 term 2")
	if intruder.fsm.has("db1 term 1") || intruder.fsm.has("db1 term 2") {
		t.Error("the intruder received the cluster's entries")
	}
}

// trustingLayer is a stream layer that presents another key's certificate
// and trusts any server: an attacker who lacks the keyring.
type trustingLayer struct {
	net.Listener
	conf *tls.Config
}

func (l trustingLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(addr), l.conf)
}

func trustingTransport(t *testing.T, logs io.Writer) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := mustKeyring(t, newKey(t))
	layer := trustingLayer{Listener: ln, conf: &tls.Config{
		InsecureSkipVerify: true,
		Certificates:       []tls.Certificate{*other.keys[0].cert},
		MinVersion:         tls.VersionTLS13,
	}}
	trans := raft.NewNetworkTransport(layer, 1, 2*time.Second, logs)
	t.Cleanup(func() { _ = trans.Close() })
	return trans
}

func plainTransport(t *testing.T, logs io.Writer) *raft.NetworkTransport {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, logs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trans.Close() })
	return trans
}

func TestStreamCallbackPanic(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	server := listenLayer(t, kr, StreamOptions{OnRefused: func(net.Addr, string, error) { panic("boom") }})
	acc := acceptAll(t, server)
	c := rawDial(t, server.Addr().String(), []byte("GET / HTTP/1.1\r\n\r\n"))
	defer func() { _ = c.Close() }()
	waitRefused(t, server, RefusedCallbackPanic, 1)
	waitRefused(t, server, RefusedHandshake, 1)
	exchange(t, listenLayer(t, kr, StreamOptions{}), server, acc)
}

// failingListener fails its first fails Accepts (too many open files),
// recording when each was called, then accepts from the real listener.
type failingListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
	calls []time.Time
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	fail := len(l.calls) <= l.fails
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

func (l *failingListener) accepts() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// TestStreamAcceptBackoff: failed Accepts are retried after waits that
// double from 5 ms (backoff.Accept), and the layer then accepts as before.
func TestStreamAcceptBackoff(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner, fails: 4}
	addr := inner.Addr().String()
	testVoters.Store(addr, "backoff")
	s := NewStreamLayer(ln, testCreds(t, kr, "backoff", addr), nil, StreamOptions{})
	s.SetExpect(testVoterAt)
	acc := acceptAll(t, s) // closes s at the end
	client := listenLayer(t, kr, StreamOptions{})
	exchange(t, client, s, acc)
	calls := ln.accepts()
	if len(calls) < 5 {
		t.Fatalf("%d Accept calls, want the 4 failures and more", len(calls))
	}
	// The waits before retries 1..4 are 5, 10, 20, 40 ms (timers never fire early).
	for i, want := range []time.Duration{5, 10, 20, 40} {
		if got := calls[i+1].Sub(calls[i]); got < want*time.Millisecond {
			t.Errorf("wait before retry %d: %v, want at least %v", i+1, got, want*time.Millisecond)
		}
	}
}
