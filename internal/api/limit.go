package api

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/metrics"
)

// ReservedConns are the slots beyond MaxConns for a connection that finds
// every normal slot busy with a request (none idle to close). They serve
// GET LivePath only, one request each, and close after ReservedConnLife,
// so that a liveness probe is answered whatever holds the normal slots.
const ReservedConns = 16

// ReservedConnLife bounds how long a reserved connection stays open.
const ReservedConnLife = 5 * time.Second

// NewConnGrace: a connection that has sent no byte of a request this long
// after it was accepted can be closed to make room, like an idle one.
const NewConnGrace = time.Second

var errBusy = errors.New("the API is serving its maximum of connections, each with a request in progress: only GET " + LivePath + " is answered on this connection; retry")

// LimitedListener accepts without ever waiting for a slot. Holding at most
// max connections to serve at once, it makes room for a new connection by
// closing the connection idle the longest (a keep-alive connection between
// requests, or one that has sent nothing for NewConnGrace). Only when every
// slot has a request in progress does the new connection get one of the
// ReservedConns slots (LivePath only), and when those are taken too it is
// closed at once. Connections are tracked through the server's ConnState:
// serve it with NewHTTPServer.
//
// Why not per client: on loopback every client is 127.0.0.1, and the
// peer's uid is not available for TCP. Closing idle connections first
// means holding slots costs a client a request in progress on each, which
// the read timeouts bound.
type LimitedListener struct {
	net.Listener
	max int

	mu       sync.Mutex
	conns    map[*trackedConn]struct{} // holders of a normal slot
	reserved int

	m *metrics.HTTPConns
}

// LimitListener returns ln serving at most n connections at once (plus
// ReservedConns for LivePath), as LimitedListener describes; n <= 0: no
// bound.
func LimitListener(ln net.Listener, n int) *LimitedListener {
	return &LimitedListener{Listener: ln, max: n, conns: map[*trackedConn]struct{}{}, m: metrics.NewHTTPConns()}
}

// Collectors are the listener's metrics, for a registry.
func (l *LimitedListener) Collectors() []prometheus.Collector {
	return l.m.Collectors(func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.conns) + l.reserved
	})
}

// Accept returns the next connection; it never waits for a slot.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l, state: http.StateNew, since: time.Now()}
		victim, ok := l.admit(tc)
		if victim != nil {
			l.m.Evicted.Inc()
			victim.evict()
		}
		if !ok {
			l.m.Refused.Inc()
			_ = c.Close()
			continue
		}
		if tc.reserved {
			l.m.Reserved.Inc()
			tc.timer = time.AfterFunc(ReservedConnLife, func() { _ = tc.Close() })
		}
		return tc, nil
	}
}

// admit gives tc a slot: a free one, one made by evicting victim, or a
// reserved one; false when there is none.
func (l *LimitedListener) admit(tc *trackedConn) (victim *trackedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max <= 0 || len(l.conns) < l.max {
		l.conns[tc] = struct{}{}
		return nil, true
	}
	if victim = l.oldestIdle(tc.since); victim != nil {
		delete(l.conns, victim)
		victim.released = true
		l.conns[tc] = struct{}{}
		return victim, true
	}
	if l.reserved < ReservedConns {
		l.reserved++
		tc.reserved = true
		return nil, true
	}
	return nil, false
}

// oldestIdle is the slot holder idle the longest: a keep-alive connection
// between requests, or one that has sent nothing for NewConnGrace. l.mu
// is held.
func (l *LimitedListener) oldestIdle(now time.Time) *trackedConn {
	var best *trackedConn
	for c := range l.conns {
		idle := c.state == http.StateIdle || (c.state == http.StateNew && now.Sub(c.since) >= NewConnGrace)
		if idle && (best == nil || c.since.Before(best.since)) {
			best = c
		}
	}
	return best
}

func (l *LimitedListener) setState(c *trackedConn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st != c.state && (st == http.StateIdle || st == http.StateNew) {
		c.since = time.Now()
	}
	c.state = st
	if st == http.StateHijacked || st == http.StateClosed {
		l.releaseLocked(c)
	}
}

func (l *LimitedListener) releaseLocked(c *trackedConn) {
	if c.released {
		return
	}
	c.released = true
	if c.reserved {
		l.reserved--
		return
	}
	delete(l.conns, c)
}

// trackedConn is a connection holding a slot of its LimitedListener.
type trackedConn struct {
	net.Conn
	l        *LimitedListener
	reserved bool
	timer    *time.Timer
	// Guarded by l.mu.
	state    http.ConnState
	since    time.Time // accepted, or last became idle
	released bool
}

// Close releases the slot, then closes: a client that sees the close
// finds the slot free.
func (c *trackedConn) Close() error {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// evict closes a connection whose slot was already given away; the server
// sees it closed at its next read.
func (c *trackedConn) evict() { _ = c.Conn.Close() }
