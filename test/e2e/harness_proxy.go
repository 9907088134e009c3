//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DelayProxy is a TCP proxy inside a host's namespace that holds every
// chunk it forwards, in either direction, for an adjustable delay (0: none).
// Put between a db agent and its server (the agent's --mysql-addr pointing
// at the proxy) it slows that agent's probe alone: the packet delayer
// (harness_delay.go) works on eth0 and the probe talks over loopback.
//
// A request and its answer each wait the delay once, so a probe check of
// two statements on an open connection takes about four delays.
type DelayProxy struct {
	host   *Host
	target string
	ln     net.Listener
	delay  atomic.Int64 // nanoseconds

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
}

// StartDelayProxy listens on listen (e.g. 127.0.0.1:3316) in h's namespace
// and forwards each connection to target, dialed from the namespace too.
func (h *Host) StartDelayProxy(listen, target string) (*DelayProxy, error) {
	p := &DelayProxy{host: h, target: target, conns: map[net.Conn]struct{}{}}
	var err error
	if e := h.dialer.do(func() { p.ln, err = net.Listen("tcp", listen) }); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, fmt.Errorf("delay proxy in %s: %w", h.NS, err)
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// SetDelay sets the delay of every chunk forwarded from now on.
func (p *DelayProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Delay is the current delay.
func (p *DelayProxy) Delay() time.Duration { return time.Duration(p.delay.Load()) }

func (p *DelayProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

// track remembers a connection for Close; false when the proxy is closed.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *DelayProxy) serve(in net.Conn) {
	defer p.wg.Done()
	if !p.track(in) {
		in.Close()
		return
	}
	defer p.untrack(in)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	out, err := p.host.dialer.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil || !p.track(out) {
		if out != nil {
			out.Close()
		}
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { p.pipe(out, in); done <- struct{}{} }()
	go func() { p.pipe(in, out); done <- struct{}{} }()
	<-done // one side ended: end both, and wait for the other copy
	in.Close()
	out.Close()
	<-done
}

// pipe copies src to dst, each chunk held for the delay current when it
// was read.
func (p *DelayProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.Delay(); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a side closed
		}
	}
}

// Close stops listening and closes every connection. Idempotent.
func (p *DelayProxy) Close() {
	p.once.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}
