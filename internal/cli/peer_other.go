//go:build !linux

package cli

import (
	"errors"
	"net"
)

// errNotLocal: the far end of a connection is not a socket of this host.
var errNotLocal = errors.New("not a socket of this host")

// peerUID cannot tell who serves a connection on this system: a token
// read from a file is not sent (pass --token).
func peerUID(net.Conn) (int, error) {
	return 0, errors.New("this system does not tell which user serves a TCP port")
}
