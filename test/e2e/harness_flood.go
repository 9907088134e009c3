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

// ConnFlood is a stranger's flood of TCP ports, as one without any key can
// make it: for each target it opens up to Hold idle connections at once and
// sends nothing on them. When the target closes one it had held (for at
// least floodHeldFor: its handshake deadline passed, so a slot was freed) it
// opens another at once, to take that slot before anyone else; and while
// fewer than Hold are open (the target closed others at once) it keeps
// opening new ones at Rate a second. It is bounded in count (Hold open per
// target) and in time (it stops by itself after the duration given to
// StartConnFlood).
type ConnFlood struct {
	Hold int     // idle connections held per target
	Rate float64 // new connections a second per target, once Hold were opened

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	dialer  *NSDialer
	sources []net.Addr // nil: the host's IP

	opened, dialErrs, closedByPeer atomic.Int64
	held                           atomic.Int64
}

// FloodStats is what a flood did.
type FloodStats struct {
	Opened       int64 // connections established
	DialErrors   int64 // dials that failed (e.g. the target is down)
	ClosedByPeer int64 // connections the target closed while the flood ran
}

func (s FloodStats) String() string {
	return fmt.Sprintf("%d connections opened, %d closed by the targets, %d dial errors", s.Opened, s.ClosedByPeer, s.DialErrors)
}

// StartConnFlood starts a flood from host h (its own namespace) to every
// target (host:port) for at most d, from h's IP, or in turn from each of
// sources (IPs that h has, see AddIPs).
func StartConnFlood(h *Host, sources []string, targets []string, hold int, rate float64, d time.Duration) *ConnFlood {
	// The host's own dialer, which lives as long as the host: closing a
	// dialer ends its namespace threads, and a process forked from such a
	// thread before it was locked gets its Pdeathsig (StartProc): an agent
	// restarted during the test could be killed with it.
	dialer := h.dialer
	ctx, cancel := context.WithTimeout(context.Background(), d)
	f := &ConnFlood{Hold: hold, Rate: rate, cancel: cancel, dialer: dialer}
	for _, ip := range sources {
		f.sources = append(f.sources, &net.TCPAddr{IP: net.ParseIP(ip)})
	}
	for _, addr := range targets {
		f.wg.Add(1)
		go f.flood(ctx, addr)
	}
	return f
}

// Held is the number of connections the flood holds open now.
func (f *ConnFlood) Held() int64 { return f.held.Load() }

// Stop ends the flood (if it has not ended by itself), closes its
// connections and waits for its goroutines. Idempotent.
func (f *ConnFlood) Stop() FloodStats {
	f.cancel()
	f.wg.Wait()
	return FloodStats{Opened: f.opened.Load(), DialErrors: f.dialErrs.Load(), ClosedByPeer: f.closedByPeer.Load()}
}

// flood keeps up to Hold connections to addr open until ctx ends.
func (f *ConnFlood) flood(ctx context.Context, addr string) {
	defer f.wg.Done()
	var open atomic.Int64
	var conns sync.WaitGroup
	freed := make(chan struct{}, f.Hold)
	defer conns.Wait()
	next := 0
	dial := func() {
		var local net.Addr
		if len(f.sources) > 0 {
			local = f.sources[next%len(f.sources)]
			next++
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := f.dialer.DialFromContext(dctx, local, "tcp", addr)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.dialErrs.Add(1)
			}
			return
		}
		f.opened.Add(1)
		open.Add(1)
		f.held.Add(1)
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer open.Add(-1)
			defer f.held.Add(-1)
			start := time.Now()
			f.hold(ctx, c)
			if time.Since(start) >= floodHeldFor {
				select {
				case freed <- struct{}{}:
				default:
				}
			}
		}()
	}
	// The first Hold at once, then one at once for each freed slot, and
	// Rate a second whenever fewer than Hold are open.
	for i := 0; i < f.Hold && ctx.Err() == nil; i++ {
		dial()
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / f.Rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-freed:
		case <-t.C:
		}
		if open.Load() < int64(f.Hold) {
			dial()
		}
	}
}

// floodHeldFor: a connection the target closed after this long had a slot.
const floodHeldFor = 500 * time.Millisecond

// hold keeps c open and silent until the peer closes it or ctx ends.
func (f *ConnFlood) hold(ctx context.Context, c net.Conn) {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		_ = c.Close()
	}()
	defer close(done)
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			if ctx.Err() == nil {
				f.closedByPeer.Add(1)
			}
			return
		}
	}
}

// AddIPs gives h n more addresses on eth0, 198.51.100.(first+i)/24, and
// returns them. Keep first clear of the hosts' addresses (10+index).
func (h *Host) AddIPs(first, n int) ([]string, error) {
	var ips []string
	for i := range n {
		ip := fmt.Sprintf("%s%d", Subnet, first+i)
		if err := run("ip", "-n", h.NS, "addr", "add", ip+"/24", "dev", "eth0"); err != nil {
			return nil, err
		}
		ips = append(ips, ip)
	}
	return ips, nil
}
