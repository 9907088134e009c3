package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/pkg/client"
)

// fakeAgent serves h on an httptest server closed at the end of the test.
func fakeAgent(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// An error the agent answers is an *APIError with its status and message;
// an answer without a JSON error keeps its text; the text is the message
// only.
func TestAPIError(t *testing.T) {
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/pool":
			answer(w, http.StatusNotFound, client.ErrorResponse{Error: `no cluster "x" in the pool`})
		case "/v1/members":
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintln(w, "upstream down")
		default:
			answer(w, http.StatusOK, map[string]string{})
		}
	})
	c := client.New(srv.URL)
	_, err := c.Pool(context.Background(), "x")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Message != `no cluster "x" in the pool` || err.Error() != ae.Message {
		t.Fatalf("pool: %#v", err)
	}
	_, err = c.Members(context.Background(), client.MemberFilter{})
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Message != "upstream down" {
		t.Fatalf("members: %#v", err)
	}
}

// A 2xx answer that is not the expected JSON is an error naming the call.
func TestUndecodableAnswer(t *testing.T) {
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") })
	_, err := client.New(srv.URL).Info(context.Background())
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "decode answer from") || !strings.Contains(err.Error(), "/v1/agent/self") {
		t.Fatalf("got %v", err)
	}
}

// WithToken sends the token in X-Shoal-Token on every call; without one no
// such header is sent.
func TestTokenHeader(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" ["+strings.Join(r.Header.Values(client.TokenHeader), ",")+"]")
		mu.Unlock()
		answer(w, http.StatusOK, client.TagsResponse{Tags: map[string]string{"a": "1"}})
	})
	ctx := context.Background()
	if _, err := client.New(srv.URL, client.WithToken("s3cret")).UpdateTags(ctx, map[string]string{"a": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(srv.URL).Members(ctx, client.MemberFilter{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"PUT /v1/agent/tags [s3cret]", "GET /v1/members []"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("requests %q, want %q", got, want)
	}
}

// On a 401, the token finder runs once; the call is sent again with the
// token found, and later calls carry it without asking again.
func TestTokenFinderRunsOnce(t *testing.T) {
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(client.TokenHeader) != "found" {
			answer(w, http.StatusUnauthorized, client.ErrorResponse{Error: "needs the API token"})
			return
		}
		answer(w, http.StatusOK, client.KeyResponse{NumNodes: 1})
	})
	var finds atomic.Int32
	c := client.New(srv.URL, client.WithTokenFinder(func(context.Context, *client.Client) (string, error) {
		finds.Add(1)
		return "found", nil
	}))
	for range 3 {
		if r, err := c.ListKeys(context.Background()); err != nil || r.NumNodes != 1 {
			t.Fatalf("list keys: %+v, %v", r, err)
		}
	}
	if n := finds.Load(); n != 1 {
		t.Fatalf("finder ran %d times, want 1", n)
	}

	// A finder's error is returned in place of the 401.
	c = client.New(srv.URL, client.WithTokenFinder(func(context.Context, *client.Client) (string, error) {
		return "", errors.New("no token file readable")
	}))
	if _, err := c.ListKeys(context.Background()); err == nil || err.Error() != "no token file readable" {
		t.Fatalf("got %v", err)
	}
}

// The member filter travels as anchored-regex query parameters, tags in
// key order.
func TestMemberFilterQuery(t *testing.T) {
	var query string
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		answer(w, http.StatusOK, client.MembersResponse{Members: []client.Member{{Name: "db1"}}})
	})
	ms, err := client.New(srv.URL).Members(context.Background(), client.MemberFilter{
		Status: "alive", Name: "db.*", Tags: map[string]string{"role": "db", "cluster": "main"}})
	if err != nil || len(ms) != 1 || ms[0].Name != "db1" {
		t.Fatalf("members %+v, %v", ms, err)
	}
	if want := "name=db.%2A&status=alive&tag=cluster%3Dmain&tag=role%3Ddb"; query != want {
		t.Fatalf("query %q, want %q", query, want)
	}
}

// No agent at the address: an *UnreachableError that names the address,
// wraps the network error and gives no command-line advice.
func TestUnreachable(t *testing.T) {
	addr := ports.Free(t)
	_, err := client.New(addr).Health(context.Background())
	var ue *client.UnreachableError
	var oe *net.OpError
	if !errors.As(err, &ue) || ue.Addr != addr || !errors.As(err, &oe) {
		t.Fatalf("got %#v", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "no shoal agent reachable at "+addr+" (") || strings.Contains(msg, "--http-addr") || strings.Contains(msg, "SHOAL_") {
		t.Fatalf("message %q", msg)
	}
}

// hang answers nothing until the request ends (at most a minute).
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
}

// A call the agent does not answer ends at the client's timeout with a
// *TimeoutError matching context.DeadlineExceeded; a context deadline
// comes first when it is set.
func TestTimeout(t *testing.T) {
	srv := fakeAgent(t, hang)
	start := time.Now()
	_, err := client.New(srv.URL, client.WithTimeout(200*time.Millisecond)).Info(context.Background())
	var te *client.TimeoutError
	if !errors.As(err, &te) || te.Timeout != 200*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %#v", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 20*time.Second {
		t.Fatalf("returned after %s", el)
	}
	if want := "no answer from the shoal agent at " + srv.URL + " within 200ms"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = client.New(srv.URL, client.WithTimeout(time.Hour)).Info(ctx)
	if !errors.As(err, &te) || te.Timeout != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context deadline: got %#v", err)
	}
}

// deadlines records the deadline of each request's context, relative to
// when it was sent (0: none), and answers 200 {}.
type deadlines struct {
	mu  sync.Mutex
	got map[string]time.Duration
}

func (d *deadlines) RoundTrip(r *http.Request) (*http.Response, error) {
	var left time.Duration
	if dl, ok := r.Context().Deadline(); ok {
		left = time.Until(dl)
	}
	d.mu.Lock()
	d.got[r.URL.Path] = left
	d.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// Each call is bounded by the client's timeout (DefaultTimeout unless set)
// plus what the call itself may wait for; Monitor and WithTimeout(0) are
// not bounded; the injected http.Client sends every request.
func TestTimeoutOptions(t *testing.T) {
	ctx := context.Background()
	rec := &deadlines{got: map[string]time.Duration{}}
	c := client.New("agent:8946", client.WithHTTPClient(&http.Client{Transport: rec}))
	_, _ = c.Info(ctx)
	_, _ = c.Query(ctx, client.QueryRequest{Name: "q", Timeout: "1m"})
	_, _ = c.TestHook(ctx, client.HookTestRequest{Event: "user", Name: "x"})
	_ = c.Monitor(ctx, "info", func(string) {})
	_, _ = client.New("agent:8946", client.WithHTTPClient(&http.Client{Transport: rec}), client.WithTimeout(0)).Pool(ctx, "")
	within := func(path string, want time.Duration) {
		t.Helper()
		got, ok := rec.got[path]
		if !ok {
			t.Fatalf("%s not sent through the injected client", path)
		}
		if want == 0 && got != 0 || want != 0 && (got > want || got < want-10*time.Second) {
			t.Errorf("%s: deadline in %s, want %s", path, got, want)
		}
	}
	within("/v1/agent/self", client.DefaultTimeout)
	within("/v1/query", client.DefaultTimeout+time.Minute)
	within("/v1/hooks/test", client.DefaultTimeout+2*time.Minute)
	within("/v1/monitor", 0)
	within("/v1/pool", 0)
}

// Monitor's stream outlives the client's timeout: only its context ends it.
func TestMonitorNotBoundedByTimeout(t *testing.T) {
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		fl := w.(http.Flusher)
		fmt.Fprintln(w, "2024/05/01 12:00:00.000 [INFO] first")
		fl.Flush()
		time.Sleep(600 * time.Millisecond)
		fmt.Fprintln(w, "2024/05/01 12:00:00.600 [INFO] second")
		fl.Flush()
	})
	var lines []string
	err := client.New(srv.URL, client.WithTimeout(100*time.Millisecond)).Monitor(context.Background(), "info", func(l string) { lines = append(lines, l) })
	if err != nil || len(lines) != 2 || !strings.HasSuffix(lines[1], "second") {
		t.Fatalf("lines %q, err %v", lines, err)
	}
}

// WithTLSConfig verifies an https:// agent with the given roots, also on
// an injected client's transport (which it copies, not changes); without
// them the certificate is refused.
func TestTLSConfig(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, client.HealthResponse{Status: "ok", Node: "db1"})
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: roots}
	ctx := context.Background()
	if h, err := client.New(srv.URL, client.WithTLSConfig(cfg)).Health(ctx); err != nil || h.Node != "db1" {
		t.Fatalf("with roots: %+v, %v", h, err)
	}
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	if h, err := client.New(srv.URL, client.WithHTTPClient(hc), client.WithTLSConfig(cfg)).Health(ctx); err != nil || h.Node != "db1" {
		t.Fatalf("injected client with roots: %+v, %v", h, err)
	}
	if hc.Transport != tr || tr.TLSClientConfig != nil && tr.TLSClientConfig.RootCAs != nil {
		t.Fatal("the injected client was changed")
	}
	var ue *client.UnreachableError
	if _, err := client.New(srv.URL).Health(ctx); err == nil || errors.As(err, new(*client.APIError)) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without roots: %v (unreachable: %v)", err, errors.As(err, &ue))
	}
}

// New takes host:port (HTTP), or a URL with a scheme; "" is DefaultAddr.
func TestNewAddr(t *testing.T) {
	if a := client.New("").Addr(); a != client.DefaultAddr {
		t.Fatalf("default addr %q", a)
	}
	var path string
	srv := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		answer(w, http.StatusOK, client.MaintStatus{Node: "db1"})
	})
	for _, addr := range []string{srv.URL + "/", strings.TrimPrefix(srv.URL, "http://")} {
		if m, err := client.New(addr).Maint(context.Background()); err != nil || m.Node != "db1" || path != "/v1/agent/maint" {
			t.Fatalf("%s: %+v %v (path %q)", addr, m, err, path)
		}
	}
}
