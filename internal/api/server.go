package api

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Limits bound what one client can hold of the HTTP server.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. It does
	// not cut /v1/monitor: net/http lifts the read deadline once a request
	// without a body is read. There is no server write timeout, which
	// would; a GET but /v1/monitor has ViewWriteTimeout.
	ReadTimeout time.Duration
	// ViewWriteTimeout bounds writing the answer to a GET (but
	// /v1/monitor): a client that does not read holds its slot no longer.
	ViewWriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxConns bounds the connections served at once. At the bound a new
	// connection closes the longest idle keep-alive one (or one that has
	// sent nothing for NewConnGrace) instead of waiting for it: an idle
	// connection holds no slot against a new one. See LimitListener.
	MaxConns int
}

// DefaultLimits are the limits shoal agent serves with.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ViewWriteTimeout:  30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          512,
	}
}

// NewHTTPServer returns the server for h with the limits l. Serve it on a
// listener wrapped by LimitListener(ln, l.MaxConns) (TLS, if any, wrapped
// around that): the server tells the listener which connections are idle,
// and answers a connection given a reserved slot with LivePath only.
func NewHTTPServer(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           reservedOnlyLive(h, l.ViewWriteTimeout),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnState:         connStateHook,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc := tracked(c); tc != nil {
				return context.WithValue(ctx, connKey{}, tc)
			}
			return ctx
		},
	}
}

type connKey struct{}

// tracked returns the LimitListener connection under c (TLS unwrapped), or
// nil.
func tracked(c net.Conn) *trackedConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	tc, _ := c.(*trackedConn)
	return tc
}

func connStateHook(c net.Conn, st http.ConnState) {
	if tc := tracked(c); tc != nil {
		tc.l.setState(tc, st)
	}
}

// reservedOnlyLive bounds the time to write a view, and serves a connection that holds a reserved slot (the
// normal ones all busy) with GET LivePath only; anything else gets 503.
// Such a connection is closed after its answer.
func reservedOnlyLive(h http.Handler, viewWrite time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A view is written at once: a client that does not read it
		// (pipelined requests, never read) holds its slot this long at
		// most. The log stream and the writes, which may wait for a
		// query, are exempt (they need the token); the zero deadline
		// clears the one an earlier request on the connection set.
		var deadline time.Time
		if viewWrite > 0 && r.Method == http.MethodGet && r.URL.Path != "/v1/monitor" {
			deadline = time.Now().Add(viewWrite)
		}
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
		tc, _ := r.Context().Value(connKey{}).(*trackedConn)
		if tc == nil || !tc.reserved {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == LivePath {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, errBusy)
	})
}
