// Package ports finds free loopback ports for tests.
package ports

import (
	"net"
	"sync"
	"testing"
)

// given holds every address Free returned in this process: the kernel may
// hand the same ephemeral port out again once its probe socket is closed,
// and a test that asks for several ports before starting the processes
// that bind them would then give two of them the same one (seen in CI:
// two agents of one test got the same HTTP port).
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// Free returns a 127.0.0.1 address whose port is free for both TCP and UDP
// (gossip uses both) at the time of the call, and that no earlier call in
// this process returned.
func Free(t testing.TB) string {
	t.Helper()
	given.Lock()
	defer given.Unlock()
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if given.addrs[addr] {
			continue
		}
		if u, err := net.ListenPacket("udp", addr); err == nil {
			u.Close()
			given.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no free port on 127.0.0.1 for both TCP and UDP")
	return ""
}
