package gossip

import (
	"bytes"
	"crypto/rand"
	"io"
	"log"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// Every packet handed to memberlist must own its bytes: the read buffer is
// reused, so a later packet must not change an earlier one.
func TestTransportPacketsOwnTheirBytes(t *testing.T) {
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) || port == 0 {
		t.Fatalf("advertise %v:%d, %v", ip, port, err)
	}
	to := memberlist.Address{Addr: net.JoinHostPort(ip.String(), strconv.Itoa(port))}
	first, second := bytes.Repeat([]byte{'a'}, 300), bytes.Repeat([]byte{'b'}, 1200)
	for _, b := range [][]byte{first, second} {
		if _, err := tr.WriteToAddress(b, to); err != nil {
			t.Fatal(err)
		}
	}
	var got []*memberlist.Packet
	for len(got) < 2 {
		select {
		case p := <-tr.PacketCh():
			got = append(got, p)
		case <-time.After(5 * time.Second):
			t.Fatalf("received %d of 2 packets", len(got))
		}
	}
	if !bytes.Equal(got[0].Buf, first) || !bytes.Equal(got[1].Buf, second) {
		t.Fatalf("packets changed: %q... (%d bytes), %q... (%d bytes)", got[0].Buf[:4], len(got[0].Buf), got[1].Buf[:4], len(got[1].Buf))
	}
	if cap(got[0].Buf) != len(first) {
		t.Errorf("packet buffer cap %d for %d bytes: not copied at its size", cap(got[0].Buf), len(first))
	}
	// Streams: a TCP dial reaches StreamCh.
	c, err := tr.DialAddressTimeout(to, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case s := <-tr.StreamCh():
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no stream")
	}
	// Shutdown ends both loops; a second one is harmless.
	if err := tr.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// Watch fires on the next packet from the watched address only, and a
// stopped or fired watch leaves nothing behind.
func TestTransportWatch(t *testing.T) {
	tr := watchedTransport(t, nil)
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: tr.port}
	member, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	heard, stop := tr.Watch(member.LocalAddr().(*net.UDPAddr).AddrPort())
	defer stop()
	_, stopIdle := tr.Watch(netip.MustParseAddrPort("127.0.0.1:1"))
	if _, err := other.WriteTo([]byte("x"), to); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
		t.Fatal("fired on a packet from another address")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := member.WriteTo([]byte("x"), to); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up on a packet from the watched address")
	}
	if ago, ok := tr.HeardSince(member.LocalAddr().(*net.UDPAddr).AddrPort()); !ok || ago > 5*time.Second {
		t.Fatalf("HeardSince = %s, %v", ago, ok)
	}
	if _, ok := tr.HeardSince(netip.MustParseAddrPort("127.0.0.1:1")); ok {
		t.Fatal("HeardSince for an address never heard from")
	}
	stop()
	stopIdle()
	if n := tr.nwatch.Load(); n != 0 || len(tr.watches) != 0 {
		t.Fatalf("%d watches (%d addresses) left", n, len(tr.watches))
	}
}

// With gossip encryption, only packets sealed with a key of the keyring
// count as heard from their source address: random bytes from an address
// neither wake its watchers nor set HeardSince, a real memberlist packet
// sealed with a keyring key does, and a key added at runtime (rotation)
// counts from then on.
func TestTransportCountsOnlyKeyHolders(t *testing.T) {
	keyA, keyB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	kr, err := memberlist.NewKeyring(nil, keyA)
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Keyring = kr
	tr := watchedTransport(t, newKeyCheck(mc))
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: tr.port}

	forger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	forgerAddr := forger.LocalAddr().(*net.UDPAddr).AddrPort()
	heard, stop := tr.Watch(forgerAddr)
	defer stop()
	for i := range 50 {
		b := make([]byte, 1+i*29)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		b[0] = byte(i % 3) // encryption versions 0 and 1, and a bad one
		if _, err := forger.WriteTo(b, to); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-heard:
		t.Fatal("random bytes woke the watch")
	case <-time.After(300 * time.Millisecond):
	}
	if ago, ok := tr.HeardSince(forgerAddr); ok {
		t.Fatalf("random bytes counted: HeardSince = %s", ago)
	}

	// A real memberlist with key A pings the transport: its packet counts.
	ping := func(ml *memberlist.Memberlist) {
		go func() { _, _ = ml.Ping("transport", to) }() // unanswered: it times out
	}
	newML := func(name string, key []byte) (*memberlist.Memberlist, netip.AddrPort) {
		t.Helper()
		c := memberlist.DefaultLocalConfig()
		c.Name = name
		c.BindAddr, c.BindPort = "127.0.0.1", 0
		c.LogOutput = io.Discard
		k, err := memberlist.NewKeyring(nil, key)
		if err != nil {
			t.Fatal(err)
		}
		c.Keyring = k
		ml, err := memberlist.Create(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ml.Shutdown() })
		return ml, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ml.LocalNode().Port)
	}
	mlA, addrA := newML("holder-a", keyA)
	heardA, stopA := tr.Watch(addrA)
	defer stopA()
	ping(mlA)
	select {
	case <-heardA:
	case <-time.After(5 * time.Second):
		t.Fatal("a packet sealed with a keyring key did not wake the watch")
	}
	if ago, ok := tr.HeardSince(addrA); !ok || ago > 5*time.Second {
		t.Fatalf("HeardSince after a key holder's packet = %s, %v", ago, ok)
	}

	// Key B is not in the keyring yet: not counted; once added, counted.
	mlB, addrB := newML("holder-b", keyB)
	heardB, stopB := tr.Watch(addrB)
	defer stopB()
	ping(mlB)
	select {
	case <-heardB:
		t.Fatal("a packet sealed with a key outside the keyring woke the watch")
	case <-time.After(500 * time.Millisecond):
	}
	if err := kr.AddKey(keyB); err != nil {
		t.Fatal(err)
	}
	ping(mlB)
	select {
	case <-heardB:
	case <-time.After(5 * time.Second):
		t.Fatal("a packet sealed with a key added at runtime did not count")
	}
}

// watchedTransport is a transport on 127.0.0.1 whose packets are drained
// (the tests look at what it heard, not at what it hands to memberlist),
// shut down when the test ends.
func watchedTransport(t *testing.T, kc *keyCheck) *Transport {
	t.Helper()
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0), kc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	go func() {
		for range tr.PacketCh() {
		}
	}()
	return tr
}
