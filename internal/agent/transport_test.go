package agent

import (
	"bytes"
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
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0))
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
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	go func() {
		for range tr.PacketCh() {
		}
	}()
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
