package gossip

import (
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"

	"github.com/shoaldb/shoal/internal/backoff"
)

// transport is memberlist's network transport (TCP for streams, UDP for
// packets on the same port), behaving like memberlist.NetTransport with one
// difference: NetTransport allocates a fresh 64 KiB buffer for every UDP
// packet it reads, and with fast probe timers that allocation and the
// garbage collection it causes were a third of an idle agent's CPU
// (profiled: 15 agents, profile fast). Here one buffer per listener is
// reused and each packet is copied out at its own size, so memberlist may
// keep the bytes it is handed.
type Transport struct {
	bindIP  net.IP
	port    int
	logger  *log.Logger
	tcp     *net.TCPListener
	udp     *net.UDPConn
	packets chan *memberlist.Packet
	streams chan net.Conn
	closed  atomic.Bool
	stop    sync.Once
	done    chan struct{} // closed by Shutdown: the loops stop handing over
	wg      sync.WaitGroup

	// Watches for the next packet from an address (see Watch). nwatch lets
	// the read loop skip the lock when nobody watches, which is almost
	// always.
	watchMu sync.Mutex
	watches map[netip.AddrPort][]chan struct{}
	nwatch  atomic.Int32

	// When the last UDP packet from each address arrived (see
	// HeardSince); at most maxHeard addresses, forgotten all at once when
	// full (only forged source addresses fill it).
	heardMu sync.Mutex
	last    map[netip.AddrPort]time.Time

	// keys, when gossip is encrypted, admits to last and the watches only
	// packets sealed with a key of the keyring. Used by readLoop only.
	keys *keyCheck

	// Own pings awaiting their ack (see expectAck, ownping.go): by the
	// address pinged, by sequence number. nacks lets the read loop skip
	// the lock when none is outstanding, which is almost always. opener
	// reads the packets from those addresses as memberlist would (label,
	// decryption); used by readLoop only. OwnAcks counts the acks that
	// answered an own ping.
	ackMu   sync.Mutex
	acks    map[netip.AddrPort]map[uint32]chan<- struct{}
	nacks   atomic.Int32
	opener  *keyCheck
	OwnAcks atomic.Uint64
	ownSeq  atomic.Uint32 // the last own sequence number given (random start)

	// limits bounds the inbound streams (see streamlimit.go); rejected
	// counts the ones it refused or cut off.
	limits   *streamLimiter
	rejected streamsRejected

	// members tells the accept loop whose addresses are members' (see
	// SetMembers): others get the strangers' stream limits.
	members memberAddrs

	// positions takes the position stream's packets (positions.go), which
	// memberlist never sees; nil: they are dropped.
	positions atomic.Pointer[Positions]
}

const maxHeard = 8192

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

const (
	udpReadBufSize = 65536           // the largest UDP payload
	udpRecvBufSize = 2 * 1024 * 1024 // socket receive buffer we ask for (halved until granted)
)

// NewTransport binds the transport for memberlist's configuration: its bind
// address (all interfaces when empty) and port, and its keyring (see
// newKeyCheck). Set it as mc.Transport; memberlist shuts it down with
// itself, and Shutdown may be called again.
func NewTransport(mc *memberlist.Config, logger *log.Logger) (*Transport, error) {
	bindIP := mc.BindAddr
	if bindIP == "" {
		bindIP = "0.0.0.0"
	}
	t, err := newTransport(bindIP, mc.BindPort, logger, newKeyCheck(mc))
	if err != nil {
		return nil, err
	}
	t.opener = newPacketOpener(mc)
	return t, nil
}

// newTransport binds TCP and UDP on bindAddr:port (port 0: any, the same for
// both). keys (nil: gossip is not encrypted) decides which packets count as
// heard from their source address (see HeardSince).
func newTransport(bindAddr string, port int, logger *log.Logger, keys *keyCheck) (*Transport, error) {
	return newTransportLimits(bindAddr, port, logger, keys, defaultStreamLimits)
}

// newTransportLimits is newTransport with lim as the inbound stream limits.
func newTransportLimits(bindAddr string, port int, logger *log.Logger, keys *keyCheck, lim streamLimits) (*Transport, error) {
	ip := net.ParseIP(bindAddr)
	if ip == nil {
		return nil, fmt.Errorf("bind address %q is not an IP address", bindAddr)
	}
	t := &Transport{bindIP: ip, logger: logger, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), done: make(chan struct{}),
		last: map[netip.AddrPort]time.Time{}, keys: keys, opener: &keyCheck{}, members: memberAddrs{now: time.Now}}
	t.ownSeq.Store(rand.Uint32())
	t.limits = newStreamLimiter(lim, t.reject)
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, fmt.Errorf("failed to start TCP listener on %q port %d: %w", bindAddr, port, err)
	}
	if port == 0 {
		port = tcp.Addr().(*net.TCPAddr).Port
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		tcp.Close()
		return nil, fmt.Errorf("failed to start UDP listener on %q port %d: %w", bindAddr, port, err)
	}
	for size := udpRecvBufSize; size > 0; size /= 2 {
		if udp.SetReadBuffer(size) == nil {
			break
		}
	}
	t.tcp, t.udp, t.port = tcp, udp, port
	t.wg.Add(2)
	go t.acceptLoop()
	go t.readLoop()
	return t, nil
}

// FinalAdvertiseAddr is NetTransport's: the given address, else a private
// address when bound to all interfaces, else the bound address.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		addr := net.ParseIP(ip)
		if addr == nil {
			return nil, 0, fmt.Errorf("failed to parse advertise address %q", ip)
		}
		if ip4 := addr.To4(); ip4 != nil {
			addr = ip4
		}
		if port == 0 {
			port = t.port
		}
		return addr, port, nil
	}
	if t.bindIP.IsUnspecified() {
		priv, err := sockaddr.GetPrivateIP()
		if err != nil {
			return nil, 0, fmt.Errorf("failed to get interface addresses: %w", err)
		}
		if priv == "" {
			return nil, 0, fmt.Errorf("no private IP address found, and explicit IP not provided")
		}
		addr := net.ParseIP(priv)
		if addr == nil {
			return nil, 0, fmt.Errorf("failed to parse advertise address: %q", priv)
		}
		return addr, t.port, nil
	}
	return t.tcp.Addr().(*net.TCPAddr).IP, t.port, nil
}

func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	addr, err := net.ResolveUDPAddr("udp", a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = writeToUDP(t.udp, b, addr) // rawudp_linux.go: why not t.udp.WriteTo
	return time.Now(), err
}

func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", a.Addr)
}

func (t *Transport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown closes the listeners and waits for their loops. It is
// idempotent: memberlist calls it, and so does an agent whose start failed
// before memberlist existed.
func (t *Transport) Shutdown() error {
	t.stop.Do(func() {
		t.closed.Store(true)
		close(t.done)
		t.tcp.Close()
		t.udp.Close()
	})
	t.wg.Wait()
	return nil
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	retry := backoff.New(backoff.Accept, nil) // accept errors: too many open files
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.closed.Load() {
				return
			}
			t.logger.Printf("[ERR] memberlist: Error accepting TCP connection: %v", err)
			select {
			case <-time.After(retry.Next()):
			case <-t.done:
				return
			}
			continue
		}
		retry.Reset()
		c := t.limits.admit(conn, t.members.member(remoteIP(conn)))
		if c == nil {
			continue
		}
		select {
		case t.streams <- c:
		case <-t.done:
			c.Close()
			return
		}
	}
}

// reject counts and logs an inbound stream the limits refused or cut off.
// The log line is memberlist's kind, with the address, so that the
// throttle of serf's log (LogThrottle) bounds a flood of them.
func (t *Transport) reject(reason string, remote net.Addr) {
	t.rejected.add(reason)
	t.logger.Printf("[WARN] memberlist: inbound stream rejected (%s) %s", reason, memberlist.LogAddress(remote))
}

func (t *Transport) readLoop() {
	defer t.wg.Done()
	buf := make([]byte, udpReadBufSize)
	for {
		n, ua, err := readFromUDP(t.udp, buf) // rawudp_linux.go: why not t.udp.ReadFrom
		ts := time.Now()
		if err != nil {
			if t.closed.Load() {
				return
			}
			t.logger.Printf("[ERR] memberlist: Error reading UDP packet: %v", err)
			continue
		}
		if n < 1 {
			t.logger.Printf("[ERR] memberlist: UDP packet too short (%d bytes) %s", n, memberlist.LogAddress(ua))
			continue
		}
		metrics.IncrCounter([]string{"memberlist", "udp", "received"}, float32(n))
		ap := ua.AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if buf[0] == posMarker {
			t.readPositions(ap, buf[1:n])
			continue
		}
		if t.nacks.Load() > 0 {
			t.matchAcks(ap, buf[:n])
		}
		t.noteHeard(ap, ts, buf[:n])
		pkt := make([]byte, n)
		copy(pkt, buf[:n])
		select {
		case t.packets <- &memberlist.Packet{Buf: pkt, From: ua, Timestamp: ts}:
		case <-t.done:
			return
		}
	}
}

// noteHeard records a packet from addr for HeardSince and wakes its
// watchers, if the packet counts.
func (t *Transport) noteHeard(ap netip.AddrPort, ts time.Time, pkt []byte) {
	if !t.counts(ap, ts, pkt) {
		return
	}
	t.heardMu.Lock()
	if _, ok := t.last[ap]; !ok && len(t.last) >= maxHeard {
		clear(t.last)
	}
	t.last[ap] = ts
	t.heardMu.Unlock()
	if t.nwatch.Load() > 0 {
		t.heard(ap)
	}
}

// verifyEvery: a packet from an address heard from (verified) less than
// this long ago is not verified again unless someone watches the address;
// HeardSince is then late by at most this much.
const verifyEvery = 5 * time.Millisecond

// counts reports whether a packet from addr counts as heard from it. With
// gossip encryption, only a packet sealed with a key of the keyring does:
// anyone can send bytes with a member's source address, only a key holder
// can seal them. Without encryption there is nothing to verify (memberlist
// takes any packet): every packet counts, and forged ones too.
func (t *Transport) counts(addr netip.AddrPort, ts time.Time, pkt []byte) bool {
	if t.keys == nil {
		return true
	}
	if !t.watched(addr) {
		t.heardMu.Lock()
		at, ok := t.last[addr]
		t.heardMu.Unlock()
		if ok && ts.Sub(at) < verifyEvery {
			return false
		}
	}
	return t.keys.fromKeyHolder(pkt)
}

func (t *Transport) watched(addr netip.AddrPort) bool {
	if t.nwatch.Load() == 0 {
		return false
	}
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	return len(t.watches[addr]) > 0
}

// Watch returns a channel that is closed when the next UDP packet from addr
// arrives, and a function that stops watching. It is a hint, never an
// answer: the revival watch uses it to ask a confirmed-failed member at
// once (an own ping, at most one per revival interval) rather than at the
// next tick. Only an ack to an own ping is a sign of life (ownping.go): a
// packet captured earlier and replayed decrypts as well as the original.
// With gossip encryption a packet wakes the watch only once it decrypts
// with a key of the keyring (see counts), so random bytes with a member's
// source address do not.
func (t *Transport) Watch(addr netip.AddrPort) (<-chan struct{}, func()) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	ch := make(chan struct{})
	t.watchMu.Lock()
	if t.watches == nil {
		t.watches = map[netip.AddrPort][]chan struct{}{}
	}
	t.watches[addr] = append(t.watches[addr], ch)
	t.nwatch.Add(1)
	t.watchMu.Unlock()
	return ch, func() {
		t.watchMu.Lock()
		defer t.watchMu.Unlock()
		ws := t.watches[addr]
		for i, w := range ws {
			if w == ch {
				ws = append(ws[:i], ws[i+1:]...)
				t.nwatch.Add(-1)
				break
			}
		}
		if len(ws) == 0 {
			delete(t.watches, addr)
		} else {
			t.watches[addr] = ws
		}
	}
}

// HeardSince reports how long ago the last UDP packet from addr arrived
// (false: none, or forgotten). Like Watch, it counts only packets from key
// holders when gossip is encrypted, and like Watch it is a hint: the gate
// uses it only to give a failure the second, longer check (own pings too),
// never to withhold one.
func (t *Transport) HeardSince(addr netip.AddrPort) (time.Duration, bool) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	t.heardMu.Lock()
	at, ok := t.last[addr]
	t.heardMu.Unlock()
	if !ok {
		return 0, false
	}
	return time.Since(at), true
}

// heard wakes the watchers of addr (unmapped).
func (t *Transport) heard(addr netip.AddrPort) {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	ws := t.watches[addr]
	if len(ws) == 0 {
		return
	}
	for _, ch := range ws {
		close(ch)
	}
	delete(t.watches, addr)
	t.nwatch.Add(-int32(len(ws)))
}

// SetPositions hands the position stream's packets to p.
func (t *Transport) SetPositions(p *Positions) { t.positions.Store(p) }

// readPositions opens a position packet (its marker removed) as memberlist
// would open a packet of its own, and hands its entries to the stream.
func (t *Transport) readPositions(from netip.AddrPort, pkt []byte) {
	p := t.positions.Load()
	if p == nil {
		return
	}
	plain, ok := t.opener.open(pkt)
	if !ok {
		p.badPacket()
		return
	}
	_ = p.Receive(from, plain)
}

// writePacket sends a packet of shoal's own from the gossip socket.
func (t *Transport) writePacket(pkt []byte, to netip.AddrPort) error {
	if _, err := writeToUDP(t.udp, pkt, net.UDPAddrFromAddrPort(to)); err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	return nil
}
