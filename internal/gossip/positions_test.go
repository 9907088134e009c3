package gossip

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

func mustPos(t testing.TB, ds ...tags.Domain) tags.Position {
	t.Helper()
	p, err := tags.NewPosition(ds)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPositionsWireRoundTrip(t *testing.T) {
	es := []PosEntry{
		{Origin: "db1", Epoch: 1_765_000_000_000, Seq: 1, Pos: mustPos(t, tags.Domain{ID: 0, Seq: 12_345_678})},
		{Origin: strings.Repeat("n", maxPosOrigin), Epoch: 7, Seq: 1 << 40, Pos: mustPos(t, tags.Domain{ID: 0, Seq: 10}, tags.Domain{ID: 4_000_000_000, Seq: 3}),
			Prev: mustPos(t, tags.Domain{ID: 0, Seq: 9}), PrevAge: 250 * time.Millisecond},
	}
	b := appendPositions(nil, es)
	got, err := decodePositions(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(es) {
		t.Fatalf("round trip:\n got %v\nwant %v", got, es)
	}
	one := appendPositions(nil, es[:1])
	t.Logf("one entry (a 8-byte name, one domain at seq 12,345,678): %d bytes of plaintext", len(one))
	if len(one) > 40 {
		t.Errorf("one entry takes %d bytes, want a few tens", len(one))
	}
}

func TestPositionsWireRejects(t *testing.T) {
	good := appendPositions(nil, []PosEntry{{Origin: "db1", Epoch: 1, Seq: 2, Pos: mustPos(t, tags.Domain{ID: 0, Seq: 5})}})
	cases := map[string][]byte{
		"empty":         nil,
		"version":       append([]byte{9}, good[1:]...),
		"no entries":    {posWireVersion, 0},
		"too many":      {posWireVersion, maxPosEntries + 1},
		"truncated":     good[:len(good)-1],
		"trailing":      append(append([]byte{}, good...), 0),
		"empty origin":  {posWireVersion, 1, 0},
		"long origin":   append([]byte{posWireVersion, 1, 0x81, 0x01}, make([]byte, 129)...),
		"no position":   appendPositions(nil, []PosEntry{{Origin: "db1", Epoch: 1, Seq: 2}}),
		"many domains":  {posWireVersion, 1, 1, 'a', 1, 1, tags.MaxDomains + 1},
		"domain > 2^32": {posWireVersion, 1, 1, 'a', 1, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 0, 0},
	}
	for name, b := range cases {
		if es, err := decodePositions(b); err == nil {
			t.Errorf("%s: decoded %v, want an error", name, es)
		}
	}
}

func FuzzDecodePositions(f *testing.F) {
	f.Add(appendPositions(nil, []PosEntry{{Origin: "db1", Epoch: 1, Seq: 2, Pos: mustPos(f, tags.Domain{ID: 0, Seq: 5})}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodePositions(b)
		if err != nil {
			return
		}
		if again, err := decodePositions(appendPositions(nil, es)); err != nil || fmt.Sprint(again) != fmt.Sprint(es) {
			t.Fatalf("%v does not round-trip: %v %v", es, again, err)
		}
	})
}

// simNet is an in-memory network of streams: Send queues a packet, Run
// delivers the queue in order (dropping a share of packets), each stream
// passing on what it receives at once.
type simNet struct {
	t     testing.TB
	nodes map[netip.AddrPort]*Positions
	peers []PosPeer
	queue []simPacket
	loss  float64
	rng   *rand.Rand
	sent  int
}

type simPacket struct {
	from, to netip.AddrPort
	pkt      []byte
}

func newSimNet(t testing.TB, n int, fanout int, loss float64, clock clockwork.Clock) *simNet {
	s := &simNet{t: t, nodes: map[netip.AddrPort]*Positions{}, loss: loss, rng: rand.New(rand.NewPCG(1, 2))}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 7946)
		s.peers = append(s.peers, PosPeer{Name: name, Addr: addr})
		p := NewPositions(PositionsConfig{Self: func() string { return name }, Fanout: fanout, Clock: clock,
			Peers: func() []PosPeer { return s.peers },
			Send: func(to netip.AddrPort, pkt []byte) error {
				s.queue = append(s.queue, simPacket{from: addr, to: to, pkt: pkt})
				s.sent++
				return nil
			}})
		s.nodes[addr] = p
	}
	return s
}

func (s *simNet) node(i int) *Positions { return s.nodes[s.peers[i].Addr] }

// publish has node i publish pos, and delivers until the network is quiet.
func (s *simNet) publish(i int, pos tags.Position) {
	p := s.node(i)
	p.Publish(pos, true)
	p.pass([]posInbound{<-p.in})
	for len(s.queue) > 0 {
		m := s.queue[0]
		s.queue = s.queue[1:]
		if s.rng.Float64() < s.loss {
			continue
		}
		if m.pkt[0] != posMarker {
			s.t.Fatalf("packet without the marker")
		}
		es, err := decodePositions(m.pkt[1:])
		if err != nil {
			s.t.Fatal(err)
		}
		s.nodes[m.to].pass([]posInbound{{from: m.from, entries: es}})
	}
}

// TestPositionsReachEveryMember: with the default fanout, a position
// pushed once reaches nearly every member of 15, 50 and 1,000, with and
// without 10 % packet loss; every member ends with the newest position,
// and one that missed a position dates it from the next one's Prev.
func TestPositionsReachEveryMember(t *testing.T) {
	for _, tc := range []struct {
		n    int
		loss float64
		min  float64 // least share of members reached per position, on average
	}{{15, 0, 0.9}, {50, 0, 0.9}, {1000, 0, 0.9}, {50, 0.1, 0.85}, {1000, 0.1, 0.85}} {
		t.Run(fmt.Sprintf("N=%d_loss=%.0f%%", tc.n, tc.loss*100), func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			s := newSimNet(t, tc.n, DefaultPosFanout, tc.loss, clock)
			const rounds = 40
			reached := 0
			var prev tags.Position
			for r := 1; r <= rounds; r++ {
				clock.Advance(PosWriterInterval)
				pos := mustPos(t, tags.Domain{ID: 0, Seq: uint64(100 + r)})
				before := s.sent
				s.publish(0, pos)
				perMember := float64(s.sent-before) / float64(tc.n)
				if perMember > float64(DefaultPosFanout)+0.01 {
					t.Fatalf("round %d: %.2f packets per member, more than the fanout", r, perMember)
				}
				for i := 1; i < tc.n; i++ {
					got, ok := s.node(i).Latest("n0")
					if ok && got.Pos == pos {
						reached++
						if got.Prev == prev && prev.Known() && got.At.Sub(got.PrevAt) != PosWriterInterval {
							t.Fatalf("node %d: Prev dated %s before, want %s", i, got.At.Sub(got.PrevAt), PosWriterInterval)
						}
					}
				}
				prev = pos
			}
			share := float64(reached) / float64(rounds*(tc.n-1))
			t.Logf("N=%d loss %.0f%%: %.1f %% of members reached per position, %.2f packets sent per member per position",
				tc.n, tc.loss*100, share*100, float64(s.sent)/float64(rounds*tc.n))
			if share < tc.min {
				t.Errorf("%.1f %% of members reached per position, want ≥ %.0f %%", share*100, tc.min*100)
			}
		})
	}
}

func TestPositionsPublishCadence(t *testing.T) {
	clock := clockwork.NewFakeClock()
	changed := 0
	p := NewPositions(PositionsConfig{Self: func() string { return "db1" }, Clock: clock, Peers: func() []PosPeer { return nil }, Changed: func() { changed++ },
		Send: func(netip.AddrPort, []byte) error { return nil }})
	pos := func(seq uint64) tags.Position { return mustPos(t, tags.Domain{ID: 0, Seq: seq}) }
	p.Publish(pos(1), true)
	p.Publish(pos(2), true) // too soon: held
	if got, _ := p.Latest("db1"); got.Pos != pos(1) {
		t.Fatalf("latest %v, want the first position (the second came too soon)", got.Pos)
	}
	clock.Advance(PosWriterInterval - PosWriterInterval/10)
	p.Publish(pos(3), true)
	got, _ := p.Latest("db1")
	if got.Pos != pos(3) || got.Prev != pos(1) || got.At.Sub(got.PrevAt) != PosWriterInterval-PosWriterInterval/10 {
		t.Fatalf("latest %+v, want position 3 after 1", got)
	}
	clock.Advance(PosWriterInterval)
	p.Publish(pos(4), false) // read-only: a second between positions
	if got, _ := p.Latest("db1"); got.Pos != pos(3) {
		t.Fatalf("a read-only server's position published %s after the last", PosWriterInterval)
	}
	p.Publish(tags.Position{}, true)
	if st := p.Stats(); st.Published != 2 || changed != 2 {
		t.Fatalf("published %d, changed %d, want 2 each (this agent's router recomputes with its own new position)", st.Published, changed)
	}
}

// TestPositionsKeepTheNewest: an older or repeated entry changes nothing
// and is not passed on; a restarted origin (a later epoch) starts anew.
func TestPositionsKeepTheNewest(t *testing.T) {
	clock := clockwork.NewFakeClock()
	sent := 0
	changed := 0
	p := NewPositions(PositionsConfig{Self: func() string { return "app1" }, Clock: clock, Changed: func() { changed++ },
		Peers: func() []PosPeer { return []PosPeer{{Name: "app2", Addr: netip.MustParseAddrPort("10.0.0.2:7946")}} },
		Send:  func(netip.AddrPort, []byte) error { sent++; return nil }})
	from := netip.MustParseAddrPort("10.0.0.9:7946")
	e := func(epoch, seq, at uint64) PosEntry {
		return PosEntry{Origin: "db1", Epoch: epoch, Seq: seq, Pos: mustPos(t, tags.Domain{ID: 0, Seq: at})}
	}
	for _, step := range []struct {
		e     PosEntry
		fresh bool
		want  uint64
	}{{e(5, 2, 20), true, 20}, {e(5, 2, 20), false, 20}, {e(5, 1, 10), false, 20}, {e(5, 3, 30), true, 30}, {e(6, 1, 5), true, 5}, {e(5, 9, 90), false, 5}} {
		sent, changed = 0, 0
		p.pass([]posInbound{{from: from, entries: []PosEntry{step.e}}})
		got, _ := p.Latest("db1")
		if seq, _ := got.Pos.Seq(0); seq != step.want || (sent == 1) != step.fresh || (changed == 1) != step.fresh {
			t.Errorf("after %+v: latest at %d (want %d), sent %d, changed %d (fresh %v)", step.e, seq, step.want, sent, changed, step.fresh)
		}
	}
	// An entry about this agent itself is never taken from others.
	p.pass([]posInbound{{from: from, entries: []PosEntry{{Origin: "app1", Epoch: 1, Seq: 1, Pos: mustPos(t, tags.Domain{ID: 0, Seq: 1})}}}})
	if _, ok := p.Latest("app1"); ok {
		t.Error("took a position about itself from another member")
	}
}

// TestPositionsQueueBounded: a flood of packets while the loop is busy
// is dropped and counted, never queued without bound.
func TestPositionsQueueBounded(t *testing.T) {
	p := NewPositions(PositionsConfig{Self: func() string { return "app1" }, Peers: func() []PosPeer { return nil },
		Send: func(netip.AddrPort, []byte) error { return nil }})
	from := netip.MustParseAddrPort("10.0.0.9:7946")
	for i := range posQueueLen + 10 {
		p.receive(from, []PosEntry{{Origin: "db1", Epoch: 1, Seq: uint64(i + 1), Pos: mustPos(t, tags.Domain{ID: 0, Seq: uint64(i + 1)})}})
	}
	if st := p.Stats(); st.QueueDropped != 10 || st.Received != posQueueLen+10 {
		t.Fatalf("stats %+v: want 10 dropped of %d", st, posQueueLen+10)
	}
}

// TestPositionsOverRealSerf: four serfs on shoal's Transport, encrypted
// and labelled; three carry shoal's role tag, the fourth (a stock serf
// agent in the same gossip) does not. A position published by db1
// reaches both shoal peers through the stream, never the stock agent,
// and memberlist never sees a stream packet. A packet sealed with another
// key is counted bad and changes nothing.
func TestPositionsOverRealSerf(t *testing.T) {
	names := []string{"db1", "app1", "app2", "serf1"}
	nodes := make([]*ownPingSerf, len(names))
	streams := make([]*Positions, len(names))
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	var app1Log testkit.SyncBuffer
	for i, name := range names {
		var tune func(*memberlist.Config)
		if name == "app1" {
			tune = func(mc *memberlist.Config) { mc.LogOutput = &app1Log }
		}
		nodes[i] = newOwnPingSerf(t, name, true, tune)
		if name != "serf1" {
			role := tags.RoleApp
			if name == "db1" {
				role = tags.RoleDB
			}
			if err := nodes[i].s.SetTags(map[string]string{tags.KeyRole: role}); err != nil {
				t.Fatal(err)
			}
		}
		n := nodes[i]
		streams[i] = NewSerfPositions(SerfPositionsConfig{Serf: func() *serf.Serf { return n.s }, Transport: func() *Transport { return n.tr }, Memberlist: n.mc})
		n.tr.SetPositions(streams[i])
		go streams[i].Run(done)
		if i > 0 {
			ln := nodes[0].s.Memberlist().LocalNode()
			if _, err := n.s.Join([]string{net.JoinHostPort(ln.Addr.String(), fmt.Sprint(ln.Port))}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	testkit.WaitFor(t, 10*time.Second, "every member sees every other with its tags", func() bool {
		for _, n := range nodes {
			roles := 0
			for _, m := range n.s.Members() {
				if m.Status == serf.StatusAlive && m.Tags[tags.KeyRole] != "" {
					roles++
				}
			}
			if roles != 3 {
				return false
			}
		}
		return true
	})
	pos := mustPos(t, tags.Domain{ID: 0, Seq: 4242})
	streams[0].Publish(pos, true)
	for i := 1; i <= 2; i++ {
		testkit.WaitFor(t, 5*time.Second, names[i]+" has db1's position", func() bool {
			s, ok := streams[i].Latest("db1")
			return ok && s.Pos == pos
		})
	}
	time.Sleep(200 * time.Millisecond)
	if st := streams[3].Stats(); st.Received != 0 || st.PacketsBad != 0 {
		t.Errorf("the stock serf agent got position packets: %+v", st)
	}

	// A packet sealed with another key, sent to app1.
	kr, err := memberlist.NewKeyring(nil, bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := sealOwn(appendPositions(nil, []PosEntry{{Origin: "db1", Epoch: 1 << 60, Seq: 1, Pos: mustPos(t, tags.Domain{ID: 0, Seq: 1})}}),
		packetSeal{keyring: kr, label: testLabel, encrypt: true, version: 1})
	if err != nil {
		t.Fatal(err)
	}
	to := nodes[1].s.Memberlist().LocalNode()
	if err := nodes[0].tr.writePacket(append([]byte{posMarker}, forged...), netip.AddrPortFrom(netip.MustParseAddr(to.Addr.String()), to.Port)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "app1 counts the forged packet", func() bool { return streams[1].Stats().PacketsBad == 1 })
	if s, _ := streams[1].Latest("db1"); s.Pos != pos {
		t.Errorf("app1 took the forged position: %v", s.Pos)
	}
	if l := app1Log.String(); strings.Contains(l, "[ERR]") || strings.Contains(l, "[WARN]") {
		t.Errorf("app1's memberlist saw something it could not read:\n%s", l)
	}
}
