package cli

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// errNotLocal: the far end of a connection is not a socket of this host
// (of this network namespace).
var errNotLocal = errors.New("not a socket of this host")

// socketTables are the kernel's TCP socket tables of this network
// namespace; an IPv4 connection may be served by an IPv6 socket.
var socketTables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// peerUID returns the uid owning the socket at the far end of conn: the
// entry of this host's socket table whose local address is conn's remote
// one and whose remote address is conn's local one (an accepted
// connection, or one still in the listener's queue, carries the
// listener's owner). It looks a few times: on a loose loopback the server
// side may show up a moment after connect returns.
func peerUID(conn net.Conn) (int, error) {
	local, lok := conn.LocalAddr().(*net.TCPAddr)
	remote, rok := conn.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("not a TCP connection (%s)", conn.RemoteAddr())
	}
	if local.IP.Equal(remote.IP) && local.Port == remote.Port {
		return 0, errors.New("the connection is to itself")
	}
	for try := 0; ; try++ {
		for _, table := range socketTables {
			uid, err := findSocket(table, remote, local)
			if err == nil || !errors.Is(err, errNotLocal) {
				return uid, err
			}
		}
		if try == 4 {
			return 0, errNotLocal
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findSocket finds the socket bound to local and connected to remote in
// a /proc/net/tcp-style table and returns its uid.
func findSocket(table string, local, remote *net.TCPAddr) (int, error) {
	f, err := os.Open(table)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errNotLocal // no IPv6 here
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !sameAddr(fields[1], local) || !sameAddr(fields[2], remote) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return 0, fmt.Errorf("%s: uid %q", table, fields[7])
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errNotLocal
}

// sameAddr reports whether a table address (hex IP in the kernel's word
// order, ':', hex port) is a.
func sameAddr(field string, a *net.TCPAddr) bool {
	ipHex, portHex, ok := strings.Cut(field, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != net.IPv4len && len(raw) != net.IPv6len) {
		return false
	}
	// Each 32-bit word is printed as a number in host byte order.
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return ip.Equal(a.IP)
}
