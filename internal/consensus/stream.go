package consensus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shoaldb/shoal/internal/backoff"
)

// Reasons a StreamLayer refuses an incoming connection, the keys of Refused.
const (
	// RefusedHandshake: the TLS handshake failed (not TLS, not TLS 1.3, no
	// client certificate, or the peer refused our certificate).
	RefusedHandshake = "handshake"
	// RefusedBadKey: the peer's certificate is not signed by a key of the
	// keyring.
	RefusedBadKey = "bad-key"
	// RefusedNoIdentity: the peer's certificate is signed by a key of the
	// keyring but names no voter (a shoal from before voter identities).
	RefusedNoIdentity = "no-identity"
	// RefusedTimeout: the ClientHello did not arrive within HelloTimeout,
	// or the handshake did not finish within HandshakeTimeout.
	RefusedTimeout = "timeout"
	// RefusedPerIP: MaxPendingPerIP handshakes from the same source IP were
	// already in flight; the connection was closed at once.
	RefusedPerIP = "per-ip"
	// RefusedOverload: MaxPending handshakes were already in flight (and,
	// for a trusted source, the Reserved ones too); the connection was
	// closed at once.
	RefusedOverload = "overload"
	// RefusedCallbackPanic counts panics of OnRefused and Trusted, which
	// are recovered (a panicking Trusted counts as "not trusted").
	RefusedCallbackPanic = "callback-panic"
)

// Defaults of StreamOptions. Raft's heartbeat and election timeouts are
// 1 s by default and a TLS 1.3 handshake on a LAN takes milliseconds: the
// deadlines are short so that a stranger's idle connections give their
// slots back long before a voter's RequestVote would time out, and
// generous for a real peer. A pending handshake costs about 8 KiB while
// its peer is silent (a goroutine's stack, the socket, tls.Conn) and about
// 24 KiB while a 16 KiB ClientHello record is half sent (measured with 500
// connections), so MaxPending+Reserved bound it to about 4 MiB.
const (
	DefaultHelloTimeout     = time.Second
	DefaultHandshakeTimeout = 2 * time.Second
	DefaultMaxPending       = 128
	DefaultMaxPendingPerIP  = 8
	DefaultReserved         = 32
)

// ErrUnknownKey is wrapped by handshake errors when the peer's certificate
// is not signed by a key of the keyring.
var ErrUnknownKey = errors.New("peer certificate is not signed by a consensus keyring key")

// ErrNotAVoter is wrapped by Dial's error for an address that no server of
// the raft configuration has: raft dials only its voters, each of which
// must prove who it is.
var ErrNotAVoter = errors.New("no voter at this address in the raft configuration")

// StreamOptions tunes a StreamLayer. Zero values take the defaults.
type StreamOptions struct {
	// HelloTimeout bounds the wait for an incoming connection's TLS
	// ClientHello; once it arrived, the rest of the handshake has
	// HandshakeTimeout-HelloTimeout. Default 1 s, at most HandshakeTimeout.
	HelloTimeout time.Duration
	// HandshakeTimeout bounds each incoming TLS handshake, ClientHello
	// included (and an outgoing one when raft dials without a timeout).
	// Default 2 s.
	HandshakeTimeout time.Duration
	// MaxPending bounds the incoming handshakes in flight (including those
	// done and waiting for Accept) that any source may take; beyond it new
	// connections are closed at once and counted as RefusedOverload, but
	// for those from a Trusted address, which may take a Reserved slot.
	// Default 128.
	MaxPending int
	// MaxPendingPerIP bounds the incoming handshakes in flight from one
	// source IP, trusted or not (a voter needs a few at most: raft pools
	// its connections and a handshake takes milliseconds); beyond it new
	// connections from that IP are closed at once and counted as
	// RefusedPerIP. Default 8.
	MaxPendingPerIP int
	// Reserved is the number of handshakes in flight, beyond MaxPending,
	// kept for connections from Trusted addresses. Default 32.
	Reserved int
	// Trusted, if set, tells whether a source IP is a known voter's (the
	// addresses of the raft configuration and of the voters the gossip
	// shows): only those take Reserved slots. It is asked from the
	// accept loop, only while the MaxPending slots are all taken: it must
	// be fast and must not block. SetTrusted replaces it.
	Trusted func(ip netip.Addr) bool
	// OnRefused, if set, is called for every refused incoming connection,
	// from the layer's goroutines: it must not block.
	OnRefused func(remote net.Addr, reason string, err error)
}

// StreamLayer is hashicorp/raft's StreamLayer over mutual TLS 1.3 between
// voters that each prove an identity (identity.go): each side accepts only
// a peer whose certificate is signed by a key of its keyring and names a
// voter, and the side that dials also checks that the voter named is the
// one the raft configuration has at the address dialed (SetExpect). The
// server presents its certificate of its primary key, or during a rotation
// of the first of its keys that the client announces holding (ALPN names
// carry fingerprints of public keys, nothing secret); the client presents
// back its certificate of the key that signed the server's. So two voters
// whose keyrings share a key connect, whatever their primaries. Accept
// returns only connections whose handshake completed; each incoming
// handshake runs in its own goroutine under HelloTimeout and
// HandshakeTimeout, at most MaxPending at a time (plus Reserved ones for
// Trusted sources), at most MaxPendingPerIP from one IP.
type StreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	opts      StreamOptions
	creds     *Credentials
	server    *tls.Config
	// expect names the voter the raft configuration has at an address
	// (SetExpect); nil: Dial refuses every address.
	expect  atomic.Pointer[func(addr string) (node string, ok bool)]
	trusted atomic.Pointer[func(netip.Addr) bool]

	accepted chan net.Conn
	closed   chan struct{}
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	loopDone chan struct{}
	loopErr  error // set before loopDone is closed

	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup

	mu      sync.Mutex
	refused map[string]uint64

	slotMu   sync.Mutex
	general  int                // handshakes in flight in MaxPending slots
	reserved int                // in Reserved slots
	perIP    map[netip.Addr]int // in flight by source IP (no zero entries)
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer serves raft's stream layer on ln, which it owns from now on,
// with the voter identity of creds (which must not be nil). advertise is the
// address peers reach it at; nil means ln's address.
func NewStreamLayer(ln net.Listener, creds *Credentials, advertise net.Addr, opts StreamOptions) *StreamLayer {
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = DefaultHelloTimeout
	}
	opts.HelloTimeout = min(opts.HelloTimeout, opts.HandshakeTimeout)
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxPendingPerIP <= 0 {
		opts.MaxPendingPerIP = DefaultMaxPendingPerIP
	}
	if opts.Reserved <= 0 {
		opts.Reserved = DefaultReserved
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &StreamLayer{
		ln:        ln,
		advertise: advertise,
		opts:      opts,
		creds:     creds,
		server:    serverConfig(creds, opts.HandshakeTimeout-opts.HelloTimeout),
		accepted:  make(chan net.Conn),
		closed:    make(chan struct{}),
		ctx:       ctx,
		cancel:    cancel,
		loopDone:  make(chan struct{}),
		refused:   make(map[string]uint64),
		perIP:     make(map[netip.Addr]int),
	}
	if opts.Trusted != nil {
		s.SetTrusted(opts.Trusted)
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// serverConfig presents the voter's certificate of the first key of the
// keyring (primary first) that the client announces holding in its ALPN
// names, or else of the primary (without ALPN, so that such a client learns
// the server's key fingerprint from its own refusal), and accepts a client
// certificate of any voter signed by any key of the keyring. Once the
// ClientHello is in, the handshake has rest more (when rest is positive).
func serverConfig(creds *Credentials, rest time.Duration) *tls.Config {
	kr := creds.kr
	base := &tls.Config{
		ClientAuth:             tls.RequireAnyClientCert,
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, _, err := peerIdentity(kr, cs)
			return err
		},
	}
	fallback := base.Clone()
	fallback.Certificates = []tls.Certificate{*creds.certs[0]}
	byKey := make([]*tls.Config, len(kr.keys))
	for i, dk := range kr.keys {
		byKey[i] = base.Clone()
		byKey[i].Certificates = []tls.Certificate{*creds.certs[i]}
		byKey[i].NextProtos = []string{dk.proto}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if rest > 0 && hello.Conn != nil {
				if err := hello.Conn.SetDeadline(time.Now().Add(rest)); err != nil {
					return nil, fmt.Errorf("set handshake deadline: %w", err)
				}
			}
			if i := kr.offeredIndex(hello.SupportedProtos); i >= 0 {
				return byKey[i], nil
			}
			return fallback, nil
		},
	}
}

// clientConfig is the configuration of one outgoing connection to the
// voter node expected at addr: it announces every key of the keyring in its
// ALPN names, accepts a server certificate signed by any of them only when
// it names node at addr, and presents back its own certificate of the key
// that signed the server's. proven receives the identity the server proved.
func clientConfig(creds *Credentials, node, addr string, proven *Identity) *tls.Config {
	kr := creds.kr
	matched := 0 // set by VerifyConnection before GetClientCertificate runs
	return &tls.Config{
		ServerName: certName,
		// The server's certificate is checked against the keyring and the
		// expected identity by VerifyConnection instead of against a CA.
		InsecureSkipVerify: true,
		NextProtos:         kr.protos(),
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		VerifyConnection: func(cs tls.ConnectionState) error {
			i, id, err := peerIdentity(kr, cs)
			if err != nil {
				return err
			}
			if proven != nil {
				*proven = id
			}
			if err := expectIdentity(id, node, addr); err != nil {
				return err
			}
			matched = i
			return nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return creds.certs[matched], nil
		},
	}
}

// acceptLoop accepts TCP connections and starts a handshake for each that
// gets a slot (acquire), or closes it at once.
func (s *StreamLayer) acceptLoop() {
	defer s.wg.Done()
	defer close(s.loopDone)
	retry := backoff.New(backoff.Accept, nil) // accept errors: too many open files
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() {
				s.loopErr = net.ErrClosed
				return
			}
			if errors.Is(err, net.ErrClosed) {
				s.loopErr = fmt.Errorf("consensus listener %s: %w", s.ln.Addr(), err)
				return
			}
			if _, ok := retry.Wait(s.ctx); !ok { // Close cancels s.ctx
				s.loopErr = net.ErrClosed
				return
			}
			continue
		}
		retry.Reset()
		ip := sourceIP(c.RemoteAddr())
		sl, reason := s.acquire(ip)
		if reason != "" {
			_ = c.Close()
			s.refuse(c.RemoteAddr(), reason, s.refusal(reason, ip))
			continue
		}
		s.wg.Add(1)
		go s.serve(c, ip, sl)
	}
}

// slot is the kind of slot a handshake in flight holds.
type slot int

const (
	generalSlot slot = iota
	reservedSlot
)

// acquire takes a slot for a handshake from ip, or returns the reason it
// is refused: RefusedPerIP when ip has MaxPendingPerIP in flight, else a
// general slot if one is free, else a reserved one if ip is trusted and
// one is free, else RefusedOverload. Trusted is asked outside the lock,
// and only when the general slots are all taken.
func (s *StreamLayer) acquire(ip netip.Addr) (slot, string) {
	s.slotMu.Lock()
	if s.perIP[ip] >= s.opts.MaxPendingPerIP {
		s.slotMu.Unlock()
		return 0, RefusedPerIP
	}
	if s.general < s.opts.MaxPending {
		s.general++
		s.perIP[ip]++
		s.slotMu.Unlock()
		return generalSlot, ""
	}
	s.slotMu.Unlock()
	if !s.isTrusted(ip) {
		return 0, RefusedOverload
	}
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	switch {
	case s.perIP[ip] >= s.opts.MaxPendingPerIP:
		return 0, RefusedPerIP
	case s.general < s.opts.MaxPending: // one was freed meanwhile
		s.general++
		s.perIP[ip]++
		return generalSlot, ""
	case s.reserved < s.opts.Reserved:
		s.reserved++
		s.perIP[ip]++
		return reservedSlot, ""
	}
	return 0, RefusedOverload
}

// release gives back a slot acquire returned.
func (s *StreamLayer) release(ip netip.Addr, sl slot) {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	if sl == reservedSlot {
		s.reserved--
	} else {
		s.general--
	}
	if s.perIP[ip] <= 1 {
		delete(s.perIP, ip)
	} else {
		s.perIP[ip]--
	}
}

// refusal is the error a refusal by acquire reports.
func (s *StreamLayer) refusal(reason string, ip netip.Addr) error {
	if reason == RefusedPerIP {
		return fmt.Errorf("%d consensus handshakes in flight from %s", s.opts.MaxPendingPerIP, ip)
	}
	return fmt.Errorf("%d consensus handshakes in flight (%d more kept for voters' addresses)", s.opts.MaxPending, s.opts.Reserved)
}

// sourceIP is the IP of a remote address (IPv4-mapped IPv6 unmapped); the
// zero Addr if it has none.
func sourceIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// SetTrusted sets (nil: clears) the function that tells whether a source
// IP may take a Reserved slot; see StreamOptions.Trusted. Safe to call at
// any time, from any goroutine.
func (s *StreamLayer) SetTrusted(f func(ip netip.Addr) bool) {
	if f == nil {
		s.trusted.Store(nil)
		return
	}
	s.trusted.Store(&f)
}

// isTrusted asks Trusted about ip; a panic is recovered, counted, and
// means no.
func (s *StreamLayer) isTrusted(ip netip.Addr) (ok bool) {
	f := s.trusted.Load()
	if f == nil || !ip.IsValid() {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			s.count(RefusedCallbackPanic)
			ok = false
		}
	}()
	return (*f)(ip)
}

// serve runs the handshake of one incoming connection and hands it to
// Accept. It holds its slot until the connection is handed over or refused.
func (s *StreamLayer) serve(c net.Conn, ip netip.Addr, sl slot) {
	defer s.wg.Done()
	tc, err := s.handshake(c)
	if err != nil {
		_ = c.Close()
		s.release(ip, sl)
		if !s.isClosed() {
			s.refuse(c.RemoteAddr(), refusalReason(err), err)
		}
		return
	}
	defer s.release(ip, sl)
	select {
	case s.accepted <- tc:
	case <-s.closed:
		_ = tc.Close()
	}
}

// handshake runs the server side of the TLS handshake: HelloTimeout for
// the ClientHello, then the rest of HandshakeTimeout (serverConfig moves
// the deadline when the ClientHello is in).
func (s *StreamLayer) handshake(c net.Conn) (*tls.Conn, error) {
	if err := c.SetDeadline(time.Now().Add(s.opts.HelloTimeout)); err != nil {
		return nil, fmt.Errorf("set handshake deadline for %s: %w", c.RemoteAddr(), err)
	}
	tc := tls.Server(c, s.server)
	if err := tc.HandshakeContext(s.ctx); err != nil {
		return nil, fmt.Errorf("consensus tls handshake from %s: %w", c.RemoteAddr(), err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear handshake deadline for %s: %w", c.RemoteAddr(), err)
	}
	return tc, nil
}

func refusalReason(err error) string {
	switch {
	case errors.Is(err, ErrUnknownKey):
		return RefusedBadKey
	case errors.Is(err, ErrNoIdentity):
		return RefusedNoIdentity
	case errors.Is(err, os.ErrDeadlineExceeded):
		return RefusedTimeout
	default:
		return RefusedHandshake
	}
}

// refuse counts a refusal and reports it to OnRefused, recovering a panic.
func (s *StreamLayer) refuse(remote net.Addr, reason string, err error) {
	s.count(reason)
	if s.opts.OnRefused == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.count(RefusedCallbackPanic)
		}
	}()
	s.opts.OnRefused(remote, reason, err)
}

func (s *StreamLayer) count(reason string) {
	s.mu.Lock()
	s.refused[reason]++
	s.mu.Unlock()
}

// Refused returns a copy of the refused incoming connections, by reason
// (the Refused* constants).
func (s *StreamLayer) Refused() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.refused))
	for k, v := range s.refused {
		out[k] = v
	}
	return out
}

func (s *StreamLayer) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Accept returns the next incoming connection whose handshake completed. After
// Close it returns an error wrapping net.ErrClosed.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.closed:
		return nil, fmt.Errorf("accept consensus stream: %w", net.ErrClosed)
	case <-s.loopDone:
		return nil, fmt.Errorf("accept consensus stream: %w", s.loopErr)
	}
}

// Close stops accepting, closes the listener, interrupts the handshakes in
// flight and waits for the layer's goroutines. Connections already returned
// by Accept or Dial are the caller's. Close is idempotent.
func (s *StreamLayer) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = fmt.Errorf("close consensus listener: %w", err)
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// Addr is the advertised address, or the listener's.
func (s *StreamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}

// SetExpect sets how Dial learns which voter it must find at an address:
// the raft configuration's server there. Until it is set Dial refuses
// every address.
func (s *StreamLayer) SetExpect(f func(addr string) (node string, ok bool)) {
	s.expect.Store(&f)
}

// Dial connects to the voter the raft configuration has at address and
// completes the TLS handshake, both within timeout (HandshakeTimeout if
// timeout is not positive). The peer must prove that voter's identity at
// that address.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("dial consensus peer %s: %w", address, net.ErrClosed)
	}
	var node string
	ok := false
	if f := s.expect.Load(); f != nil {
		node, ok = (*f)(string(address))
	}
	if !ok {
		return nil, fmt.Errorf("dial consensus peer %s: %w", address, ErrNotAVoter)
	}
	if timeout <= 0 {
		timeout = s.opts.HandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	return dialTLS(ctx, string(address), clientConfig(s.creds, node, string(address), nil))
}

// dialTLS dials addr and completes the TLS handshake within ctx.
func dialTLS(ctx context.Context, addr string, conf *tls.Config) (*tls.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial consensus peer %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(dl); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("set handshake deadline for %s: %w", addr, err)
		}
	}
	tc := tls.Client(c, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("consensus tls handshake with %s: %w", addr, err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("clear handshake deadline for %s: %w", addr, err)
	}
	return tc, nil
}

// Probe dials addr, completes the TLS handshake and closes: it proves that
// the voter node answers at addr (its certificate, signed by a key of the
// keyring, names node and addr, and TLS 1.3 proved it holds the
// certificate's private key). The peer accepts us too, since we present a
// certificate of the key that signed its own. It returns the identity the
// peer proved, also when that is not node's (the error then wraps
// ErrWrongIdentity). Without a deadline in ctx, Probe takes at most
// DefaultHandshakeTimeout.
func Probe(ctx context.Context, addr string, creds *Credentials, node string) (Identity, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultHandshakeTimeout)
		defer cancel()
	}
	var proven Identity
	tc, err := dialTLS(ctx, addr, clientConfig(creds, node, addr, &proven))
	if err != nil {
		return proven, fmt.Errorf("probe: %w", err)
	}
	_ = tc.Close() // the proof is done; a failed close_notify changes nothing
	return proven, nil
}
