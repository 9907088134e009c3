// Package ports finds free loopback ports for tests.
package ports

import (
	"net"
	"testing"
)

// Free returns a 127.0.0.1 address whose port is free for both TCP and UDP
// (gossip uses both) at the time of the call.
func Free(t testing.TB) string {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if u, err := net.ListenPacket("udp", addr); err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port on 127.0.0.1 for both TCP and UDP")
	return ""
}
