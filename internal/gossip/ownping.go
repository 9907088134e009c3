package gossip

import (
	"bytes"
	"compress/lzw"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Own pings.
//
// The direct pings the agent sends itself (failure confirmation, revival)
// are memberlist `ping` messages, but not memberlist.Ping's:
//
//   - They carry sequence numbers of their own, and only an `ack` that
//     carries one of them, from the address pinged, while the ping is
//     outstanding, is an answer. Any other packet from the member (its
//     gossip, its own probes, an old ack, a packet captured earlier and
//     replayed) is not a sign of life: a replay costs nothing and needs no
//     key, since a replayed packet decrypts as well as the original.
//   - They piggyback nothing. memberlist.Ping sends through memberlist's
//     sendMsg, which fills the packet with queued broadcasts and spends a
//     transmission of each: pings to a dead host used up the retransmits
//     of the very "dead" message that announces it (issue 27, finding 5).
//
// The packet is what memberlist v0.7.0 sends for a ping (net.go
// rawSendMsgPacket): the message type byte and the msgpack-encoded ping,
// sealed with the keyring's primary key (security.go encryptPayload, the
// label as additional data) when gossip is encrypted, behind the label
// header (label.go) when a label is set. No CRC and no compression: both are
// optional for the receiver (ingestPacket, handleCommand). The target's
// memberlist answers it like any ping (handlePing): an ack with our
// sequence number, sent to SourceAddr:SourcePort, which is this agent's
// gossip port, so the transport's read loop sees it (see
// Transport.matchAcks) before handing it to memberlist, which drops an ack
// whose sequence number it has no handler for (state.go invokeAckHandler:
// no handler, return).
//
// Sequence numbers: memberlist's counter starts at 0 and adds one per probe,
// ping and relayed indirect ping (state.go nextSeqNo). Ours have the high
// bit set, so the two ranges are disjoint until memberlist has used 2^31
// numbers: about 10 years at the fast profile's rate (a probe every 150 ms,
// 7 a second, a few more while members fail), 25 days even at an absurd
// 1,000 a second. An ack for one of memberlist's probes therefore never
// answers an own ping, and ours never completes one of memberlist's. The
// low 31 bits start at a random value in each agent, so an ack captured
// before the agent restarted does not match the restarted agent's pings.
// Without gossip encryption nothing is verifiable (anyone who sees a ping
// can forge its ack); with it, only a key holder can seal an ack, and only
// the live target knows the fresh sequence number to put in it.

// memberlist v0.7.0's message types (net.go; the numbers are protocol).
const (
	mlPingMsg     byte = 0
	mlIndPingMsg  byte = 1
	mlAckRespMsg  byte = 2
	mlCompoundMsg byte = 7
	mlCompressMsg byte = 9
	mlHasCrcMsg   byte = 12
)

const (
	// ownSeqBit is set in every own ping's sequence number.
	ownSeqBit = 1 << 31
	// maxOwnPings bounds the own pings outstanding in one transport (the
	// pinger's slots bound them first).
	maxOwnPings = 1024
	// Reading an ack: compound and compressed messages nest at most
	// maxAckDepth deep, and one packet decompresses to at most
	// maxAckInflate bytes in all. A real ack with its piggybacked gossip is
	// one UDP packet (memberlist's UDPBufferSize, 1,400 bytes).
	maxAckDepth   = 4
	maxAckInflate = 256 << 10
)

// wirePing is memberlist's ping (net.go `ping`): the field names are the
// msgpack map keys.
type wirePing struct {
	SeqNo      uint32
	Node       string
	SourceAddr []byte `codec:",omitempty"`
	SourcePort uint16 `codec:",omitempty"`
	SourceNode string `codec:",omitempty"`
}

// ownSelf is this agent as an own ping names it: its memberlist name and
// advertised gossip address, where the ack is to go.
type ownSelf struct {
	Name string
	Addr net.IP
	Port uint16
}

// packetSeal is how memberlist's configuration seals outgoing packets.
type packetSeal struct {
	keyring *memberlist.Keyring // nil or empty: not encrypted
	label   string
	encrypt bool // memberlist's GossipVerifyOutgoing
	version byte // encryption version: 0 for protocol version 1, else 1
}

func sealFor(mc *memberlist.Config) packetSeal {
	s := packetSeal{keyring: mc.Keyring, label: mc.Label, encrypt: mc.GossipVerifyOutgoing, version: 1}
	if mc.ProtocolVersion == 1 {
		s.version = 0
	}
	return s
}

// wireIndirectPing is memberlist's indirect ping request (net.go
// `indirectPingReq`): the member that receives it pings Node at
// Target:Port with a sequence number of its own and, when Node answers,
// sends an ack carrying SeqNo to SourceAddr:SourcePort (handleIndirectPing);
// with Nack, a nack when Node did not answer within its probe timeout.
// Every memberlist answers it, whatever its version.
type wireIndirectPing struct {
	SeqNo      uint32
	Target     []byte
	Port       uint16
	Node       string
	Nack       bool
	SourceAddr []byte `codec:",omitempty"`
	SourcePort uint16 `codec:",omitempty"`
	SourceNode string `codec:",omitempty"`
}

// ip4or16 is ip in its 4-byte form when it is IPv4, as memberlist sends it.
func ip4or16(ip net.IP) []byte {
	if ip4 := ip.To4(); ip4 != nil {
		return ip4
	}
	return ip
}

// encodeOwnPing returns the packet of an own ping with seq to the member
// named node.
func encodeOwnPing(seq uint32, node string, self ownSelf, s packetSeal) ([]byte, error) {
	p := wirePing{SeqNo: seq, Node: node, SourceAddr: ip4or16(self.Addr), SourcePort: self.Port, SourceNode: self.Name}
	return encodeOwn(mlPingMsg, &p, s)
}

// encodeOwnRelay returns the packet of an own indirect ping with seq: the
// member it is sent to pings target (its name and gossip address) for this
// agent, and forwards target's answer as an ack carrying seq.
func encodeOwnRelay(seq uint32, target ownSelf, self ownSelf, s packetSeal) ([]byte, error) {
	p := wireIndirectPing{SeqNo: seq, Target: ip4or16(target.Addr), Port: target.Port, Node: target.Name, Nack: true,
		SourceAddr: ip4or16(self.Addr), SourcePort: self.Port, SourceNode: self.Name}
	return encodeOwn(mlIndPingMsg, &p, s)
}

// encodeOwn returns the packet of one memberlist message of type t: the
// type byte and msgpack-encoded v, sealed and labelled as s says.
func encodeOwn(t byte, v any, s packetSeal) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(t)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(v); err != nil {
		return nil, fmt.Errorf("encode ping: %w", err)
	}
	return sealOwn(buf.Bytes(), s)
}

// sealOwn seals and labels msg as s says, as memberlist does a packet.
func sealOwn(msg []byte, s packetSeal) ([]byte, error) {
	if s.encrypt && s.keyring != nil && len(s.keyring.GetKeys()) > 0 {
		sealed, err := sealPacket(s.version, s.keyring.GetPrimaryKey(), msg, []byte(s.label))
		if err != nil {
			return nil, err
		}
		msg = sealed
	}
	out, err := memberlist.AddLabelHeaderToPacket(msg, s.label)
	if err != nil {
		return nil, fmt.Errorf("label packet: %w", err)
	}
	return out, nil
}

// sealPacket is memberlist's encryptPayload: the version byte, a random
// nonce, and the AES-GCM ciphertext of msg (PKCS7-padded for version 0)
// with data as additional data.
func sealPacket(version byte, key, msg, data []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal ping: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal ping: %w", err)
	}
	src := msg
	if version == 0 {
		pad := aes.BlockSize - len(msg)%aes.BlockSize
		src = append(bytes.Clone(msg), bytes.Repeat([]byte{byte(pad)}, pad)...)
	}
	out := make([]byte, encVersionSize+encNonceSize, encVersionSize+encNonceSize+len(src)+encTagSize)
	out[0] = version
	if _, err := rand.Read(out[encVersionSize:]); err != nil {
		return nil, fmt.Errorf("seal ping: %w", err)
	}
	return gcm.Seal(out, out[encVersionSize:], src, data), nil
}

// readAcks calls found with the sequence number of every ack in plain, a
// packet's plaintext as memberlist reads it after the label header and the
// decryption (ingestPacket): an optional CRC prefix, then a message, which
// may be compound or compressed. Anything it cannot read is skipped; it
// never panics and its work is bounded by the packet's size (maxAckDepth,
// maxAckInflate).
func readAcks(plain []byte, found func(seq uint32)) {
	if len(plain) >= 5 && plain[0] == mlHasCrcMsg {
		if crc32.ChecksumIEEE(plain[5:]) != binary.BigEndian.Uint32(plain[1:5]) {
			return // memberlist drops it
		}
		plain = plain[5:]
	}
	budget := maxAckInflate
	readAckMsg(plain, 0, &budget, found)
}

func readAckMsg(buf []byte, depth int, budget *int, found func(uint32)) {
	if len(buf) < 1 || depth > maxAckDepth {
		return
	}
	body := buf[1:]
	switch buf[0] {
	case mlAckRespMsg:
		if seq, ok := ackSeqNo(body); ok {
			found(seq)
		}
	case mlCompoundMsg:
		// memberlist's decodeCompoundMessage: a count, the big-endian
		// uint16 lengths, then the parts; a truncated part ends it.
		if len(body) < 1 {
			return
		}
		n := int(body[0])
		body = body[1:]
		if len(body) < 2*n {
			return
		}
		lens, parts := body[:2*n], body[2*n:]
		for i := range n {
			l := int(binary.BigEndian.Uint16(lens[2*i:]))
			if len(parts) < l {
				return
			}
			readAckMsg(parts[:l], depth+1, budget, found)
			parts = parts[l:]
		}
	case mlCompressMsg:
		if payload, ok := inflate(body, budget); ok {
			readAckMsg(payload, depth+1, budget, found)
		}
	}
}

// inflate is memberlist's decompressPayload (the msgpack compress{Algo,
// Buf}, LZW of Buf) for at most *budget bytes of output, which it uses up.
func inflate(buf []byte, budget *int) ([]byte, bool) {
	r := mpReader{b: buf}
	n, ok := r.mapLen()
	if !ok {
		return nil, false
	}
	var (
		algo    uint64
		data    []byte
		hasData bool
	)
	for range n {
		key, ok := r.str()
		if !ok {
			return nil, false
		}
		switch string(key) {
		case "Algo":
			if algo, ok = r.uint(); !ok {
				return nil, false
			}
		case "Buf":
			if data, ok = r.strOrNil(); !ok {
				return nil, false
			}
			hasData = true
		default:
			if !r.skip() {
				return nil, false
			}
		}
	}
	if algo != 0 || !hasData || *budget <= 0 {
		return nil, false // 0: memberlist's lzwAlgo, the only one
	}
	zr := lzw.NewReader(bytes.NewReader(data), lzw.LSB, 8)
	defer zr.Close()
	out := make([]byte, 0, min(*budget, 4*len(data)+64))
	var chunk [4096]byte
	for {
		k, err := zr.Read(chunk[:])
		if len(out)+k > *budget {
			*budget = 0
			return nil, false
		}
		out = append(out, chunk[:k]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
	}
	*budget -= len(out)
	return out, true
}

// ackSeqNo reads the SeqNo of memberlist's msgpack-encoded ackResp (a map
// whose other keys, Payload among them, are skipped).
func ackSeqNo(buf []byte) (uint32, bool) {
	r := mpReader{b: buf}
	n, ok := r.mapLen()
	if !ok {
		return 0, false
	}
	var (
		seq uint64
		has bool
	)
	for range n {
		key, ok := r.str()
		if !ok {
			return 0, false
		}
		if string(key) == "SeqNo" {
			if seq, ok = r.uint(); !ok || seq > math.MaxUint32 {
				return 0, false
			}
			has = true
		} else if !r.skip() {
			return 0, false
		}
	}
	return uint32(seq), has
}

// mpReader reads msgpack as go-msgpack writes memberlist's messages, just
// enough for an ack and a compress message: maps, strings and byte strings
// (raw or bin), unsigned integers, and skipping any other value. Every read
// checks its length first.
type mpReader struct {
	b []byte
	i int
}

func (r *mpReader) left() int { return len(r.b) - r.i }

func (r *mpReader) take(n uint64) ([]byte, bool) {
	if n > uint64(r.left()) {
		return nil, false
	}
	s := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return s, true
}

func (r *mpReader) be(n int) (uint64, bool) {
	s, ok := r.take(uint64(n))
	if !ok {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		v = v<<8 | uint64(c)
	}
	return v, true
}

func (r *mpReader) head() (byte, bool) {
	if r.left() < 1 {
		return 0, false
	}
	r.i++
	return r.b[r.i-1], true
}

func (r *mpReader) mapLen() (int, bool) {
	c, ok := r.head()
	if !ok {
		return 0, false
	}
	var n uint64
	switch {
	case c >= 0x80 && c <= 0x8f:
		n = uint64(c & 0x0f)
	case c == 0xde:
		n, ok = r.be(2)
	case c == 0xdf:
		n, ok = r.be(4)
	default:
		return 0, false
	}
	if !ok || n > uint64(r.left()) { // every entry takes at least two bytes
		return 0, false
	}
	return int(n), true
}

// strOrNil reads a string or byte string (nil reads as nil).
func (r *mpReader) strOrNil() ([]byte, bool) {
	if r.left() > 0 && r.b[r.i] == 0xc0 {
		r.i++
		return nil, true
	}
	return r.str()
}

func (r *mpReader) str() ([]byte, bool) {
	c, ok := r.head()
	if !ok {
		return nil, false
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n, ok = r.be(1)
	case c == 0xda || c == 0xc5:
		n, ok = r.be(2)
	case c == 0xdb || c == 0xc6:
		n, ok = r.be(4)
	default:
		return nil, false
	}
	if !ok {
		return nil, false
	}
	return r.take(n)
}

// uint reads a non-negative integer.
func (r *mpReader) uint() (uint64, bool) {
	c, ok := r.head()
	if !ok {
		return 0, false
	}
	switch {
	case c <= 0x7f:
		return uint64(c), true
	case c >= 0xcc && c <= 0xcf:
		return r.be(1 << (c - 0xcc))
	case c >= 0xd0 && c <= 0xd3:
		size := 1 << (c - 0xd0)
		v, ok := r.be(size)
		if !ok || v>>(8*size-1) != 0 { // negative
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// skip skips one value of any type, nested ones included, without
// recursion: pending counts the values still to skip, and since each
// takes at least a byte it never exceeds what is left.
func (r *mpReader) skip() bool {
	for pending := uint64(1); pending > 0; pending-- {
		c, ok := r.head()
		if !ok {
			return false
		}
		var data, items uint64 // bytes to skip; values added
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			items = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			data = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			data, ok = r.be(1)
		case c == 0xc5 || c == 0xda:
			data, ok = r.be(2)
		case c == 0xc6 || c == 0xdb:
			data, ok = r.be(4)
		case c == 0xc7 || c == 0xc8 || c == 0xc9: // ext 8/16/32: length, type, data
			data, ok = r.be(1 << (c - 0xc7))
			data++
		case c == 0xca:
			data = 4
		case c == 0xcb:
			data = 8
		case c >= 0xcc && c <= 0xcf:
			data = 1 << (c - 0xcc)
		case c >= 0xd0 && c <= 0xd3:
			data = 1 << (c - 0xd0)
		case c >= 0xd4 && c <= 0xd8: // fixext 1..16: type, data
			data = 1 + 1<<(c-0xd4)
		case c == 0xdc:
			items, ok = r.be(2)
		case c == 0xdd:
			items, ok = r.be(4)
		case c == 0xde:
			items, ok = r.be(2)
			items *= 2
		case c == 0xdf:
			items, ok = r.be(4)
			items *= 2
		default: // 0xc1: never used
			return false
		}
		if !ok {
			return false
		}
		if _, ok := r.take(data); !ok {
			return false
		}
		if items > uint64(r.left()) || pending+items > uint64(r.left())+1 {
			return false
		}
		pending += items
	}
	return true
}

// ownPingSender sends own pings from the transport's socket.
type ownPingSender struct {
	tr   *Transport
	self func() ownSelf
	seal func() packetSeal
}

// send registers seq as expected from m's gossip address (its ack is sent
// to ans), then sends the ping. The returned function stops expecting it.
func (s ownPingSender) send(m serf.Member, seq uint32, ans chan<- struct{}) (func(), error) {
	to, ok := memberAddr(m)
	if !ok {
		return nil, fmt.Errorf("member %s has no address", m.Name)
	}
	pkt, err := encodeOwnPing(seq, m.Name, s.self(), s.seal())
	if err != nil {
		return nil, err
	}
	return s.sendTo(to, pkt, seq, ans)
}

// relay registers seq as expected from via's gossip address, then asks via
// to ping target for this agent (an indirect ping): via forwards target's
// answer as an ack carrying seq. The returned function stops expecting it.
func (s ownPingSender) relay(via, target serf.Member, seq uint32, ans chan<- struct{}) (func(), error) {
	to, ok := memberAddr(via)
	if !ok {
		return nil, fmt.Errorf("member %s has no address", via.Name)
	}
	if _, ok := memberAddr(target); !ok {
		return nil, fmt.Errorf("member %s has no address", target.Name)
	}
	pkt, err := encodeOwnRelay(seq, ownSelf{Name: target.Name, Addr: target.Addr, Port: target.Port}, s.self(), s.seal())
	if err != nil {
		return nil, err
	}
	return s.sendTo(to, pkt, seq, ans)
}

func (s ownPingSender) sendTo(to netip.AddrPort, pkt []byte, seq uint32, ans chan<- struct{}) (func(), error) {
	stop, err := s.tr.expectAck(to, seq, ans)
	if err != nil {
		return nil, err
	}
	if err := s.tr.writeOwn(pkt, to); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// newSerfPinger is the pinger of an agent: own pings from tr's socket, named
// after serf's memberlist node (read at the first ping, so after serf
// runs), sealed as mc says. Pingers on one transport share its sequence
// numbers, so a gate and a reachability check may each have their own.
func newSerfPinger(s func() *serf.Serf, tr *Transport, mc *memberlist.Config, inFlight int) *pinger {
	var (
		once sync.Once
		self ownSelf
	)
	return newOwnPinger(tr, func() ownSelf {
		once.Do(func() {
			ln := s().Memberlist().LocalNode()
			self = ownSelf{Name: ln.Name, Addr: ln.Addr, Port: ln.Port}
		})
		return self
	}, func() packetSeal { return sealFor(mc) }, inFlight)
}

// pinger sends own pings with a bound on how many are outstanding at once
// (each holds a slot until answered or given up): an agent that checks many
// members at once (a rack went down, a large cluster) must not flood the
// network or the transport's table of expected acks.
type pinger struct {
	// send sends one own ping with seq to m, expecting its ack on ans.
	send func(m serf.Member, seq uint32, ans chan<- struct{}) (stop func(), err error)
	// relay, when set, asks via to ping target for this agent with seq,
	// expecting the ack via forwards on ans.
	relay func(via, target serf.Member, seq uint32, ans chan<- struct{}) (stop func(), err error)
	// seq, when set, gives the sequence numbers (the transport's);
	// otherwise the pinger counts from a random start itself.
	seq   func() uint32
	own   atomic.Uint32
	slots chan struct{}
	// sent, when set, is told of every ping sent (mustSend: a
	// confirmation).
	sent func(mustSend bool)
}

func newPinger(send func(serf.Member, uint32, chan<- struct{}) (func(), error), inFlight int) *pinger {
	p := &pinger{send: send, slots: make(chan struct{}, inFlight)}
	p.own.Store(mrand.Uint32())
	return p
}

// newOwnPinger is the pinger of a transport: self and seal are read at
// every ping (the keyring's primary key changes with a rotation).
func newOwnPinger(tr *Transport, self func() ownSelf, seal func() packetSeal, inFlight int) *pinger {
	snd := ownPingSender{tr: tr, self: self, seal: seal}
	p := newPinger(snd.send, inFlight)
	p.relay = snd.relay
	p.seq = tr.nextOwnSeq
	return p
}

// nextSeq is a fresh own sequence number (see the top of this file).
func (p *pinger) nextSeq() uint32 {
	if p.seq != nil {
		return p.seq()
	}
	return p.own.Add(1) | ownSeqBit
}

// nextOwnSeq is a fresh own sequence number for a ping from t's socket.
func (t *Transport) nextOwnSeq() uint32 { return t.ownSeq.Add(1) | ownSeqBit }

// ping sends n own pings to m at once and reports whether m answered one
// of them within wait: only an ack carrying one of their sequence numbers
// counts. With mustSend it waits for a free slot for the first ping
// (confirmations) and sends the others if slots are free; without, it sends
// only what fits now and reports false if nothing was sent (revival checks
// are best effort).
func (p *pinger) ping(m serf.Member, n int, wait time.Duration, mustSend bool) bool {
	return p.check(func(seq uint32, ans chan<- struct{}) (func(), error) { return p.send(m, seq, ans) }, n, wait, mustSend)
}

// pingVia is ping through via: n indirect pings asking via to ping target
// for this agent; only an ack via forwards with one of their sequence
// numbers counts. False when the pinger cannot relay.
func (p *pinger) pingVia(via, target serf.Member, n int, wait time.Duration, mustSend bool) bool {
	if p.relay == nil {
		return false
	}
	return p.check(func(seq uint32, ans chan<- struct{}) (func(), error) { return p.relay(via, target, seq, ans) }, n, wait, mustSend)
}

// check is ping with one way of sending a check.
func (p *pinger) check(send func(seq uint32, ans chan<- struct{}) (func(), error), n int, wait time.Duration, mustSend bool) bool {
	ans := make(chan struct{}, 1)
	held := 0
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
		for range held {
			<-p.slots
		}
	}()
	for range n {
		if mustSend && held == 0 {
			// Only the first slot is waited for: a caller that waited
			// while holding slots could deadlock with another doing the
			// same. When slots are scarce, a check sends fewer pings.
			select {
			case p.slots <- struct{}{}:
			case <-ans:
				return true
			}
		} else {
			select {
			case p.slots <- struct{}{}:
			default:
				continue
			}
		}
		stop, err := send(p.nextSeq(), ans)
		if err != nil {
			<-p.slots
			continue
		}
		held++
		stops = append(stops, stop)
		if p.sent != nil {
			p.sent(mustSend)
		}
	}
	if held == 0 {
		return false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ans:
		return true
	case <-timer.C:
		return false
	}
}

// expectAck registers an own ping with seq to addr: an ack carrying seq
// from addr is then reported on ans (without blocking; ans should have
// room for one) and the registration ends. The returned function ends it
// too; it may be called any number of times.
func (t *Transport) expectAck(addr netip.AddrPort, seq uint32, ans chan<- struct{}) (func(), error) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	t.ackMu.Lock()
	defer t.ackMu.Unlock()
	if int(t.nacks.Load()) >= maxOwnPings {
		return nil, fmt.Errorf("%d own pings outstanding", maxOwnPings)
	}
	if t.acks == nil {
		t.acks = map[netip.AddrPort]map[uint32]chan<- struct{}{}
	}
	seqs := t.acks[addr]
	if seqs == nil {
		seqs = map[uint32]chan<- struct{}{}
		t.acks[addr] = seqs
	}
	if _, dup := seqs[seq]; dup {
		return nil, fmt.Errorf("sequence number %d already outstanding", seq)
	}
	seqs[seq] = ans
	t.nacks.Add(1)
	return func() {
		t.ackMu.Lock()
		defer t.ackMu.Unlock()
		t.takeAck(addr, seq)
	}, nil
}

// takeAck ends the registration of seq from addr and returns its channel
// (nil: none); ackMu is held.
func (t *Transport) takeAck(addr netip.AddrPort, seq uint32) chan<- struct{} {
	seqs := t.acks[addr]
	ans, ok := seqs[seq]
	if !ok {
		return nil
	}
	delete(seqs, seq)
	if len(seqs) == 0 {
		delete(t.acks, addr)
	}
	t.nacks.Add(-1)
	return ans
}

// matchAcks reads a packet from addr, if an own ping to addr is
// outstanding, and answers the own pings whose acks it carries. Called by
// the read loop only; the packet is not changed.
func (t *Transport) matchAcks(addr netip.AddrPort, pkt []byte) {
	t.ackMu.Lock()
	_, waiting := t.acks[addr]
	t.ackMu.Unlock()
	if !waiting {
		return
	}
	plain, ok := t.opener.open(pkt)
	if !ok {
		return
	}
	readAcks(plain, func(seq uint32) {
		t.ackMu.Lock()
		ans := t.takeAck(addr, seq)
		t.ackMu.Unlock()
		if ans != nil {
			t.OwnAcks.Add(1)
			select {
			case ans <- struct{}{}:
			default:
			}
		}
	})
}

// writeOwn sends an own packet from the gossip socket.
func (t *Transport) writeOwn(pkt []byte, to netip.AddrPort) error {
	if _, err := writeToUDP(t.udp, pkt, net.UDPAddrFromAddrPort(to)); err != nil {
		return fmt.Errorf("send own ping to %s: %w", to, err)
	}
	return nil
}
