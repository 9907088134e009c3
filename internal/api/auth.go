package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// TokenHeader carries the API token; "Authorization: Bearer TOKEN" works
// too.
const TokenHeader = "X-Shoal-Token"

// route is one endpoint of the API. Every endpoint is declared in
// Server.routes, and nowhere else: a route needs the API token unless it
// says open, so a new route is closed until someone decides otherwise.
type route struct {
	method, path string
	// open marks a read-only view that reveals no secret: it is served
	// without the token. Everything else (state changes, keys, logs)
	// needs it.
	open bool
	h    http.HandlerFunc
}

// RouteInfo describes a registered route, for tests and documentation.
type RouteInfo struct {
	Method, Path string
	Open         bool // served without the API token
}

// Routes lists every route the server registered, in registration order.
func (s *Server) Routes() []RouteInfo {
	out := make([]RouteInfo, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, RouteInfo{Method: r.method, Path: r.path, Open: r.open})
	}
	return out
}

// isWrite reports whether method may change state.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// loopbackListener reports whether httpAddr, the listener's address, is on
// a loopback IP. An address that does not parse (a test server handed "")
// counts as loopback: the stricter checks apply.
func loopbackListener(httpAddr string) bool {
	host, _, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return true
	}
	ip := net.ParseIP(host)
	return ip == nil || ip.IsLoopback()
}

// LoopbackHost reports whether host[:port] names this machine's loopback:
// localhost, 127.0.0.0/8 or [::1], any port.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkBrowser refuses what a web page or a rebound DNS name can send:
//   - on a loopback listener, a Host that is not a loopback name (DNS
//     rebinding: evil.example resolving to 127.0.0.1) — 403, reads
//     included; a request without Host (HTTP/1.0) passes;
//   - an Origin whose host:port is not the request's Host (a page of
//     another site) — 403;
//   - a write whose Content-Type is set and is not application/json (the
//     "simple" requests a browser sends cross-site without asking) — 415.
//
// It returns the status and error to answer, or 0.
func (s *Server) checkBrowser(r *http.Request) (int, error) {
	// No Host at all (HTTP/1.0 health checkers) is no rebinding: browsers
	// always send one.
	if s.loopback && r.Host != "" && !LoopbackHost(r.Host) {
		return http.StatusForbidden, fmt.Errorf("host %q is not a loopback name: this agent listens on loopback and answers only Host localhost, 127.0.0.1 or [::1] (DNS rebinding protection)", r.Host)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return http.StatusForbidden, fmt.Errorf("cross-origin request refused: Origin %q is not this agent (%s)", origin, r.Host)
		}
	}
	if isWrite(r.Method) {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/json" {
				return http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: a write takes application/json", ct)
			}
		}
	}
	return 0, nil
}

// requestToken returns the token a request carries, from X-Shoal-Token or
// Authorization: Bearer.
func requestToken(r *http.Request) string {
	if t := r.Header.Get(TokenHeader); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// tokenValid compares in constant time (over hashes, so the length does
// not leak either).
func tokenValid(got, want string) bool {
	if got == "" || want == "" {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// hasToken reports whether r carries the agent's API token.
func (s *Server) hasToken(r *http.Request) bool {
	return tokenValid(requestToken(r), s.b.APIToken())
}

// guard wraps a route that needs the token: none gives 401 saying how to
// get one, a wrong one 403. The token itself is never logged or echoed.
func (s *Server) guard(rt route) http.HandlerFunc {
	if rt.open {
		return rt.h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		got := requestToken(r)
		if got == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shoal"`)
			writeError(w, http.StatusUnauthorized, fmt.Errorf("%s %s needs the API token (header %s or Authorization: Bearer): the shoal CLI reads it from %s when run as root or as the agent's user, or pass --token or SHOAL_HTTP_TOKEN",
				r.Method, r.URL.Path, TokenHeader, s.b.APITokenFile()))
			return
		}
		if !tokenValid(got, s.b.APIToken()) {
			writeError(w, http.StatusForbidden, errors.New("wrong API token"))
			return
		}
		rt.h(w, r)
	}
}
