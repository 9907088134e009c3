package gossip

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// TestRawUDP sends datagrams both ways between two sockets with
// writeToUDP and reads them with readFromUDP (IPv4 and IPv6 loopback),
// checking the payload and the sender's address and port.
func TestRawUDP(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1:0"
			if network == "udp6" {
				host = "[::1]:0"
			}
			a, err := net.ListenUDP(network, mustUDPAddr(t, host))
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer a.Close()
			b, err := net.ListenUDP(network, mustUDPAddr(t, host))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for i, size := range []int{1, 100, 1400} {
				msg := bytes.Repeat([]byte{byte(i + 1)}, size)
				if n, err := writeToUDP(a, msg, b.LocalAddr().(*net.UDPAddr)); err != nil || n != size {
					t.Fatalf("write %d bytes: n=%d err=%v", size, n, err)
				}
				done := make(chan struct{})
				go func() {
					select {
					case <-done:
					case <-time.After(5 * time.Second):
						b.Close() // unblocks the read below
					}
				}()
				buf := make([]byte, 2048)
				n, from, err := readFromUDP(b, buf)
				close(done)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if !bytes.Equal(buf[:n], msg) {
					t.Fatalf("read %d bytes, want %d of %d", n, size, i+1)
				}
				want := a.LocalAddr().(*net.UDPAddr).AddrPort()
				if from.AddrPort() != want {
					t.Fatalf("from %s, want %s", from, want)
				}
			}
			// A closed socket ends a read with an error, not a hang.
			errc := make(chan error, 1)
			go func() {
				_, _, err := readFromUDP(b, make([]byte, 10))
				errc <- err
			}()
			time.Sleep(50 * time.Millisecond)
			b.Close()
			select {
			case err := <-errc:
				if err == nil {
					t.Fatal("read on a closed socket returned no error")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("read on a closed socket did not return")
			}
		})
	}
}

func mustUDPAddr(t *testing.T, s string) *net.UDPAddr {
	t.Helper()
	a, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
