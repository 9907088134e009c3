package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
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

// AllowHosts adds names (host or host:port) that the Host header may
// carry besides IP literals and localhost: the listener's own DNS names.
// IP literals among them change nothing. Call it before serving.
func (s *Server) AllowHosts(names ...string) {
	for _, n := range names {
		if h := hostName(n); h != "" {
			if _, err := netip.ParseAddr(h); err != nil {
				s.hosts[h] = true
			}
		}
	}
}

// hostName is the host of host[:port], without brackets or a final dot,
// in lower case.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// hostAllowed reports whether a request's Host names this agent: an IP
// literal, localhost, or a name given to AllowHosts. A DNS rebinding page
// (evil.example resolving to the agent's address) sends its own name.
func (s *Server) hostAllowed(r *http.Request) bool {
	// No Host at all (HTTP/1.0 health checkers) is no rebinding: browsers
	// always send one. Over TLS the browser has checked the name against
	// the certificate, which a rebinding name does not match.
	if r.Host == "" || r.TLS != nil {
		return true
	}
	h := hostName(r.Host)
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return h == "localhost" || s.hosts[h]
}

// checkBrowser refuses what a web page or a rebound DNS name can send:
//   - a Host that is not an IP literal, localhost or one of the agent's
//     names (hostAllowed; DNS rebinding: evil.example resolving to the
//     agent's address) — 403, reads included;
//   - an Origin whose host:port is not the request's Host (a page of
//     another site) — 403;
//   - a write whose Content-Type is set and is not application/json (the
//     "simple" requests a browser sends cross-site without asking) — 415.
//
// It returns the status and error to answer, or 0.
func (s *Server) checkBrowser(r *http.Request) (int, error) {
	if !s.hostAllowed(r) {
		return http.StatusForbidden, fmt.Errorf("host %q is not a name of this agent: it answers a Host that is an IP address, localhost, its host name or a name listed in http_allowed_hosts (DNS rebinding protection)", r.Host)
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
			writeError(w, http.StatusUnauthorized, fmt.Errorf("%s %s needs the API token (header %s or Authorization: Bearer): it is in %s on the agent's host; the shoal CLI reads it with --token-file or SHOAL_API_TOKEN_FILE (or from its default path) when run as root or as the agent's user, or pass --token or SHOAL_HTTP_TOKEN",
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
