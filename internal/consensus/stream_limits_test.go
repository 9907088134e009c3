package consensus

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// Connections from other loopback addresses (127.0.0.x) stand for other
// hosts: the per-IP limit and the reserved slots go by source IP.

// dialerFrom is a dialer whose connections come from the loopback IP ip.
func dialerFrom(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
}

// idleFrom opens a TCP connection to addr from ip and sends nothing.
func idleFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	c, err := dialerFrom(ip).Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// voterFrom completes a handshake with addr from ip as a voter holding kr
// would; the connection is closed at the end of the test.
func voterFrom(t *testing.T, ip, addr string, kr *Keyring) (*tls.Conn, error) {
	t.Helper()
	c, err := dialerFrom(ip).Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	node, _ := testVoterAt(addr)
	tc := tls.Client(c, clientConfig(testCreds(t, kr, "voter-"+ip, ip+":1"), node, addr, nil))
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return nil, err
	}
	return tc, nil
}

// held reports whether c is still open (a read times out) rather than
// closed by the server.
func held(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	_ = c.SetReadDeadline(time.Time{})
	return isTimeout(err)
}

// acceptedFrom checks that the next accepted connection comes from ip.
func acceptedFrom(t *testing.T, acc <-chan net.Conn, ip string) {
	t.Helper()
	c := nextConn(t, acc)
	defer func() { _ = c.Close() }()
	if got := sourceIP(c.RemoteAddr()); got != netip.MustParseAddr(ip) {
		t.Fatalf("accepted a connection from %s, want %s", got, ip)
	}
}

func TestStreamPerIPLimit(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	server := listenLayer(t, kr, StreamOptions{HandshakeTimeout: 5 * time.Second, HelloTimeout: 5 * time.Second, MaxPending: 16, MaxPendingPerIP: 3})
	acc := acceptAll(t, server)
	addr := server.Addr().String()
	idle := make([]net.Conn, 5)
	for i := range idle {
		idle[i] = idleFrom(t, "127.0.0.2", addr)
	}
	waitRefused(t, server, RefusedPerIP, 2)
	for i, c := range idle {
		if got := held(t, c); got != (i < 3) {
			t.Errorf("idle conn %d from 127.0.0.2: held %v, want %v (3 per IP)", i, got, i < 3)
		}
	}
	// Another address has every other slot; 127.0.0.2 none, a voter too.
	if _, err := voterFrom(t, "127.0.0.3", addr, kr); err != nil {
		t.Fatalf("voter from 127.0.0.3: %v", err)
	}
	acceptedFrom(t, acc, "127.0.0.3")
	if _, err := voterFrom(t, "127.0.0.2", addr, kr); err == nil {
		t.Fatal("a fourth handshake from 127.0.0.2 completed, want it refused")
	}
	waitRefused(t, server, RefusedPerIP, 3)
	// A slot comes back when its handshake ends.
	_ = idle[0].Close()
	waitRefused(t, server, RefusedHandshake, 1)
	if _, err := voterFrom(t, "127.0.0.2", addr, kr); err != nil {
		t.Fatalf("voter from 127.0.0.2 after a slot was freed: %v", err)
	}
	acceptedFrom(t, acc, "127.0.0.2")
	if got := server.Refused(); got[RefusedPerIP] != 3 || got[RefusedHandshake] != 1 || len(got) != 2 {
		t.Errorf("Refused() = %v, want per-ip 3, handshake 1", got)
	}
}

func TestStreamReservedSlots(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	var asked atomic.Int64
	voters := func(ip netip.Addr) bool {
		asked.Add(1)
		return ip == netip.MustParseAddr("127.0.0.5") || ip == netip.MustParseAddr("127.0.0.6")
	}
	server := listenLayer(t, kr, StreamOptions{HandshakeTimeout: 5 * time.Second, HelloTimeout: 5 * time.Second,
		MaxPending: 2, Reserved: 2, Trusted: voters})
	acc := acceptAll(t, server)
	addr := server.Addr().String()

	// A stranger takes the general slots; Trusted is not asked meanwhile.
	idleFrom(t, "127.0.0.2", addr)
	idleFrom(t, "127.0.0.2", addr)
	waitFor(t, "2 general slots taken", func() bool { g, _ := pending(server); return g == 2 })
	if n := asked.Load(); n != 0 {
		t.Errorf("Trusted asked %d times with general slots free, want 0", n)
	}
	third := idleFrom(t, "127.0.0.3", addr)
	waitRefused(t, server, RefusedOverload, 1)
	if held(t, third) {
		t.Error("a stranger's connection beyond the general slots was held, want closed")
	}
	// A key holder at an address no voter has gets none of the reserved.
	if _, err := voterFrom(t, "127.0.0.4", addr, kr); err == nil {
		t.Fatal("a handshake from an untrusted address completed with the general slots full")
	}
	waitRefused(t, server, RefusedOverload, 2)
	// A voter's address does.
	if _, err := voterFrom(t, "127.0.0.5", addr, kr); err != nil {
		t.Fatalf("voter from 127.0.0.5 with the general slots full: %v", err)
	}
	acceptedFrom(t, acc, "127.0.0.5")
	// Its slot is released just after Accept took it: wait, or it would be
	// counted as one of the two taken below.
	waitFor(t, "the voter's reserved slot released", func() bool { _, r := pending(server); return r == 0 })

	// The reserved slots are bounded too.
	r1 := idleFrom(t, "127.0.0.5", addr)
	idleFrom(t, "127.0.0.5", addr)
	waitFor(t, "2 reserved slots taken", func() bool { _, r := pending(server); return r == 2 })
	if _, err := voterFrom(t, "127.0.0.6", addr, kr); err == nil {
		t.Fatal("a handshake completed with every slot taken")
	}
	waitRefused(t, server, RefusedOverload, 3)
	_ = r1.Close()
	waitRefused(t, server, RefusedHandshake, 1)
	if _, err := voterFrom(t, "127.0.0.6", addr, kr); err != nil {
		t.Fatalf("voter from 127.0.0.6 after a reserved slot was freed: %v", err)
	}
	acceptedFrom(t, acc, "127.0.0.6")

	// SetTrusted replaces the callback; nil trusts nobody; a panic is
	// recovered, counted, and trusts nobody.
	server.SetTrusted(nil)
	if _, err := voterFrom(t, "127.0.0.5", addr, kr); err == nil {
		t.Fatal("a handshake from 127.0.0.5 completed after SetTrusted(nil)")
	}
	waitRefused(t, server, RefusedOverload, 4)
	server.SetTrusted(func(netip.Addr) bool { panic("boom") })
	if _, err := voterFrom(t, "127.0.0.5", addr, kr); err == nil {
		t.Fatal("a handshake completed with a panicking Trusted")
	}
	waitRefused(t, server, RefusedOverload, 5)
	server.SetTrusted(voters)
	if _, err := voterFrom(t, "127.0.0.5", addr, kr); err != nil {
		t.Fatalf("voter from 127.0.0.5 after SetTrusted: %v", err)
	}
	acceptedFrom(t, acc, "127.0.0.5")
	want := map[string]uint64{RefusedOverload: 5, RefusedHandshake: 1, RefusedCallbackPanic: 1}
	if got := server.Refused(); len(got) != len(want) || got[RefusedOverload] != 5 || got[RefusedHandshake] != 1 || got[RefusedCallbackPanic] != 1 {
		t.Errorf("Refused() = %v, want %v", got, want)
	}
}

// pending is the number of general and reserved slots taken.
func pending(s *StreamLayer) (general, reserved int) {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	return s.general, s.reserved
}

// The ClientHello must arrive within HelloTimeout; the whole handshake
// then has until HandshakeTimeout.
func TestStreamHelloDeadline(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	server := listenLayer(t, kr, StreamOptions{HelloTimeout: 200 * time.Millisecond, HandshakeTimeout: 700 * time.Millisecond})
	acc := acceptAll(t, server)
	addr := server.Addr().String()

	start := time.Now()
	silent := idleFrom(t, "127.0.0.2", addr)
	waitRefused(t, server, RefusedTimeout, 1)
	if d := time.Since(start); d < 150*time.Millisecond || d > 600*time.Millisecond {
		t.Errorf("a silent connection was refused after %v, want about the 200ms HelloTimeout", d)
	}
	if held(t, silent) {
		t.Error("a silent connection is still open after its refusal")
	}

	// A client that sends its ClientHello and then stalls (before its
	// certificate) is refused at HandshakeTimeout, not HelloTimeout.
	release := make(chan struct{})
	defer close(release)
	node, _ := testVoterAt(addr)
	conf := clientConfig(testCreds(t, kr, "staller", "127.0.0.3:1"), node, addr, nil)
	getCert := conf.GetClientCertificate
	conf.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		<-release
		return getCert(cri)
	}
	c, err := dialerFrom("127.0.0.3").Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	start = time.Now()
	go func() { _ = tls.Client(c, conf).Handshake() }()
	waitRefused(t, server, RefusedTimeout, 2)
	if d := time.Since(start); d < 400*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("a handshake stalled after its ClientHello was refused after %v, want about the 700ms HandshakeTimeout", d)
	}
	noConn(t, acc)
	exchange(t, listenLayer(t, kr, StreamOptions{}), server, acc)
}
