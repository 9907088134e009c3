package gossip

import (
	"encoding/binary"
	"io"
	"log"
	"net"
	"strconv"
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
