package cli

import (
	"encoding/binary"
	"net"
	"testing"
)

// TestSocketTableAddrs: the socket table's addresses parse in the
// kernel's byte order (the literals are a little-endian host's).
func TestSocketTableAddrs(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the literals are a little-endian host's table")
	}
	v4 := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8946}
	v6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 8946}
	for field, want := range map[string]*net.TCPAddr{
		"0100007F:22F2": v4, "00000000000000000000000001000000:22F2": v6,
		"0000000000000000FFFF00000100007F:22F2": v4, // an IPv4 client of an IPv6 socket
	} {
		if !sameAddr(field, want) {
			t.Errorf("sameAddr(%q, %s) = false", field, want)
		}
	}
	for _, field := range []string{"0100007F:22F3", "0200007F:22F2", "zz:22F2", "0100007F", ""} {
		if sameAddr(field, v4) {
			t.Errorf("sameAddr(%q, %s) = true", field, v4)
		}
	}
}
