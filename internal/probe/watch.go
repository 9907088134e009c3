package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errUnsolicited means the server sent bytes while no statement was running
// (an error packet before closing, typically): the protocol stream is no
// longer in a known state.
var errUnsolicited = errors.New("server sent data on an idle connection")

// errNoWatch means the socket cannot be watched (not a syscall.Conn).
var errNoWatch = errors.New("socket cannot be watched")

// watchIdle waits until the deadline `until` while the connection is idle,
// and returns early with an error if the server closes or resets it, or
// sends anything. It returns nil when the deadline passes or ctx is done.
//
// It parks in the runtime netpoller (epoll) on the socket and peeks with
// MSG_PEEK|MSG_DONTWAIT when the socket becomes readable: a FIN reads as 0
// bytes (io.EOF), an RST as ECONNRESET. Nothing is consumed, no statement is
// sent, and no goroutine or timer is left behind. The read deadline it sets
// is harmless to the driver, which sets its own before every read.
func watchIdle(ctx context.Context, nc net.Conn, until time.Time) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return errNoWatch
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return errNoWatch
	}
	if err := nc.SetReadDeadline(until); err != nil {
		return err
	}
	// Close (ctx done) ends the wait by moving the deadline to the past.
	// It runs on a goroutine of its own: before watchIdle returns, it
	// must have run to its end or never start, and the deadline is then
	// cleared. Else a late one moves the deadline of the check that
	// follows to the past, and the driver's next read fails ("invalid
	// connection": seen in CI on a loaded machine, a reconnect at the
	// first check after an idle wait).
	ended := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(ended)
		_ = nc.SetReadDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stop() {
			<-ended
		}
		_ = nc.SetReadDeadline(time.Time{})
	}()

	var peekErr error
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return false // nothing yet: wait for readability
		case err != nil:
			peekErr = err
		case n == 0:
			peekErr = io.EOF
		default:
			peekErr = errUnsolicited
		}
		return true
	})
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		return err
	}
	return peekErr
}
