package gossip

import (
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func encHeader(n uint32) []byte {
	b := []byte{memberlistEncryptMsg, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

func TestStreamHeader(t *testing.T) {
	label := append([]byte{memberlistHasLabelMsg, 3}, "abc"...)
	for _, tc := range []struct {
		name   string
		in     []byte
		reason string // "" passes
	}{
		{"small encrypted", encHeader(1000), ""},
		{"at the limit", encHeader(4096), ""},
		{"over the limit", encHeader(4097), rejectTooLarge},
		{"20 MB", encHeader(20 << 20), rejectTooLarge},
		{"label, then over", append(append([]byte{}, label...), encHeader(1<<20)...), rejectTooLarge},
		{"label, then small", append(append([]byte{}, label...), encHeader(10)...), ""},
		{"empty label", []byte{memberlistHasLabelMsg, 0, 10}, rejectBadHeader},
		{"plaintext ping", []byte{0, 0x81, 0xff, 0xff, 0xff, 0xff}, ""},
		{"plaintext push-pull", []byte{6, 0xff, 0xff, 0xff, 0xff}, ""},
	} {
		// Fed whole and byte by byte: the split must not matter.
		for _, split := range []bool{false, true} {
			var h streamHeader
			var err *headerError
			if split {
				for i := range tc.in {
					if err = h.feed(tc.in[i:i+1], 4096); err != nil {
						break
					}
				}
			} else {
				err = h.feed(tc.in, 4096)
			}
			got := ""
			if err != nil {
				got = err.reason
			}
			if got != tc.reason {
				t.Errorf("%s (split %v): reason %q, want %q (%v)", tc.name, split, got, tc.reason, err)
			}
		}
	}
}

// limitedTransport is a transport on loopback with lim as its stream
// limits, and the address to dial it.
func limitedTransport(t *testing.T, lim streamLimits) (*Transport, string) {
	t.Helper()
	tr, err := newTransportLimits("127.0.0.1", 0, log.New(io.Discard, "", 0), nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown() })
	return tr, net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.port))
}

func nextStream(t *testing.T, tr *Transport) net.Conn {
	t.Helper()
	select {
	case s := <-tr.StreamCh():
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no stream reached StreamCh")
		return nil
	}
}

// TestStreamLimits: with the limits lowered, a stream over the count per
// address is closed at once, one declaring too much and one reading past
// the budget fail their read, and closing streams gives their share back.
func TestStreamLimits(t *testing.T) {
	tr, addr := limitedTransport(t, streamLimits{streams: 8, perIP: 2, bytes: 1000, budget: 1500, budgetPerIP: 1500})
	dial := func() net.Conn {
		c, err := tr.DialAddressTimeout(memberlist.Address{Addr: addr}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(), dial()
	s1, s2 := nextStream(t, tr), nextStream(t, tr)
	c3 := dial() // the third from 127.0.0.1: closed by the transport
	c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c3.Read(make([]byte, 1)); err == nil {
		t.Fatal("third stream from one address was not closed")
	}
	if tr.rejected.get(rejectPerIP) != 1 {
		t.Errorf("per_ip rejections %d, want 1", tr.rejected.get(rejectPerIP))
	}

	// s1 declares 20 MB.
	c1.Write(encHeader(20 << 20))
	if _, err := io.ReadAll(s1); err == nil || tr.rejected.get(rejectTooLarge) != 1 {
		t.Errorf("20 MB declared: read error %v, too_large %d", err, tr.rejected.get(rejectTooLarge))
	}
	// s2 sends 900 bytes (allowed), keeps them charged; s1 closed.
	c2.Write(append(encHeader(900), make([]byte, 895)...))
	if _, err := io.ReadFull(s2, make([]byte, 900)); err != nil {
		t.Fatalf("900 bytes within the limits: %v", err)
	}
	s1.Close()
	c4 := dial()
	s4 := nextStream(t, tr)
	c4.Write(append(encHeader(900), make([]byte, 895)...)) // 1800 > budget 1500
	if _, err := io.ReadFull(s4, make([]byte, 900)); err == nil || tr.rejected.get(rejectBudget) != 1 {
		t.Errorf("past the budget: read error %v, budget %d", err, tr.rejected.get(rejectBudget))
	}
	s4.Close()
	s2.Close()
	tr.limits.mu.Lock()
	open, used, ips := tr.limits.open, tr.limits.used, len(tr.limits.perIP)
	tr.limits.mu.Unlock()
	if open != 0 || used != 0 || ips != 0 {
		t.Errorf("after closing every stream: open %d, used %d, addresses %d", open, used, ips)
	}
}

// fakeNow is a clock a test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// dialFrom connects to addr from the loopback address from (127.0.0.0/8
// is all local on Linux).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the transport closed c (within 5 s).
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestStrangerStreamLimits: streams from addresses that are no member's
// have their own slots (a stranger cannot take the members'), their own
// per-stream size, accept rates in all and per address, and a deadline
// memberlist cannot extend; a member's address keeps the members' limits.
func TestStrangerStreamLimits(t *testing.T) {
	clock := &fakeNow{t: time.Unix(1000, 0)}
	tr, addr := limitedTransport(t, streamLimits{streams: 8, perIP: 8, bytes: 1 << 20, budget: 8 << 20, budgetPerIP: 8 << 20,
		stranger: strangerLimits{streams: 3, perIP: 2, bytes: 1000, rate: 2, ratePerIP: 1, time: 300 * time.Millisecond}})
	tr.limits.now = clock.now
	tr.limits.rate = newBucket(2, clock.now())
	tr.members.now = clock.now
	tr.SetMembers(func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("127.0.0.9")} })

	// 127.0.0.2 is a stranger: 2 at once (its burst is 2 too), the third
	// closed at once.
	c1, c2 := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)
	s1, s2 := nextStream(t, tr), nextStream(t, tr)
	if c3 := dialFrom(t, "127.0.0.2", addr); !closedByPeer(c3) || tr.rejected.get(rejectPerIP) != 1 {
		t.Fatalf("a third stranger's stream from one address was not closed (per_ip %d)", tr.rejected.get(rejectPerIP))
	}
	// A stranger's stream may not declare more than its limit...
	c1.Write(encHeader(2000))
	if _, err := io.ReadAll(s1); err == nil || tr.rejected.get(rejectTooLarge) != 1 {
		t.Errorf("2000 bytes declared by a stranger: read error %v, too_large %d", err, tr.rejected.get(rejectTooLarge))
	}
	s1.Close()
	// ...nor hold its stream past its time, whatever deadline is set.
	s2.SetDeadline(time.Now().Add(10 * time.Second))
	c2.Write(encHeader(900))
	start := time.Now()
	if _, err := io.ReadFull(s2, make([]byte, 900)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a trickling stranger's stream: read error %v, want a deadline", err)
	} else if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a trickling stranger's stream ended after %s, want about 300ms", took)
	}
	s2.Close()

	// 127.0.0.2's bucket is empty (burst 2, 1 a second): refused, before
	// any slot; after a second, one more.
	if c := dialFrom(t, "127.0.0.2", addr); !closedByPeer(c) || tr.rejected.get(rejectRate) != 1 {
		t.Fatalf("a stranger over its accept rate was not closed (rate %d)", tr.rejected.get(rejectRate))
	}
	clock.add(time.Second)
	dialFrom(t, "127.0.0.2", addr)
	nextStream(t, tr).Close()
	// The strangers' bucket in all (burst 4, 2 a second; full again after
	// the second) is empty after 3 more from other addresses.
	for _, from := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		dialFrom(t, from, addr)
		nextStream(t, tr).Close()
	}
	if c := dialFrom(t, "127.0.0.6", addr); !closedByPeer(c) || tr.rejected.get(rejectRate) != 2 {
		t.Fatalf("a stranger over the strangers' accept rate was not closed (rate %d)", tr.rejected.get(rejectRate))
	}

	// A member's address has the members' limits: 5 at once, no rate,
	// 100 KB, while strangers are refused.
	for range 5 {
		c := dialFrom(t, "127.0.0.9", addr)
		c.Write(append(encHeader(100_000), make([]byte, 100_000)...))
		s := nextStream(t, tr)
		if _, err := io.ReadFull(s, make([]byte, 100_005)); err != nil {
			t.Fatalf("a member's 100 KB stream: %v", err)
		}
		defer s.Close()
	}

	tr.limits.mu.Lock()
	strangers, ips := len(tr.limits.strangerQ), len(tr.limits.strangerIP)
	tr.limits.mu.Unlock()
	if strangers != 0 || ips != 0 {
		t.Errorf("after closing every stranger's stream: %d open, %d addresses", strangers, ips)
	}
}

// TestMemberAddrs: the members' addresses are asked for again on a miss,
// at most every memberRefresh; without a source everyone is a member.
func TestMemberAddrs(t *testing.T) {
	clock := &fakeNow{t: time.Unix(1000, 0)}
	m := memberAddrs{now: clock.now}
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	if !m.member(b) {
		t.Fatal("without a source, an address is not a member's")
	}
	asked := 0
	known := []netip.Addr{a}
	m.src = func() []netip.Addr { asked++; return known }
	if !m.member(a) || m.member(b) || asked != 1 {
		t.Fatalf("member(a), member(b): asked %d times, want 1", asked)
	}
	known = append(known, netip.AddrFrom16(b.As16())) // a mapped form is the same address
	for range 100 {
		m.member(b)
	}
	if asked != 1 {
		t.Fatalf("misses within %s asked %d times, want 1", memberRefresh, asked)
	}
	clock.add(memberRefresh)
	if !m.member(b) || asked != 2 {
		t.Fatalf("after %s: member(b) false or asked %d times, want 2", memberRefresh, asked)
	}
}

// TestStrangerEvictsOldest: when the strangers' slots are all taken, a new
// stranger's stream cuts the oldest one (a trickling flood cannot keep a
// new member's join out); the others are untouched.
func TestStrangerEvictsOldest(t *testing.T) {
	tr, addr := limitedTransport(t, streamLimits{streams: 8, perIP: 8, bytes: 1 << 20, budget: 8 << 20, budgetPerIP: 8 << 20,
		stranger: strangerLimits{streams: 2, perIP: 2, bytes: 1000, rate: 100, ratePerIP: 100, time: 5 * time.Second}})
	tr.SetMembers(func() []netip.Addr { return nil })
	c1 := dialFrom(t, "127.0.0.2", addr)
	s1 := nextStream(t, tr)
	dialFrom(t, "127.0.0.3", addr)
	s2 := nextStream(t, tr)
	c3 := dialFrom(t, "127.0.0.4", addr)
	s3 := nextStream(t, tr)
	if !closedByPeer(c1) || tr.rejected.get(rejectEvicted) != 1 {
		t.Fatalf("the oldest stranger's stream was not cut for a new one (evicted %d)", tr.rejected.get(rejectEvicted))
	}
	if _, err := s1.Read(make([]byte, 1)); err == nil {
		t.Error("the evicted stream still reads")
	}
	c3.Write(append(encHeader(10), make([]byte, 10)...))
	if _, err := io.ReadFull(s3, make([]byte, 15)); err != nil {
		t.Errorf("the new stranger's stream: %v", err)
	}
	for _, s := range []net.Conn{s1, s2, s3} {
		s.Close()
	}
	tr.limits.mu.Lock()
	strangers, ips := len(tr.limits.strangerQ), len(tr.limits.strangerIP)
	tr.limits.mu.Unlock()
	if strangers != 0 || ips != 0 {
		t.Errorf("after closing every stranger's stream: %d open, %d addresses", strangers, ips)
	}
}
