//go:build !linux

package gossip

import "net"

// readFromUDP and writeToUDP are the net package's calls on systems other
// than Linux (see rawudp_linux.go).
func readFromUDP(c *net.UDPConn, b []byte) (int, *net.UDPAddr, error) { return c.ReadFromUDP(b) }

func writeToUDP(c *net.UDPConn, b []byte, addr *net.UDPAddr) (int, error) {
	return c.WriteToUDP(b, addr)
}
