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

// NSDialer opens TCP connections from inside a network namespace, so the
// test process (in the root namespace, which has no address in the test
// range) can reach a host's agent or HAProxy over the host's own loopback
// routing: link cuts, partitions and packet loss on eth0 never hide a host
// from the observer. The benchmarks use it too, for their load clients.
//
// A socket belongs to the namespace of the thread that created it, and only
// creating it needs the namespace: a few goroutines locked to OS threads
// that setns()'d into the namespace create the connections, which any
// goroutine may then use. Those threads are never unlocked, so the runtime
// discards them when the goroutines end (and it never clones a new thread
// from a locked one), keeping the rest of the process in the root
// namespace.
type NSDialer struct {
	jobs chan func()
	quit chan struct{}
	once sync.Once
}

// dialThreads bounds concurrent jobs (connection set-ups, socket creation)
// per namespace for the harness's own dialers; they are local and fast.
const dialThreads = 2

// newNSDialer is the harness's dialer for a host: dialThreads workers.
func newNSDialer(nsPath string) (*NSDialer, error) {
	return NewNSDialer(nsPath, dialThreads)
}

// NewNSDialer enters the namespace at nsPath (e.g. /run/netns/<name>) with
// the given number of worker threads. Each dial holds a worker until it
// connects or fails, so a caller that opens many connections at once (an
// open-loop client) asks for more workers, lest its dials queue behind one
// another.
func NewNSDialer(nsPath string, workers int) (*NSDialer, error) {
	if workers < 1 {
		return nil, fmt.Errorf("namespace dialer %s: %d workers, want at least 1", nsPath, workers)
	}
	d := &NSDialer{jobs: make(chan func()), quit: make(chan struct{})}
	errc := make(chan error, workers)
	for range workers {
		go d.serve(nsPath, errc)
	}
	for range workers {
		if err := <-errc; err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

func (d *NSDialer) serve(nsPath string, errc chan<- error) {
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
func (d *NSDialer) do(f func()) error {
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
func (d *NSDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.DialFromContext(ctx, nil, network, addr)
}

// DialFromContext connects to addr from inside the namespace, from the
// local address local (nil: the kernel's choice).
func (d *NSDialer) DialFromContext(ctx context.Context, local net.Addr, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	resp := make(chan result, 1)
	job := func() {
		nd := net.Dialer{LocalAddr: local}
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

// Close stops the namespace threads; dials already under way finish.
// Idempotent.
func (d *NSDialer) Close() {
	d.once.Do(func() { close(d.quit) })
}
