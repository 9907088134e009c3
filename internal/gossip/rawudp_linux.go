//go:build linux

package gossip

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

// readFromUDP and writeToUDP are net.UDPConn's ReadFrom and WriteTo done
// with raw system calls on the socket's non-blocking descriptor, waiting
// for readiness through the runtime's poller (syscall.RawConn) as the net
// package does.
//
// Why: an idle agent is a series of short bursts (a timer, a packet), and
// with `fast` about 45 of them a second. A system call made through
// syscall.Syscall (what the net package uses) wakes the runtime's sysmon
// thread whenever it sleeps because every P is idle, and sysmon then spins
// on 20 µs sleeps while the burst lasts: measured, 140 of the 470 system
// calls a second of an idle `fast` agent were sysmon's nanosleep, most of
// the agent's CPU being thread wake-ups, not work. recvfrom and sendto on a
// non-blocking UDP socket never block, so a raw call (no entersyscall, no
// sysmon wake-up) is safe: EAGAIN hands the wait back to the poller.
func readFromUDP(c *net.UDPConn, b []byte) (int, *net.UDPAddr, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, nil, err
	}
	var (
		n     int
		from  netip.AddrPort
		errno syscall.Errno
	)
	err = rc.Read(func(fd uintptr) bool {
		for {
			var rsa syscall.RawSockaddrAny
			l := uint32(syscall.SizeofSockaddrAny)
			var p unsafe.Pointer
			if len(b) > 0 {
				p = unsafe.Pointer(&b[0])
			}
			r, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(p), uintptr(len(b)), 0,
				uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until readable
			}
			n, errno, from = int(r), e, addrPortOf(&rsa)
			return true
		}
	})
	if err != nil {
		return 0, nil, err
	}
	if errno != 0 {
		return 0, nil, fmt.Errorf("recvfrom: %w", errno)
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// writeToUDP sends b to addr (see readFromUDP).
func writeToUDP(c *net.UDPConn, b []byte, addr *net.UDPAddr) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	ap := addr.AddrPort()
	var (
		sa    unsafe.Pointer
		salen uintptr
		sa4   syscall.RawSockaddrInet4
		sa6   syscall.RawSockaddrInet6
	)
	local, ok := c.LocalAddr().(*net.UDPAddr)
	v6sock := ok && local.IP.To4() == nil
	port := ap.Port()
	if a := ap.Addr().Unmap(); a.Is4() && !v6sock {
		sa4.Family = syscall.AF_INET
		putPort(&sa4.Port, port)
		sa4.Addr = a.As4()
		sa, salen = unsafe.Pointer(&sa4), unsafe.Sizeof(sa4)
	} else {
		sa6.Family = syscall.AF_INET6
		putPort(&sa6.Port, port)
		sa6.Addr = ap.Addr().As16()
		sa, salen = unsafe.Pointer(&sa6), unsafe.Sizeof(sa6)
	}
	var (
		n     int
		errno syscall.Errno
	)
	err = rc.Write(func(fd uintptr) bool {
		for {
			var p unsafe.Pointer
			if len(b) > 0 {
				p = unsafe.Pointer(&b[0])
			}
			r, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(p), uintptr(len(b)), 0, uintptr(sa), salen)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until writable
			}
			n, errno = int(r), e
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, fmt.Errorf("sendto %s: %w", ap, errno)
	}
	return n, nil
}

// addrPortOf decodes a sockaddr_in or sockaddr_in6 (IPv4-mapped addresses
// unmapped); anything else is the zero AddrPort.
func addrPortOf(rsa *syscall.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case syscall.AF_INET:
		sa := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), getPort(&sa.Port))
	case syscall.AF_INET6:
		sa := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), getPort(&sa.Port))
	}
	return netip.AddrPort{}
}

// putPort and getPort write and read a sockaddr's port, which is in
// network byte order whatever the host's.
func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}

func getPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}
