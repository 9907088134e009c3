package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/pkg/client"
)

// wantRoutes is the reviewed list of every endpoint and whether it is open
// (served without the API token). A route added to the server and not
// here fails TestEveryRouteIsInTheReviewedTable: whoever adds one decides
// here, in review, whether it may be open.
var wantRoutes = map[string]bool{
	"GET /v1/members":            true,
	"GET /v1/agent/self":         true,
	"GET /v1/agent/live":         true, // liveness: {"status": "alive"}, nothing else
	"GET /v1/health":             true,
	"GET /v1/pool":               true,
	"GET /v1/agent/maint":        true,
	"GET /v1/history":            true,
	"GET /v1/hooks":              true, // arguments hidden without the token
	"GET /metrics":               true,
	"GET /ui":                    true, // the status page: static, reads the open routes
	"GET /ui/{asset}":            true, // its script and style sheet
	"POST /v1/agent/join":        false,
	"POST /v1/agent/leave":       false,
	"POST /v1/agent/force-leave": false,
	"PUT /v1/agent/tags":         false,
	"POST /v1/agent/tags":        false,
	"POST /v1/event":             false,
	"POST /v1/query":             false,
	"GET /v1/keys":               false, // reveals the gossip keys
	"POST /v1/keys/{op}":         false,
	"GET /v1/monitor":            false, // logs
	"PUT /v1/agent/maint":        false,
	"POST /v1/switchover":        false,
	"POST /v1/failover":          false,
	"POST /v1/hooks/test":        false,
}

// serveAPI serves a's API as a listener on httpAddr would (httpAddr only
// decides the Host check), with a /metrics stand-in.
func serveAPI(t *testing.T, a *agent.Agent, httpAddr string) *api.Server {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("shoal_up 1\n")) })
	return api.New(a, slog.New(slog.DiscardHandler), httpAddr, metrics)
}

// leaveRequested reports whether a was asked to leave.
func leaveRequested(a *agent.Agent) bool {
	select {
	case <-a.LeaveRequested():
		return true
	default:
		return false
	}
}

// TestEveryRouteIsInTheReviewedTable walks every route the server
// registered: the set equals wantRoutes; a closed route answers 401 without
// a token (with a JSON error saying how to get one) and 403 with a wrong
// one, before its handler runs; an open route answers without a token.
func TestEveryRouteIsInTheReviewedTable(t *testing.T) {
	a, _, _ := startAgent(t, "routes1", "", nil)
	s := serveAPI(t, a, "")
	got := map[string]bool{}
	for _, r := range s.Routes() {
		got[r.Method+" "+r.Path] = r.Open
	}
	for k, open := range got {
		want, ok := wantRoutes[k]
		if !ok {
			t.Errorf("route %s (open=%v) is not in the reviewed table wantRoutes: decide whether it needs the token", k, open)
		} else if want != open {
			t.Errorf("route %s: open=%v, reviewed table says %v", k, open, want)
		}
	}
	for k := range wantRoutes {
		if _, ok := got[k]; !ok {
			t.Errorf("reviewed route %s is not registered", k)
		}
	}

	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, r := range s.Routes() {
		path := strings.Replace(r.Path, "{op}", "install", 1)
		var body string
		var hdr []string
		if r.Method != "GET" {
			body, hdr = `{}`, []string{"Content-Type", "application/json"}
		}
		if r.Path == "/v1/monitor" {
			path += "?level=loud" // a 400 rather than a stream once past the token
		}
		status, resp := doRaw(t, r.Method, srv.URL+path, body, hdr...)
		if r.Open {
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				t.Errorf("open %s %s without a token: %d %s", r.Method, path, status, resp)
			}
			continue
		}
		if status != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d %s, want 401", r.Method, path, status, resp)
			continue
		}
		msg := errorOf(t, resp)
		for _, want := range []string{"needs the API token", a.APITokenFile(), "--token", "SHOAL_HTTP_TOKEN", "X-Shoal-Token"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s %s: 401 message %q does not mention %q", r.Method, path, msg, want)
			}
		}
		status, resp = doRaw(t, r.Method, srv.URL+path, body, append(hdr, api.TokenHeader, "wrong-token-0123456789")...)
		if status != http.StatusForbidden || !strings.Contains(errorOf(t, resp), "wrong API token") {
			t.Errorf("%s %s with a wrong token: %d %s, want 403", r.Method, path, status, resp)
		}
		status, resp = doRaw(t, r.Method, srv.URL+path, body, append(hdr, "Authorization", "Bearer "+a.APIToken()[:20])...)
		if status != http.StatusForbidden {
			t.Errorf("%s %s with a token prefix: %d %s, want 403", r.Method, path, status, resp)
		}
	}
	if leaveRequested(a) {
		t.Fatal("a request without the token made the agent leave")
	}
	// The gossip keys are not in any answer given without the token.
	status, resp := doRaw(t, "GET", srv.URL+"/v1/keys", "")
	if status != http.StatusUnauthorized || strings.Contains(string(resp), `"keys"`) {
		t.Errorf("GET /v1/keys without a token: %d %s", status, resp)
	}
}

// TestTokenHeadersAndClassesEndToEnd: with the token in either header the
// closed routes work; the keys, a tag write and the leave go through.
func TestTokenHeadersAndClassesEndToEnd(t *testing.T) {
	key, _ := agent.GenerateKey()
	a, c, _ := startAgent(t, "tok1", key, nil)
	tok := a.APIToken()
	for _, hdr := range [][]string{
		{api.TokenHeader, tok},
		{"Authorization", "Bearer " + tok},
		{"Authorization", "bearer " + tok},
	} {
		status, body := do(t, "GET", c.Addr()+"/v1/keys", "", hdr...)
		if status != http.StatusOK || !strings.Contains(string(body), key) {
			t.Errorf("GET /v1/keys with %s: %d %s", hdr[0], status, body)
		}
	}
	status, body := do(t, "PUT", c.Addr()+"/v1/agent/tags", `{"set":{"zone":"a"}}`, "Authorization", "Bearer "+tok, "Content-Type", "application/json; charset=utf-8")
	if status != http.StatusOK || a.Serf().LocalMember().Tags["zone"] != "a" {
		t.Errorf("PUT tags with the token: %d %s", status, body)
	}
	// Without the token: 401, nothing changed.
	status, body = do(t, "PUT", c.Addr()+"/v1/agent/tags", `{"set":{"zone":"b"}}`)
	if status != http.StatusUnauthorized || a.Serf().LocalMember().Tags["zone"] != "a" {
		t.Errorf("PUT tags without the token: %d %s, zone %q", status, body, a.Serf().LocalMember().Tags["zone"])
	}
	if status, body := do(t, "POST", c.Addr()+"/v1/agent/leave", ``); status != http.StatusUnauthorized || leaveRequested(a) {
		t.Fatalf("leave without the token: %d %s", status, body)
	}
	if status, body := do(t, "POST", c.Addr()+"/v1/agent/leave", ``, api.TokenHeader, tok); status != http.StatusAccepted || !leaveRequested(a) {
		t.Fatalf("leave with the token: %d %s", status, body)
	}
}

// TestBrowserAndRebindingRefused: a foreign Origin is refused on every
// route, a non-JSON write gets 415, and on a loopback listener a Host that
// is not a loopback name is refused, reads included. Never a CORS header.
func TestBrowserAndRebindingRefused(t *testing.T) {
	a, c, _ := startAgent(t, "web1", "", nil)
	tok := a.APIToken()
	base := c.Addr()
	host := strings.TrimPrefix(base, "http://")

	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		want                     string
	}{
		{"foreign origin leave", "POST", "/v1/agent/leave", "", []string{"Origin", "http://evil.example", "Content-Type", "text/plain", api.TokenHeader, tok}, 403, "cross-origin request refused"},
		{"foreign origin read", "GET", "/v1/members", "", []string{"Origin", "http://evil.example"}, 403, "cross-origin"},
		{"origin other port", "GET", "/v1/members", "", []string{"Origin", "http://127.0.0.1:1"}, 403, "cross-origin"},
		{"null origin", "POST", "/v1/event", `{"name":"x"}`, []string{"Origin", "null", api.TokenHeader, tok}, 403, "cross-origin"},
		{"text/plain leave", "POST", "/v1/agent/leave", "", []string{"Content-Type", "text/plain", api.TokenHeader, tok}, 415, `content type "text/plain"`},
		{"form tags", "PUT", "/v1/agent/tags", "set=x", []string{"Content-Type", "application/x-www-form-urlencoded", api.TokenHeader, tok}, 415, "application/json"},
		{"multipart event", "POST", "/v1/event", "", []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, "application/json"},
		{"rebinding read", "GET", "/v1/members", "", []string{"Host", "evil.example:8946"}, 403, "not a name of this agent"},
		{"rebinding keys", "GET", "/v1/keys", "", []string{"Host", "evil.example", api.TokenHeader, tok}, 403, "DNS rebinding"},
		{"rebinding metrics-like", "GET", "/v1/health", "", []string{"Host", "127.0.0.1.evil.example"}, 403, "not a name of this agent"},
	} {
		status, body := do(t, tc.method, base+tc.path, tc.body, tc.header...)
		if status != tc.status || !strings.Contains(errorOf(t, body), tc.want) {
			t.Errorf("%s: %s %s = %d %s, want %d containing %q", tc.name, tc.method, tc.path, status, body, tc.status, tc.want)
		}
	}
	if leaveRequested(a) {
		t.Fatal("a browser-style request made the agent leave")
	}

	// Allowed: same origin, loopback names on any port, no content type.
	for _, hdr := range [][]string{
		{"Origin", "http://" + host},
		{"Host", "localhost:9999"},
		{"Host", "LOCALHOST"},
		{"Host", "127.1.2.3:80"},
		{"Host", "[::1]:8946"},
	} {
		status, body := do(t, "GET", base+"/v1/members", "", hdr...)
		if status != http.StatusOK {
			t.Errorf("GET /v1/members with %s %s: %d %s", hdr[0], hdr[1], status, body)
		}
	}
	if status, body := do(t, "POST", base+"/v1/event", `{"name":"e"}`, api.TokenHeader, tok); status != http.StatusOK {
		t.Errorf("write without a content type: %d %s", status, body)
	}
	// HTTP/1.0 without a Host (health checkers) is served.
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET /v1/agent/self HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
		t.Errorf("HTTP/1.0 without Host: %q, %v", line, err)
	}

	// Never a CORS header, even for a preflight.
	req, _ := http.NewRequest("OPTIONS", base+"/v1/agent/leave", nil)
	req.Header.Set("Origin", "http://"+host)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k := range resp.Header {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("preflight answered with CORS header %s", k)
		}
	}

	// A listener beyond loopback checks Host the same way (DNS rebinding
	// reaches any address a browser can); names given to AllowHosts and
	// IP literals are served, and the token still guards writes.
	h := serveAPI(t, a, "10.0.0.1:8946")
	h.AllowHosts("Shoal.Example:8946", "192.0.2.1")
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		host string
		want int
	}{
		{"attacker.example:8946", http.StatusForbidden},
		{"attacker.example", http.StatusForbidden},
		{"shoal.example.attacker.example", http.StatusForbidden},
		{"shoal.example:8946", http.StatusOK},
		{"SHOAL.example.", http.StatusOK},
		{"10.0.0.1:8946", http.StatusOK},
		{"192.0.2.77", http.StatusOK},
		{"[2001:db8::1]:8946", http.StatusOK},
		{"localhost:8946", http.StatusOK},
	} {
		if status, body := do(t, "GET", srv.URL+"/v1/members", "", "Host", c.host); status != c.want {
			t.Errorf("non-loopback listener, GET with Host %s: %d %s, want %d", c.host, status, body, c.want)
		}
	}
	if status, body := do(t, "GET", srv.URL+"/v1/keys", "", "Host", "shoal.example:8946"); status != http.StatusUnauthorized {
		t.Errorf("non-loopback listener, keys without the token: %d %s", status, body)
	}
}

// TestTrailingJSONRefused: one JSON value per body, nothing after it.
func TestTrailingJSONRefused(t *testing.T) {
	a, c, _ := startAgent(t, "json1", "", nil)
	tok := a.APIToken()
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/v1/agent/tags", `{}xxxx`},
		{"PUT", "/v1/agent/tags", `{}{}`},
		{"POST", "/v1/agent/tags", `{"set":{"a":"b"}} {"set":{"c":"d"}}`},
		{"PUT", "/v1/agent/tags", `{} }`},
		{"POST", "/v1/event", `{"name":"e"}[]`},
		{"PUT", "/v1/agent/maint", `{"enable":false}0`},
	} {
		status, body := do(t, tc.method, c.Addr()+tc.path, tc.body, api.TokenHeader, tok)
		if status != http.StatusBadRequest || !strings.Contains(errorOf(t, body), "trailing data after the JSON body") {
			t.Errorf("%s %s %q = %d %s, want 400 trailing data", tc.method, tc.path, tc.body, status, body)
		}
	}
	if tags := a.Serf().LocalMember().Tags; tags["a"] != "" || tags["c"] != "" {
		t.Errorf("a refused body changed tags: %v", tags)
	}
	if status, body := do(t, "PUT", c.Addr()+"/v1/agent/tags", "{\"set\":{\"a\":\"b\"}} \n\t", api.TokenHeader, tok); status != http.StatusOK {
		t.Errorf("trailing white space: %d %s", status, body)
	}
}

// TestHooksHideArgumentsWithoutToken: GET /v1/hooks is open, but a
// handler's arguments (which may hold a secret) only show with the token.
func TestHooksHideArgumentsWithoutToken(t *testing.T) {
	a, c, _ := startAgent(t, "hk1", "", nil, "user:deploy=env SECRET=hunter2 /bin/true --password=s3cret", "/bin/true")
	status, body := do(t, "GET", c.Addr()+"/v1/hooks", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/hooks: %d %s", status, body)
	}
	if strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "s3cret") {
		t.Errorf("GET /v1/hooks without the token shows the handler's secret: %s", body)
	}
	var r client.HooksResponse
	if err := json.Unmarshal(body, &r); err != nil || !r.Redacted || len(r.Handlers) != 2 ||
		r.Handlers[0].Spec != "user:deploy=env …" || r.Handlers[1].Spec != "/bin/true" {
		t.Errorf("redacted hooks = %+v, %v", r, err)
	}
	status, body = do(t, "GET", c.Addr()+"/v1/hooks", "", api.TokenHeader, a.APIToken())
	if status != http.StatusOK || !strings.Contains(string(body), "SECRET=hunter2") || strings.Contains(string(body), `"redacted"`) {
		t.Errorf("GET /v1/hooks with the token: %d %s", status, body)
	}

	// The client finds the token (here: a finder) when the view is
	// redacted, and asks again.
	var calls atomic.Int32
	cl := client.New(c.Addr(), client.WithTokenFinder(func(context.Context, *client.Client) (string, error) {
		calls.Add(1)
		return a.APIToken(), nil
	}))
	h, err := cl.Hooks(context.Background())
	if err != nil || h.Redacted || h.Handlers[0].Spec != "user:deploy=env SECRET=hunter2 /bin/true --password=s3cret" || calls.Load() != 1 {
		t.Errorf("client Hooks with a finder: %+v, %v, finder ran %d times", h, err, calls.Load())
	}
	// A finder that fails leaves the redacted view, without an error.
	cl = client.New(c.Addr(), client.WithTokenFinder(func(context.Context, *client.Client) (string, error) {
		return "", errors.New("no token here")
	}))
	if h, err := cl.Hooks(context.Background()); err != nil || !h.Redacted {
		t.Errorf("client Hooks with a failing finder: %+v, %v", h, err)
	}
}

// TestClientTokenFinder: on the first 401 the client runs its finder once
// and sends the request again; the finder's error replaces the 401.
func TestClientTokenFinder(t *testing.T) {
	key, _ := agent.GenerateKey()
	a, c, _ := startAgent(t, "find1", key, nil)
	info, err := client.New(c.Addr()).Info(context.Background())
	if err != nil || info.APITokenFile != a.APITokenFile() || a.APITokenFile() == "" {
		t.Fatalf("self api_token_file = %+v, %v; want %q", info, err, a.APITokenFile())
	}
	if b, _ := json.Marshal(info); strings.Contains(string(b), a.APIToken()) {
		t.Fatal("/v1/agent/self shows the token itself")
	}

	var calls atomic.Int32
	cl := client.New(c.Addr(), client.WithTokenFinder(func(ctx context.Context, c *client.Client) (string, error) {
		calls.Add(1)
		return a.APIToken(), nil
	}))
	for range 3 {
		if keys, err := cl.ListKeys(context.Background()); err != nil || keys.Keys[key] != 1 {
			t.Fatalf("ListKeys with a finder: %+v, %v", keys, err)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("finder ran %d times, want once", calls.Load())
	}
	// Monitor too.
	mctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	cl = client.New(c.Addr(), client.WithTokenFinder(func(context.Context, *client.Client) (string, error) { return a.APIToken(), nil }))
	if err := cl.Monitor(mctx, "info", func(string) {}); err != nil {
		t.Errorf("Monitor with a finder: %v", err)
	}

	cl = client.New(c.Addr(), client.WithTokenFinder(func(context.Context, *client.Client) (string, error) {
		return "", errors.New("permission denied reading /x/api-token")
	}))
	if _, err := cl.ListKeys(context.Background()); err == nil || err.Error() != "permission denied reading /x/api-token" {
		t.Errorf("ListKeys with a failing finder: %v", err)
	}
	// No finder, no token: the agent's 401.
	_, err = client.New(c.Addr()).ListKeys(context.Background())
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("ListKeys without a token: %v", err)
	}
	// A wrong token is not replaced by the finder.
	calls.Store(0)
	cl = client.New(c.Addr(), client.WithToken("wrong-token-0123456789"), client.WithTokenFinder(func(context.Context, *client.Client) (string, error) {
		calls.Add(1)
		return a.APIToken(), nil
	}))
	if _, err := cl.ListKeys(context.Background()); !errors.As(err, &ae) || ae.Status != http.StatusForbidden || calls.Load() != 0 {
		t.Errorf("ListKeys with a wrong token: %v (finder ran %d times)", err, calls.Load())
	}
}
