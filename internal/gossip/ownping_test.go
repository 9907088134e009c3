package gossip

import (
	"bytes"
	"compress/lzw"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

var (
	testKey   = bytes.Repeat([]byte{7}, 32)
	testLabel = "shoal-test"
)

// ownPingSerf is a serf on 127.0.0.1 gossiping through shoal's Transport,
// as an agent runs it, with encryption and a label when asked.
type ownPingSerf struct {
	s  *serf.Serf
	tr *Transport
	mc *memberlist.Config
}

func newOwnPingSerf(t *testing.T, name string, secure bool, tune func(*memberlist.Config)) *ownPingSerf {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.LogOutput = io.Discard
	if secure {
		kr, err := memberlist.NewKeyring(nil, testKey)
		if err != nil {
			t.Fatal(err)
		}
		mc.Keyring, mc.Label = kr, testLabel
	}
	if tune != nil {
		tune(mc)
	}
	tr, err := NewTransport(mc, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	mc.Transport = tr
	sc := serf.DefaultConfig()
	sc.NodeName = name
	sc.MemberlistConfig = mc
	sc.LogOutput = io.Discard
	s, err := serf.Create(sc)
	if err != nil {
		tr.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return &ownPingSerf{s: s, tr: tr, mc: mc}
}

func (o *ownPingSerf) member() serf.Member {
	ln := o.s.Memberlist().LocalNode()
	return serf.Member{Name: ln.Name, Addr: ln.Addr, Port: ln.Port}
}

func (o *ownPingSerf) self() ownSelf {
	ln := o.s.Memberlist().LocalNode()
	return ownSelf{Name: ln.Name, Addr: ln.Addr, Port: ln.Port}
}

func (o *ownPingSerf) pinger() *pinger {
	return newOwnPinger(o.tr, o.self, func() packetSeal { return sealFor(o.mc) }, 8)
}

// recorder is a bare transport standing in for an agent whose packets a
// test looks at: it keeps every packet (copied) from one address.
type recorder struct {
	tr   *Transport
	mu   sync.Mutex
	from netip.AddrPort
	pkts [][]byte
}

func newRecorder(t *testing.T, opener *keyCheck) *recorder {
	t.Helper()
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if opener != nil {
		tr.opener = opener
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	r := &recorder{tr: tr}
	go func() {
		for p := range tr.PacketCh() {
			ap := p.From.(*net.UDPAddr).AddrPort()
			ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
			r.mu.Lock()
			if ap == r.from || !r.from.IsValid() {
				r.pkts = append(r.pkts, p.Buf)
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(r.tr.port))
}

func (r *recorder) packets() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.pkts...)
}

// An own ping to a live serf, encrypted and labelled, is answered; once
// that serf is stopped, it is not; and the packets it sent before it
// stopped, its acks among them, replayed from its address, answer nothing.
func TestOwnPingLiveStoppedReplayed(t *testing.T) {
	target := newOwnPingSerf(t, "target", true, nil)
	tm := target.member()
	// This agent: a bare transport reading packets as an encrypted,
	// labelled memberlist does, recording what comes from the target.
	mc := memberlist.DefaultLocalConfig()
	mc.Keyring, mc.Label = target.mc.Keyring, testLabel
	rec := newRecorder(t, newPacketOpener(mc))
	rec.from = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), tm.Port)
	self := ownSelf{Name: "me", Addr: net.IPv4(127, 0, 0, 1), Port: uint16(rec.tr.port)}
	p := newOwnPinger(rec.tr, func() ownSelf { return self }, func() packetSeal { return sealFor(mc) }, 8)

	for i := range 3 {
		if !p.ping(tm, 1, 2*time.Second, true) {
			t.Fatalf("ping %d to a live member unanswered", i)
		}
	}
	if n := rec.tr.OwnAcks.Load(); n != 3 {
		t.Fatalf("%d own acks matched, want 3", n)
	}
	// A ping naming another node is not answered (memberlist checks Node).
	wrong := tm
	wrong.Name = "someone-else"
	if p.ping(wrong, 1, 300*time.Millisecond, true) {
		t.Fatal("a ping naming another node was answered")
	}
	// A ping sealed with another key is not answered.
	other, _ := memberlist.NewKeyring(nil, bytes.Repeat([]byte{9}, 32))
	badKey := *mc
	badKey.Keyring = other
	pBad := newOwnPinger(rec.tr, func() ownSelf { return self }, func() packetSeal { return sealFor(&badKey) }, 8)
	if pBad.ping(tm, 1, 300*time.Millisecond, true) {
		t.Fatal("a ping sealed with a key outside the target's keyring was answered")
	}
	captured := rec.packets()
	if len(captured) < 3 {
		t.Fatalf("captured %d packets from the target, want its 3 acks at least", len(captured))
	}

	if err := target.s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if p.ping(tm, 3, 300*time.Millisecond, true) {
		t.Fatal("a stopped member answered")
	}
	// Replay: the target's port is free now; send what it sent, from it.
	replayer, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(rec.from))
	if err != nil {
		t.Fatalf("bind the stopped target's address: %v", err)
	}
	defer replayer.Close()
	stopReplay := make(chan struct{})
	var replayed atomic.Int32
	go func() {
		for {
			for _, b := range captured {
				select {
				case <-stopReplay:
					return
				default:
				}
				if _, err := replayer.WriteToUDPAddrPort(b, rec.addr()); err == nil {
					replayed.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	for i := range 5 {
		if p.ping(tm, 3, 200*time.Millisecond, true) {
			t.Fatalf("ping %d answered by replayed packets", i)
		}
	}
	close(stopReplay)
	if replayed.Load() < 10 {
		t.Fatalf("only %d packets replayed", replayed.Load())
	}
	if n := rec.tr.OwnAcks.Load(); n != 3 {
		t.Fatalf("%d own acks matched, want the 3 of the live target only", n)
	}
	if n := rec.tr.nacks.Load(); n != 0 || len(rec.tr.acks) != 0 {
		t.Fatalf("%d own pings still expected", n)
	}
}

// An own ping from a full agent (serf on shoal's transport) to another is
// answered with and without encryption.
func TestOwnPingBetweenSerfs(t *testing.T) {
	for _, secure := range []bool{false, true} {
		a := newOwnPingSerf(t, "a", secure, nil)
		b := newOwnPingSerf(t, "b", secure, nil)
		if !a.pinger().ping(b.member(), 1, 2*time.Second, true) {
			t.Fatalf("secure=%v: own ping unanswered", secure)
		}
		if !b.pinger().ping(a.member(), 1, 2*time.Second, true) {
			t.Fatalf("secure=%v: own ping back unanswered", secure)
		}
	}
}

// An indirect ping (relay) through a live serf to a live one is answered
// through the relay, encrypted and labelled or not; to a stopped one it is
// not, and neither is a relay through a stopped serf.
func TestOwnPingRelayedBetweenSerfs(t *testing.T) {
	for _, secure := range []bool{false, true} {
		a := newOwnPingSerf(t, "a", secure, nil)
		b := newOwnPingSerf(t, "b", secure, nil)
		c := newOwnPingSerf(t, "c", secure, nil)
		if !a.pinger().pingVia(b.member(), c.member(), 1, 2*time.Second, true) {
			t.Fatalf("secure=%v: relayed ping unanswered", secure)
		}
		_ = c.s.Shutdown()
		if a.pinger().pingVia(b.member(), c.member(), 2, 700*time.Millisecond, true) {
			t.Fatalf("secure=%v: relayed ping to a stopped serf answered", secure)
		}
		_ = b.s.Shutdown()
		d := newOwnPingSerf(t, "d", secure, nil)
		if a.pinger().pingVia(b.member(), d.member(), 2, 700*time.Millisecond, true) {
			t.Fatalf("secure=%v: relayed ping through a stopped serf answered", secure)
		}
	}
}

// The relay request is memberlist's indirectPingReq, with a nack asked.
func TestEncodeOwnRelay(t *testing.T) {
	self := ownSelf{Name: "me", Addr: net.IPv4(10, 0, 0, 1), Port: 7946}
	target := ownSelf{Name: "db3", Addr: net.IPv4(10, 0, 0, 3), Port: 7947}
	pkt, err := encodeOwnRelay(ownSeqBit|5, target, self, packetSeal{})
	if err != nil {
		t.Fatal(err)
	}
	if pkt[0] != mlIndPingMsg {
		t.Fatalf("message type %d, want %d", pkt[0], mlIndPingMsg)
	}
	var got wireIndirectPing
	if err := codec.NewDecoder(bytes.NewReader(pkt[1:]), &codec.MsgpackHandle{}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := wireIndirectPing{SeqNo: ownSeqBit | 5, Target: []byte{10, 0, 0, 3}, Port: 7947, Node: "db3", Nack: true,
		SourceAddr: []byte{10, 0, 0, 1}, SourcePort: 7946, SourceNode: "me"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// memberlist.Ping piggybacks queued broadcasts and spends their
// transmissions; an own ping carries none. Seen at the receiver: the
// packets carrying a queued user event's payload.
func TestOwnPingSpendsNoBroadcasts(t *testing.T) {
	quiet := func(mc *memberlist.Config) {
		// Nothing but the pings sends: no probes, gossip or push/pull.
		mc.ProbeInterval, mc.GossipInterval, mc.PushPullInterval = time.Hour, time.Hour, time.Hour
		mc.EnableCompression = false // the payload shows in the packets
	}
	local := newOwnPingSerf(t, "local", false, quiet)
	rec := newRecorder(t, nil)
	to := serf.Member{Name: "nobody", Addr: net.IPv4(127, 0, 0, 1), Port: uint16(rec.tr.port)}
	marker := []byte("own-ping-broadcast-marker")
	carrying := func() int {
		n := 0
		for _, b := range rec.packets() {
			if bytes.Contains(b, marker) {
				n++
			}
		}
		return n
	}
	total := func() int { return len(rec.packets()) }
	waitPackets := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); total() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("received %d packets, want %d", total(), n)
			}
		}
	}
	if err := local.s.UserEvent("marker", marker, false); err != nil {
		t.Fatal(err)
	}
	p := local.pinger()
	for range 10 {
		p.ping(to, 1, 10*time.Millisecond, true) // unanswered: nobody acks
	}
	waitPackets(10)
	if n := carrying(); n != 0 {
		t.Fatalf("%d own pings carried the queued broadcast", n)
	}
	// memberlist.Ping carries it, and each one spends a transmission:
	// after the retransmit limit, no more.
	ml := local.s.Memberlist()
	addr := net.UDPAddrFromAddrPort(rec.addr())
	for i := range 12 {
		_, _ = ml.Ping("nobody", addr)
		waitPackets(10 + i + 1)
	}
	got := carrying()
	if got == 0 || got >= 12 {
		t.Fatalf("%d of 12 memberlist pings carried the broadcast, want some then none (its retransmits spent)", got)
	}
	t.Logf("memberlist.Ping carried the broadcast %d times, then its transmissions were spent; 10 own pings carried it 0 times", got)
}

// Garbage and forged packets from the pinged address never answer an own
// ping and never panic: random bytes, a plaintext ack with the right
// sequence number (gossip is encrypted), an ack sealed with a key outside
// the keyring, one with the wrong label, and a replayed ack with a
// sequence number no longer outstanding. An ack sealed with the keyring's
// key and the right sequence number (the positive control) does answer.
func TestOwnPingForgedNeverAnswers(t *testing.T) {
	kr, _ := memberlist.NewKeyring(nil, testKey)
	mc := memberlist.DefaultLocalConfig()
	mc.Keyring, mc.Label = kr, testLabel
	rec := newRecorder(t, newPacketOpener(mc))
	forger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	from := forger.LocalAddr().(*net.UDPAddr).AddrPort()
	rec.from = from

	expect := func(seq uint32) (chan struct{}, func()) {
		ans := make(chan struct{}, 1)
		stop, err := rec.tr.expectAck(from, seq, ans)
		if err != nil {
			t.Fatal(err)
		}
		return ans, stop
	}
	send := func(b []byte) {
		if _, err := forger.WriteToUDPAddrPort(b, rec.addr()); err != nil {
			t.Fatal(err)
		}
	}
	quietFor := func(ans chan struct{}, what string) {
		t.Helper()
		select {
		case <-ans:
			t.Fatalf("%s answered an own ping", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
	seq := uint32(ownSeqBit | 12345)
	ans, stop := expect(seq)
	defer stop()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		b := make([]byte, 1+rng.IntN(1500))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%3 == 0 {
			b[0] = []byte{mlAckRespMsg, mlCompoundMsg, mlCompressMsg, mlHasCrcMsg, 244, 0, 1}[i%7]
		}
		send(b)
	}
	ack := ackPacket(t, seq)
	send(ack) // plaintext
	send(sealAck(t, ack, bytes.Repeat([]byte{9}, 32), testLabel))
	send(sealAck(t, ack, testKey, "other-label"))
	quietFor(ans, "garbage or a forged ack")

	// The positive control: sealed with the key, labelled, right seq.
	send(sealAck(t, ack, testKey, testLabel))
	select {
	case <-ans:
	case <-time.After(5 * time.Second):
		t.Fatal("a genuine ack did not answer")
	}
	// Replayed: the same ack again answers nothing new.
	seq2 := seq + 1
	ans2, stop2 := expect(seq2)
	defer stop2()
	send(sealAck(t, ack, testKey, testLabel))
	quietFor(ans2, "a replayed ack")
}

// ackPacket is memberlist's ack for seq as the target sends it unsealed:
// compound with gossip piggybacked, compressed, behind a CRC.
func ackPacket(t *testing.T, seq uint32) []byte {
	t.Helper()
	ack := encodeMsg(t, mlAckRespMsg, &struct {
		SeqNo   uint32
		Payload []byte
	}{seq, []byte("coordinate payload")})
	gossip := encodeMsg(t, 4, map[string]any{"Incarnation": 3, "Node": "x"})
	var c bytes.Buffer
	c.WriteByte(mlCompoundMsg)
	c.WriteByte(2)
	_ = binary.Write(&c, binary.BigEndian, uint16(len(gossip)))
	_ = binary.Write(&c, binary.BigEndian, uint16(len(ack)))
	c.Write(gossip)
	c.Write(ack)
	var z bytes.Buffer
	w := lzw.NewWriter(&z, lzw.LSB, 8)
	_, _ = w.Write(c.Bytes())
	_ = w.Close()
	comp := encodeMsg(t, mlCompressMsg, &struct {
		Algo uint8
		Buf  []byte
	}{0, z.Bytes()})
	out := make([]byte, 5, 5+len(comp))
	out[0] = mlHasCrcMsg
	binary.BigEndian.PutUint32(out[1:], crc32.ChecksumIEEE(comp))
	return append(out, comp...)
}

func encodeMsg(t testing.TB, typ byte, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte(typ)
	if err := codec.NewEncoder(&b, &codec.MsgpackHandle{}).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sealAck(t *testing.T, msg, key []byte, label string) []byte {
	t.Helper()
	sealed, err := sealPacket(1, key, msg, []byte(label))
	if err != nil {
		t.Fatal(err)
	}
	out, err := memberlist.AddLabelHeaderToPacket(sealed, label)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readAcks finds the ack in every form memberlist sends it.
func TestReadAcksForms(t *testing.T) {
	seq := uint32(ownSeqBit | 77)
	plain := encodeMsg(t, mlAckRespMsg, &struct {
		SeqNo   uint32
		Payload []byte
	}{seq, bytes.Repeat([]byte{1}, 300)})
	for name, pkt := range map[string][]byte{
		"plain":                plain,
		"crc+compound+lzw":     ackPacket(t, seq),
		"small seq, nil":       encodeMsg(t, mlAckRespMsg, &struct{ SeqNo uint32 }{seq}),
		"payload first, extra": encodeMsg(t, mlAckRespMsg, map[string]any{"Payload": []any{1, "x", map[string]int{"a": 1}}, "SeqNo": seq, "Z": 1.5}),
	} {
		var got []uint32
		readAcks(pkt, func(s uint32) { got = append(got, s) })
		if len(got) != 1 || got[0] != seq {
			t.Errorf("%s: read %v, want [%d]", name, got, seq)
		}
	}
	bad := ackPacket(t, seq)
	bad[2] ^= 1 // the CRC no longer matches: memberlist drops it
	readAcks(bad, func(s uint32) { t.Errorf("read seq %d from a packet with a bad CRC", s) })
}

// A packet memberlist would read from a key holder: the encryption
// versions 0 (padded) and 1 both open.
func TestKeyCheckOpensBothVersions(t *testing.T) {
	kr, _ := memberlist.NewKeyring(nil, testKey)
	mc := memberlist.DefaultLocalConfig()
	mc.Keyring, mc.Label = kr, testLabel
	k := newPacketOpener(mc)
	msg := []byte{mlAckRespMsg, 0x80}
	for _, v := range []byte{0, 1} {
		sealed, err := sealPacket(v, testKey, msg, []byte(testLabel))
		if err != nil {
			t.Fatal(err)
		}
		pkt, _ := memberlist.AddLabelHeaderToPacket(sealed, testLabel)
		got, ok := k.open(pkt)
		if !ok || !bytes.Equal(got, msg) {
			t.Fatalf("version %d: open = %x, %v", v, got, ok)
		}
	}
}

// The pinger bounds the own pings outstanding; best-effort pings are not
// sent without a free slot; sends are counted.
func TestPingerBoundsPingsOutstanding(t *testing.T) {
	var out, peak, calls atomic.Int32
	p := newPinger(func(serf.Member, uint32, chan<- struct{}) (func(), error) {
		n := out.Add(1)
		calls.Add(1)
		for {
			pk := peak.Load()
			if n <= pk || peak.CompareAndSwap(pk, n) {
				break
			}
		}
		var once sync.Once
		return func() { once.Do(func() { out.Add(-1) }) }, nil
	}, 4)
	var confirms, revives atomic.Int32
	p.sent = func(confirm bool) {
		if confirm {
			confirms.Add(1)
		} else {
			revives.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if p.ping(member("db2", serf.StatusFailed), 3, 20*time.Millisecond, true) {
				t.Error("answered without an ack")
			}
		})
	}
	wg.Wait()
	if pk := peak.Load(); pk > 4 {
		t.Fatalf("%d own pings outstanding, bound 4", pk)
	}
	if out.Load() != 0 {
		t.Fatalf("%d own pings still expected", out.Load())
	}
	for range 4 {
		p.slots <- struct{}{}
	}
	before := calls.Load()
	if p.ping(member("db2", serf.StatusFailed), 1, 10*time.Millisecond, false) {
		t.Fatal("a ping that could not be sent reported an answer")
	}
	if calls.Load() != before {
		t.Fatal("a best-effort ping was sent with no free slot")
	}
	for range 4 {
		<-p.slots
	}
	if confirms.Load() < 10 || confirms.Load() > 30 || revives.Load() != 0 {
		t.Fatalf("counted %d confirmation and %d revival pings, want 10 to 30 and 0", confirms.Load(), revives.Load())
	}
	if confirms.Load() != calls.Load() {
		t.Fatalf("counted %d pings, sent %d", confirms.Load(), calls.Load())
	}
	// Alone, a check sends all its pings.
	confirms.Store(0)
	p.ping(member("db2", serf.StatusFailed), 3, time.Millisecond, true)
	if confirms.Load() != 3 {
		t.Fatalf("a lone check sent %d pings, want 3", confirms.Load())
	}
	// A send that fails is not counted and frees its slot.
	failing := newPinger(func(serf.Member, uint32, chan<- struct{}) (func(), error) { return nil, errors.New("down") }, 1)
	if failing.ping(member("db2", serf.StatusFailed), 3, time.Hour, true) {
		t.Fatal("answered with nothing sent")
	}
	if len(failing.slots) != 0 {
		t.Fatal("a failed send kept its slot")
	}
}

// Own sequence numbers have the high bit set, start at random, and differ;
// the pingers of one transport share them.
func TestOwnSeqRange(t *testing.T) {
	tr := watchedTransport(t, nil)
	p1 := newOwnPinger(tr, nil, nil, 1)
	p2 := newOwnPinger(tr, nil, nil, 1)
	if s1, s2 := p1.nextSeq(), p2.nextSeq(); s2 != s1+1 || s1&ownSeqBit == 0 {
		t.Fatalf("pingers of one transport gave %#x then %#x", s1, s2)
	}
	a, b := newPinger(nil, 1), newPinger(nil, 1)
	s1, s2 := a.nextSeq(), a.nextSeq()
	if s1&ownSeqBit == 0 || s2&ownSeqBit == 0 || s1 == s2 {
		t.Fatalf("sequence numbers %#x, %#x", s1, s2)
	}
	if b.nextSeq() == s1 && b.nextSeq() == s2 {
		t.Fatal("two pingers start at the same number")
	}
	a.own.Store(1<<32 - 1)
	if s := a.nextSeq(); s&ownSeqBit == 0 {
		t.Fatalf("wrapped out of the own range: %#x", s)
	}
}

// Revival pings are bounded: packets from a confirmed-failed member (a
// replay floods them) bring the next ping forward but never make more than
// one per interval.
func TestRevivalPingsBounded(t *testing.T) {
	r := &gateRecorder{}
	var asked atomic.Int32
	flood := make(chan struct{})
	close(flood) // every watch fires at once: a packet is always there
	const every = 500 * time.Millisecond
	g, clk := fakeGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, func(c *GateConfig) {
		c.Heard = func(serf.Member) (<-chan struct{}, func()) { return flood, func() {} }
		c.RevivePing = func(serf.Member) bool { asked.Add(1); return false }
		c.Rejoin = func(serf.Member) {}
		c.ReviveEvery = func() time.Duration { return every }
	})
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	waitEvents(t, r, 1)
	time.Sleep(50 * time.Millisecond) // a loop unbounded in real time would ping hundreds of times here
	for range 100 {
		clk.Advance(every / 10)
		time.Sleep(time.Millisecond)
	}
	// 10 intervals of clock time: at most one ping each, and the first.
	if n := asked.Load(); n > 12 || n < 5 {
		t.Fatalf("%d revival pings in 10 intervals with a packet always there, want about 10", n)
	}
}

// FuzzReadAcks: any packet, read as an ack, never panics and stays
// bounded; what it reads as an ack, memberlist's msgpack decoder reads
// with the same sequence number.
func FuzzReadAcks(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{mlAckRespMsg, 0x81, 0xa5, 'S', 'e', 'q', 'N', 'o', 0x05})
	f.Add(encodeMsg(f, mlAckRespMsg, &struct {
		SeqNo   uint32
		Payload []byte
	}{ownSeqBit | 9, []byte("x")}))
	f.Add([]byte{mlCompoundMsg, 255, 0, 0})
	f.Add([]byte{mlCompressMsg, 0x82, 0xa4, 'A', 'l', 'g', 'o', 0, 0xa3, 'B', 'u', 'f', 0xc4, 2, 0xff, 0xff})
	f.Add([]byte{mlHasCrcMsg, 0, 0, 0, 0, mlAckRespMsg})
	f.Add([]byte{mlAckRespMsg, 0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{mlAckRespMsg, 0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff})
	kr, _ := memberlist.NewKeyring(nil, testKey)
	mc := memberlist.DefaultLocalConfig()
	mc.Keyring, mc.Label = kr, testLabel
	k := newPacketOpener(mc)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		orig := bytes.Clone(pkt)
		readAcks(pkt, func(seq uint32) {
			if len(pkt) > 1 && pkt[0] == mlAckRespMsg {
				var ack struct {
					SeqNo   uint32
					Payload []byte
				}
				if err := codec.NewDecoder(bytes.NewReader(pkt[1:]), &codec.MsgpackHandle{}).Decode(&ack); err == nil && ack.SeqNo != seq {
					t.Fatalf("read seq %d, msgpack reads %d", seq, ack.SeqNo)
				}
			}
		})
		if plain, ok := k.open(pkt); ok {
			readAcks(plain, func(uint32) {})
		}
		if !bytes.Equal(pkt, orig) {
			t.Fatal("the packet was changed")
		}
	})
}
