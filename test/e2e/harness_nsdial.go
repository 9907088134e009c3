//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// nsDialer opens TCP connections from inside a network namespace, so the
// test process (in the root namespace, which has no address in the test
// range) can reach a host's agent or HAProxy over the host's own loopback
// routing: link cuts, partitions and packet loss on eth0 never hide a host
// from the observer.
//
// A socket belongs to the namespace of the thread that created it, and only
// creating it needs the namespace: a few goroutines locked to OS threads
// that setns()'d into the namespace create the connections, which any
// goroutine may then use. Those threads are never unlocked, so the runtime
// discards them when the goroutines end (and it never clones a new thread
// from a locked one), keeping the rest of the process in the root
// namespace.
type nsDialer struct {
	jobs chan func()
	quit chan struct{}
	once sync.Once
}

// dialThreads bounds concurrent jobs (connection set-ups, socket creation)
// per namespace; they are local and fast.
const dialThreads = 2

func newNSDialer(nsPath string) (*nsDialer, error) {
	d := &nsDialer{jobs: make(chan func()), quit: make(chan struct{})}
	errc := make(chan error, dialThreads)
	for range dialThreads {
		go d.serve(nsPath, errc)
	}
	for range dialThreads {
		if err := <-errc; err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

func (d *nsDialer) serve(nsPath string, errc chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread leaves the root namespace
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		errc <- fmt.Errorf("open %s: %w", nsPath, err)
		return
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		errc <- fmt.Errorf("setns %s: %w", nsPath, err)
		return
	}
	errc <- nil
	for {
		select {
		case job := <-d.jobs:
			job()
		case <-d.quit:
			return
		}
	}
}

// do runs f on a thread inside the namespace and waits for it.
func (d *nsDialer) do(f func()) error {
	done := make(chan struct{})
	select {
	case d.jobs <- func() { f(); close(done) }:
	case <-d.quit:
		return fmt.Errorf("namespace threads closed")
	}
	<-done
	return nil
}

// DialContext connects to addr from inside the namespace.
func (d *nsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	resp := make(chan result, 1)
	job := func() {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, addr)
		resp <- result{c, err}
	}
	select {
	case d.jobs <- job:
	case <-d.quit:
		return nil, fmt.Errorf("dial %s: namespace dialer closed", addr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case res := <-resp:
		return res.conn, res.err
	case <-ctx.Done():
		go func() { // the dial may still succeed: do not leak it
			if res := <-resp; res.conn != nil {
				res.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (d *nsDialer) close() {
	d.once.Do(func() { close(d.quit) })
}
