package gossip

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	metrics "github.com/hashicorp/go-metrics"
)

// Inbound stream limits.
//
// memberlist reads an inbound stream whole before it can tell whether it
// was sealed with the gossip key: an encrypted stream is a type byte
// (encryptMsg), a 4-byte length and that many bytes, which
// decryptRemoteState (memberlist v0.7.0 net.go) copies into a growing
// buffer, accepting lengths up to 20 MB, on as many connections as anyone
// opens. A stranger without the key declaring 20 MB on 40 connections took
// an agent from 32 MB to 904 MB of RSS in 1.5 s. The transport now bounds
// what it hands memberlist:
//
//   - maxStreams connections at once, maxStreamsPerIP from one address:
//     further ones are closed at once;
//   - maxStreamBytes per stream: a stream whose encryptMsg header declares
//     more, or which sends more (plaintext ones too), is cut off;
//   - streamBudget bytes read and not yet released (a stream's bytes count
//     until it is closed) over all streams, streamBudgetPerIP from one
//     address: a read past either cuts that stream off.
//
// A member's streams are small: a push-pull carries, per member, about
// 100 bytes of memberlist state plus its metadata (at most 512 bytes) and
// serf's few bytes, plus serf's recent user events, and memberlist
// compresses it: a 1,000-member cluster with full metadata sends under
// 1 MiB. maxStreamBytes is four times that; the memory strangers can make
// the agent hold is bounded by streamBudget (memberlist's buffer may
// double it). Every stream cut off or refused is counted in
// shoal_memberlist_stream_rejected_total{reason}.
const (
	maxStreams        = 128 // memberlist's own bound on concurrent push-pulls
	maxStreamsPerIP   = 32
	maxStreamBytes    = 4 << 20
	streamBudget      = 32 << 20
	streamBudgetPerIP = 8 << 20

	// maxStreamHeader is the most bytes before the message: a label
	// header (type, length, up to 255 bytes) and the encryptMsg header.
	maxStreamHeader = 2 + 255 + 5

	memberlistHasLabelMsg = 244 // memberlist's hasLabelMsg
	memberlistEncryptMsg  = 10  // memberlist's encryptMsg
)

// Reasons a stream is rejected (the reason label).
const (
	rejectTooMany   = "too_many"   // maxStreams open
	rejectPerIP     = "per_ip"     // maxStreamsPerIP open from the address
	rejectTooLarge  = "too_large"  // declared or sent more than maxStreamBytes
	rejectBudget    = "budget"     // streamBudget or streamBudgetPerIP used up
	rejectBadHeader = "bad_header" // an empty label
)

// streamLimits are the bounds above, as numbers a test can lower.
type streamLimits struct {
	streams, perIP      int
	bytes               int64
	budget, budgetPerIP int64
}

var defaultStreamLimits = streamLimits{streams: maxStreams, perIP: maxStreamsPerIP, bytes: maxStreamBytes,
	budget: streamBudget, budgetPerIP: streamBudgetPerIP}

// streamLimiter counts the inbound streams open and the bytes they read.
type streamLimiter struct {
	lim      streamLimits
	rejected func(reason string, remote net.Addr)

	mu    sync.Mutex
	open  int
	used  int64
	perIP map[netip.Addr]*ipUse
}

type ipUse struct {
	open int
	used int64
}

func newStreamLimiter(lim streamLimits, rejected func(reason string, remote net.Addr)) *streamLimiter {
	return &streamLimiter{lim: lim, rejected: rejected, perIP: map[netip.Addr]*ipUse{}}
}

// admit wraps conn in a limitedConn, or closes it and returns nil when too
// many streams are open (in all, or from its address).
func (l *streamLimiter) admit(conn net.Conn) net.Conn {
	ip := remoteIP(conn)
	l.mu.Lock()
	u := l.perIP[ip]
	reason := ""
	switch {
	case l.open >= l.lim.streams:
		reason = rejectTooMany
	case u != nil && u.open >= l.lim.perIP:
		reason = rejectPerIP
	}
	if reason == "" {
		if u == nil {
			u = &ipUse{}
			l.perIP[ip] = u
		}
		u.open++
		l.open++
	}
	l.mu.Unlock()
	if reason != "" {
		l.rejected(reason, conn.RemoteAddr())
		conn.Close()
		return nil
	}
	return &limitedConn{Conn: conn, l: l, ip: ip}
}

// charge adds n bytes read from ip; false: over a budget, nothing charged.
func (l *streamLimiter) charge(ip netip.Addr, n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.perIP[ip]
	if l.used+n > l.lim.budget || u.used+n > l.lim.budgetPerIP {
		return false
	}
	l.used += n
	u.used += n
	return true
}

// release forgets a closed stream and the bytes it read.
func (l *streamLimiter) release(ip netip.Addr, used int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.perIP[ip]
	l.open--
	l.used -= used
	u.open--
	u.used -= used
	if u.open == 0 {
		delete(l.perIP, ip)
	}
}

func remoteIP(conn net.Conn) netip.Addr {
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// limitedConn is an inbound stream within the limits: its reads are
// charged to the limiter and checked against maxStreamBytes, and Close
// releases them.
type limitedConn struct {
	net.Conn
	l      *streamLimiter
	ip     netip.Addr
	hdr    streamHeader
	read   atomic.Int64 // bytes read, all charged
	failed error        // the limit the stream broke; every later read returns it
	once   sync.Once
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if c.failed != nil {
		return 0, c.failed
	}
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	if reason, rerr := c.check(p[:n]); rerr != nil {
		c.failed = rerr
		c.l.rejected(reason, c.RemoteAddr())
		return 0, rerr
	}
	return n, err
}

// check charges the bytes b just read and checks the stream's limits.
func (c *limitedConn) check(b []byte) (string, error) {
	if err := c.hdr.feed(b, c.l.lim.bytes); err != nil {
		return err.reason, err
	}
	if c.read.Load()+int64(len(b)) > c.l.lim.bytes+maxStreamHeader {
		return rejectTooLarge, fmt.Errorf("inbound stream is larger than the limit (%d bytes)", c.l.lim.bytes)
	}
	if !c.l.charge(c.ip, int64(len(b))) {
		return rejectBudget, fmt.Errorf("inbound streams hold too many unread bytes (limit %d, %d from one address)",
			c.l.lim.budget, c.l.lim.budgetPerIP)
	}
	c.read.Add(int64(len(b)))
	return "", nil
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.release(c.ip, c.read.Load()) })
	return c.Conn.Close()
}

// streamHeader follows the first bytes of an inbound stream: an optional
// label header (hasLabelMsg, a length byte, the label), the message type
// and, for an encrypted message, its 4-byte big-endian length.
type streamHeader struct {
	state  int
	skip   int // label bytes still to pass
	lenBuf [4]byte
	nlen   int
}

const (
	hdrStart    = iota // the label header's type or the message type
	hdrLabelLen        // the label's length
	hdrLabel           // the label
	hdrType            // the message type after a label
	hdrLength          // the encrypted message's length
	hdrDone
)

type headerError struct {
	reason string
	msg    string
}

func (e *headerError) Error() string { return e.msg }

// feed reads b, the next bytes of the stream, and fails when the header
// declares an encrypted message longer than limit.
func (h *streamHeader) feed(b []byte, limit int64) *headerError {
	for i := 0; i < len(b) && h.state != hdrDone; i++ {
		c := b[i]
		switch h.state {
		case hdrStart, hdrType:
			switch {
			case c == memberlistHasLabelMsg && h.state == hdrStart:
				h.state = hdrLabelLen
			case c == memberlistEncryptMsg:
				h.state = hdrLength
			default:
				h.state = hdrDone // memberlist reads and bounds the rest
			}
		case hdrLabelLen:
			if c == 0 {
				return &headerError{rejectBadHeader, "inbound stream has an empty label header"}
			}
			h.skip, h.state = int(c), hdrLabel
		case hdrLabel:
			if h.skip--; h.skip == 0 {
				h.state = hdrType
			}
		case hdrLength:
			h.lenBuf[h.nlen] = c
			if h.nlen++; h.nlen == 4 {
				h.state = hdrDone
				if n := binary.BigEndian.Uint32(h.lenBuf[:]); int64(n) > limit {
					return &headerError{rejectTooLarge,
						fmt.Sprintf("inbound encrypted stream declares %d bytes, more than the limit (%d bytes)", n, limit)}
				}
			}
		}
	}
	return nil
}

// streamsRejected counts the inbound streams the limits refused or cut off
// (by reason) for tests; the metric counts them for operators.
type streamsRejected struct {
	mu sync.Mutex
	n  map[string]int64
}

func (r *streamsRejected) add(reason string) {
	r.mu.Lock()
	if r.n == nil {
		r.n = map[string]int64{}
	}
	r.n[reason]++
	r.mu.Unlock()
	metrics.IncrCounterWithLabels([]string{"memberlist", "stream", "rejected"}, 1,
		[]metrics.Label{{Name: "reason", Value: reason}})
}

func (r *streamsRejected) get(reason string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}
