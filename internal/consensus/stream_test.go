package consensus

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// listenLayer serves a stream layer on a fresh 127.0.0.1 port, closed at
// the end of the test.
func listenLayer(t *testing.T, kr *Keyring, opts StreamOptions) *StreamLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewStreamLayer(ln, kr, nil, opts)
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
	s := NewStreamLayer(ln, kr, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7373}, StreamOptions{})
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
	server := listenLayer(t, mustKeyring(t, k1), StreamOptions{})
	acc := acceptAll(t, server)
	addr := server.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, keys := range [][]string{{k1}, {k2, k1}} {
		if err := Probe(ctx, addr, mustKeyring(t, keys...)); err != nil {
			t.Errorf("probe with %d keys: %v", len(keys), err)
		}
	}
	if err := Probe(ctx, addr, mustKeyring(t, k3)); !errors.Is(err, ErrUnknownKey) {
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
	if err := Probe(short, ln.Addr().String(), mustKeyring(t, k1)); err == nil {
		t.Error("probe of a silent port succeeded")
	}
	waitFor(t, "two probe connections", func() bool { return len(acc) == 2 })
}
