package gossip

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

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
// 1 MiB. maxStreamBytes is four times that. Every stream cut off or
// refused is counted in shoal_memberlist_stream_rejected_total{reason}.
//
// Those bounds are for the addresses of members (serf's members, failed
// and left ones included: see Transport.SetMembers). Streams from any
// other address, a stranger's or a new member's first join, have their
// own, much smaller share (issue 36, finding 6: 160 streams from 4
// addresses that each sent 4 MB, with 620 more connections a second,
// kept the writer reading junk into memberlist's buffers as fast as the
// per-address budgets let it (over 10,000 streams cut at the budget in
// 40 s): its RSS went to 200 MB and its CPU starved its own MySQL
// probe and memberlist's probes, so every agent saw it failed or out of
// the pool 5 times in 40 s):
//
//   - maxStrangerStreams at once, maxStrangerStreamsPerIP from one
//     address (more are closed at once), apart from the members'
//     maxStreams: strangers cannot take a slot a member's push-pull or
//     TCP ping needs. When all maxStrangerStreams are taken, a new one
//     cuts the oldest, so a new member's join (a few milliseconds) gets
//     through streams that trickle;
//   - at most strangerAcceptRate new ones a second in all and
//     strangerAcceptRatePerIP from one address (token buckets): one over
//     is closed at once, before anything is allocated for it;
//   - maxStrangerStreamBytes per stream (a new member's join carries
//     its own state, a few KiB), so strangers can make the agent read at
//     most strangerAcceptRate × maxStrangerStreamBytes a second and hold
//     maxStrangerStreams × maxStrangerStreamBytes;
//   - strangerStreamTime from the accept to the stream's end, whatever
//     deadline memberlist sets (its TCPTimeout, 10 s): a stream that
//     trickles frees its slot within that.
const (
	maxStreams        = 128 // memberlist's own bound on concurrent push-pulls
	maxStreamsPerIP   = 32
	maxStreamBytes    = 4 << 20
	streamBudget      = 32 << 20
	streamBudgetPerIP = 8 << 20

	// maxStreamHeader is the most bytes before the message: a label
	// header (type, length, up to 255 bytes) and the encryptMsg header.
	maxStreamHeader = 2 + 255 + 5

	maxStrangerStreams      = 16
	maxStrangerStreamsPerIP = 4
	maxStrangerStreamBytes  = 256 << 10
	strangerAcceptRate      = 64 // a second; bursts of twice as many
	strangerAcceptRatePerIP = 8
	strangerStreamTime      = 2 * time.Second
	memberlistHasLabelMsg   = 244 // memberlist's hasLabelMsg
	memberlistEncryptMsg    = 10  // memberlist's encryptMsg
)

// Reasons a stream is rejected (the reason label).
const (
	rejectTooMany   = "too_many"   // maxStreams open
	rejectPerIP     = "per_ip"     // maxStreamsPerIP open from the address
	rejectTooLarge  = "too_large"  // declared or sent more than maxStreamBytes
	rejectBudget    = "budget"     // streamBudget or streamBudgetPerIP used up
	rejectBadHeader = "bad_header" // an empty label
	rejectRate      = "rate"       // a stranger's accept rate (in all or from its address) exceeded
	rejectEvicted   = "evicted"    // a stranger's oldest stream, cut for a new one
)

// streamLimits are the bounds above, as numbers a test can lower.
type streamLimits struct {
	streams, perIP      int
	bytes               int64
	budget, budgetPerIP int64
	stranger            strangerLimits
}

// strangerLimits bound the streams from addresses that are no member's.
type strangerLimits struct {
	streams, perIP  int
	bytes           int64
	rate, ratePerIP float64 // accepts a second; bursts of twice as many
	time            time.Duration
}

var defaultStreamLimits = streamLimits{streams: maxStreams, perIP: maxStreamsPerIP, bytes: maxStreamBytes,
	budget: streamBudget, budgetPerIP: streamBudgetPerIP,
	stranger: strangerLimits{streams: maxStrangerStreams, perIP: maxStrangerStreamsPerIP, bytes: maxStrangerStreamBytes,
		rate: strangerAcceptRate, ratePerIP: strangerAcceptRatePerIP, time: strangerStreamTime}}

// streamLimiter counts the inbound streams open and the bytes they read:
// the members' (open, used, perIP) and the strangers' apart.
type streamLimiter struct {
	lim      streamLimits
	rejected func(reason string, remote net.Addr)
	now      func() time.Time

	mu    sync.Mutex
	open  int
	used  int64
	perIP map[netip.Addr]*ipUse

	// Streams open from addresses that are no member's, oldest first,
	// and per address; their accept rates, in all and per address.
	strangerQ  []*limitedConn
	strangerIP map[netip.Addr]int
	rate       bucket
	rateIP     map[netip.Addr]*bucket
}

// maxRateIPs bounds the per-address buckets kept; when full, those that
// are full again (idle for a while) are dropped, and if none is, all.
const maxRateIPs = 4096

type ipUse struct {
	open int
	used int64
}

func newStreamLimiter(lim streamLimits, rejected func(reason string, remote net.Addr)) *streamLimiter {
	l := &streamLimiter{lim: lim, rejected: rejected, now: time.Now, perIP: map[netip.Addr]*ipUse{},
		strangerIP: map[netip.Addr]int{}, rateIP: map[netip.Addr]*bucket{}}
	l.rate = newBucket(lim.stranger.rate, l.now())
	return l
}

// admit wraps conn in a limitedConn, or closes it and returns nil when too
// many streams are open (in all, or from its address). member tells
// whether its address is a member's; a stranger's stream gets the
// stranger limits.
func (l *streamLimiter) admit(conn net.Conn, member bool) net.Conn {
	ip := remoteIP(conn)
	if !member {
		return l.admitStranger(conn, ip)
	}
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
	return &limitedConn{Conn: conn, l: l, ip: ip, max: l.lim.bytes}
}

// admitStranger is admit for an address that is no member's: the
// address's slots and the accept rates first (nothing is allocated for a
// connection refused there), then the strangers' own slots. When those
// are all taken, the oldest stranger's stream is cut to make room: a
// stream that trickles cannot keep a new member's join out, which takes
// milliseconds, while its sender can reopen at most at the accept rate.
func (l *streamLimiter) admitStranger(conn net.Conn, ip netip.Addr) net.Conn {
	lim := l.lim.stranger
	now := l.now()
	l.mu.Lock()
	reason := ""
	b := l.rateIP[ip]
	switch {
	case l.strangerIP[ip] >= lim.perIP:
		reason = rejectPerIP
	case b != nil && !b.ready(lim.ratePerIP, now):
		reason = rejectRate
	case !l.rate.ready(lim.rate, now):
		reason = rejectRate
	}
	if reason != "" {
		l.mu.Unlock()
		l.rejected(reason, conn.RemoteAddr())
		conn.Close()
		return nil
	}
	l.rate.take()
	if b == nil {
		l.pruneRates(now)
		nb := newBucket(lim.ratePerIP, now)
		b = &nb
		l.rateIP[ip] = b
	}
	b.take()
	var evicted *limitedConn
	if len(l.strangerQ) >= lim.streams {
		evicted = l.strangerQ[0]
		l.strangerQ = l.strangerQ[1:]
		l.forgetStranger(evicted.ip)
		evicted.once.Do(func() {}) // released here: its Close releases nothing
	}
	// A deadline is the runtime's real time, not the limiter's clock.
	c := &limitedConn{Conn: conn, l: l, ip: ip, max: lim.bytes, stranger: true, until: time.Now().Add(lim.time)}
	l.strangerQ = append(l.strangerQ, c)
	l.strangerIP[ip]++
	l.mu.Unlock()
	if evicted != nil {
		l.rejected(rejectEvicted, evicted.RemoteAddr())
		evicted.Conn.Close() // memberlist's read fails; it then calls Close
	}
	_ = conn.SetDeadline(c.until)
	return c
}

// pruneRates makes room for one more per-address bucket. Called with mu
// held.
func (l *streamLimiter) pruneRates(now time.Time) {
	if len(l.rateIP) < maxRateIPs {
		return
	}
	for ip, b := range l.rateIP {
		if b.full(l.lim.stranger.ratePerIP, now) {
			delete(l.rateIP, ip)
		}
	}
	if len(l.rateIP) >= maxRateIPs {
		clear(l.rateIP)
	}
}

// releaseStranger forgets a stranger's closed stream.
func (l *streamLimiter) releaseStranger(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.strangerQ {
		if q == c {
			l.strangerQ = append(l.strangerQ[:i], l.strangerQ[i+1:]...)
			break
		}
	}
	l.forgetStranger(c.ip)
}

// forgetStranger counts one stream less from ip. Called with mu held.
func (l *streamLimiter) forgetStranger(ip netip.Addr) {
	if l.strangerIP[ip]--; l.strangerIP[ip] <= 0 {
		delete(l.strangerIP, ip)
	}
}

// bucket is a token bucket of accepts: rate a second, up to twice as many
// at once. Its rate is passed in, so that one number configures many.
type bucket struct {
	tokens float64
	at     time.Time
}

func newBucket(rate float64, now time.Time) bucket { return bucket{tokens: 2 * rate, at: now} }

// ready refills the bucket and reports whether it holds a token.
func (b *bucket) ready(rate float64, now time.Time) bool {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(2*rate, b.tokens+d.Seconds()*rate)
		b.at = now
	}
	return b.tokens >= 1
}

func (b *bucket) take() { b.tokens-- }

// full reports whether the bucket refilled to its burst: forgetting it
// changes nothing.
func (b *bucket) full(rate float64, now time.Time) bool {
	return b.tokens+now.Sub(b.at).Seconds()*rate >= 2*rate
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
// charged to the limiter and checked against max (maxStreamBytes, or
// maxStrangerStreamBytes for a stranger's), and Close releases them. A
// stranger's stream ends at until, whatever deadline memberlist sets.
type limitedConn struct {
	net.Conn
	l        *streamLimiter
	ip       netip.Addr
	max      int64
	stranger bool
	until    time.Time
	hdr      streamHeader
	read     atomic.Int64 // bytes read, all charged
	failed   error        // the limit the stream broke; every later read returns it
	once     sync.Once
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
	if err := c.hdr.feed(b, c.max); err != nil {
		return err.reason, err
	}
	if c.read.Load()+int64(len(b)) > c.max+maxStreamHeader {
		return rejectTooLarge, fmt.Errorf("inbound stream is larger than the limit (%d bytes)", c.max)
	}
	if c.stranger {
		c.read.Add(int64(len(b))) // bounded by max: no budget to charge
		return "", nil
	}
	if !c.l.charge(c.ip, int64(len(b))) {
		return rejectBudget, fmt.Errorf("inbound streams hold too many unread bytes (limit %d, %d from one address)",
			c.l.lim.budget, c.l.lim.budgetPerIP)
	}
	c.read.Add(int64(len(b)))
	return "", nil
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		if c.stranger {
			c.l.releaseStranger(c)
		} else {
			c.l.release(c.ip, c.read.Load())
		}
	})
	return c.Conn.Close()
}

// SetDeadline keeps a stranger's stream within until.
func (c *limitedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.bound(t)) }

// SetReadDeadline keeps a stranger's stream within until.
func (c *limitedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.bound(t)) }

// SetWriteDeadline keeps a stranger's stream within until.
func (c *limitedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.bound(t)) }

func (c *limitedConn) bound(t time.Time) time.Time {
	if c.stranger && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
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
