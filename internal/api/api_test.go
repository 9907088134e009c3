package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/testutil/agenttest"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/pkg/client"
)

func startAgent(t *testing.T, name string, key string, tags map[string]string, handlers ...string) (*agent.Agent, *client.Client, string) {
	t.Helper()
	return startAgentWith(t, name, key, tags, nil, handlers...)
}

// startAgentWith is startAgent with edit applied to the configuration.
func startAgentWith(t *testing.T, name string, key string, tags map[string]string, edit func(*config.Config), handlers ...string) (*agent.Agent, *client.Client, string) {
	t.Helper()
	c := agenttest.Config(t, name, key)
	c.Tags = tags
	c.EventHandlers = handlers
	if edit != nil {
		edit(c)
	}
	a := agenttest.Start(t, c)
	return a, client.New(agenttest.Serve(t, a), client.WithToken(a.APIToken())), c.Bind
}

// TestHealthNeedsAJoin: an agent whose start-up join reaches nobody (here a
// wrong gossip key, issue 14) is not healthy, while an agent with no join
// address configured is alone on purpose and healthy.
func TestHealthNeedsAJoin(t *testing.T) {
	ctx := context.Background()
	key, _ := agent.GenerateKey()
	other, _ := agent.GenerateKey()
	_, alone, bind := startAgent(t, "db1", key, nil)
	h, err := alone.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("lone agent with no join configured: health = %+v, %v; want ok", h, err)
	}

	_, stranger, _ := startAgentWith(t, "db2", other, nil, join(bind))
	// The first join attempt fails at once on the key; wait until it has.
	var ae *client.APIError
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err = stranger.Health(ctx)
		if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && strings.Contains(h.Status, "attempts") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent with the wrong key: health = %+v, %v; want 503 not joined", h, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(h.Status, "not joined: no node of "+bind+" answered") {
		t.Fatalf("status = %q, want the reason naming the join address", h.Status)
	}

	_, friend, _ := startAgentWith(t, "db3", key, nil, join(bind))
	deadline = time.Now().Add(10 * time.Second)
	for {
		h, err = friend.Health(ctx)
		if err == nil && h.Status == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent that joined: health = %+v, %v; want ok", h, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// join configures a start-up join address.
func join(addr string) func(*config.Config) {
	return func(c *config.Config) { c.Join = []string{addr} }
}

func TestAPIAgainstRealAgents(t *testing.T) {
	ctx := context.Background()
	key, _ := agent.GenerateKey()
	_, c1, bind1 := startAgent(t, "db1", key, map[string]string{"team": "db", "dc": "eu1"})
	a2, c2, _ := startAgent(t, "app1", key, map[string]string{"team": "app"})

	if _, err := c2.Join(ctx, nil, false); err == nil || !strings.Contains(err.Error(), "addrs: at least one address") {
		t.Fatalf("join without addrs: %v", err)
	}
	n, err := c2.Join(ctx, []string{bind1}, false)
	if err != nil || n != 1 {
		t.Fatalf("join = %d, %v", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ms, err := c1.Members(ctx, client.MemberFilter{Status: "alive"})
		if err == nil && len(ms) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members = %v, %v", ms, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, tc := range []struct {
		f    client.MemberFilter
		want string
	}{
		{client.MemberFilter{Tags: map[string]string{"team": "db"}}, "db1"},
		{client.MemberFilter{Tags: map[string]string{"team": "d"}}, ""}, // anchored
		{client.MemberFilter{Name: "app.*"}, "app1"},
		{client.MemberFilter{Status: "failed"}, ""},
		{client.MemberFilter{Tags: map[string]string{"dc": "eu.*", "team": "db|app"}}, "db1"},
	} {
		ms, err := c2.Members(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("filter %+v = %q, want %q", tc.f, got, tc.want)
		}
	}
	_, err = c1.Members(ctx, client.MemberFilter{Name: "("})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "name: bad regular expression") {
		t.Fatalf("bad regex: %v", err)
	}
	// The error reads as the agent's message; the status stays available.
	if err.Error() != ae.Message || strings.Contains(err.Error(), "400") {
		t.Errorf("error text %q, want the agent's message %q alone", err.Error(), ae.Message)
	}
	// force-leave of a node that is not a member: 404, naming it.
	_, err = c1.ForceLeaveNode(ctx, "nobody", true)
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || err.Error() != `no such member "nobody" (shoal members lists the members)` {
		t.Errorf("force-leave nobody: %v", err)
	}

	info, err := c2.Info(ctx)
	if err != nil || info.Node != "app1" || !info.Encrypted || info.Profile != "fast" || info.Timings.ProbeInterval != "150ms" {
		t.Fatalf("info = %+v, %v", info, err)
	}

	tags, err := c2.UpdateTags(ctx, map[string]string{"zone": "b"}, []string{"team"})
	if err != nil || tags["zone"] != "b" || tags["team"] != "" {
		t.Fatalf("tags = %v, %v", tags, err)
	}
	if _, err := c2.UpdateTags(ctx, map[string]string{"bad key": "x"}, nil); err == nil {
		t.Fatal("bad tag key accepted")
	}
	if a2.Serf().LocalMember().Tags["zone"] != "b" {
		t.Fatal("tag not applied")
	}

	if err := c1.Event(ctx, "deploy", []byte("v1"), false); err != nil {
		t.Fatal(err)
	}
	if err := c1.Event(ctx, "", nil, false); err == nil || !strings.Contains(err.Error(), "name: required") {
		t.Fatalf("event without name: %v", err)
	}
	qr, err := c1.Query(ctx, client.QueryRequest{Name: "ping", RequestAck: true, Timeout: "500ms"})
	if err != nil || len(qr.Acks) != 2 {
		t.Fatalf("query = %+v, %v", qr, err)
	}
	keys, err := c1.ListKeys(ctx)
	if err != nil || keys.Keys[key] != 2 {
		t.Fatalf("keys = %+v, %v", keys, err)
	}
	if _, err := c1.KeyOp(ctx, "install", "bogus"); err == nil || !strings.Contains(err.Error(), "not valid base64") {
		t.Fatalf("install bogus key: %v", err)
	}
	h, err := c1.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("health = %+v, %v", h, err)
	}

	// Monitor streams recent log lines.
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got := make(chan string, 1)
	go func() {
		_ = c1.Monitor(mctx, "info", func(line string) {
			select {
			case got <- line:
			default:
			}
		})
	}()
	select {
	case l := <-got:
		if !strings.Contains(l, "[INFO]") && !strings.Contains(l, "[WARN]") {
			t.Errorf("monitor line %q", l)
		}
	case <-mctx.Done():
		t.Fatal("monitor delivered nothing")
	}
}

func TestAPIErrorsAreJSON(t *testing.T) {
	a, c, _ := startAgent(t, "solo", "", nil)
	base := strings.TrimPrefix(c.Addr(), "")
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/v1/nope", "", 404, "no such endpoint"},
		{"POST", "/v1/agent/join", "{bad json", 400, "bad request body"},
		{"POST", "/v1/agent/join", `{"addrs":["x"],"extra":1}`, 400, `unknown field`},
		{"POST", "/v1/agent/force-leave", `{}`, 400, "node: required"},
		{"POST", "/v1/query", `{"name":"q","timeout":"forever"}`, 400, "want a duration"},
		{"POST", "/v1/keys/rotate", `{"key":"x"}`, 404, "unknown key operation"},
		{"POST", "/v1/keys/list", `{}`, 404, "unknown key operation"},
		{"GET", "/v1/keys", "", 400, "gossip encryption is not enabled"},
		{"GET", "/v1/monitor?level=loud", "", 400, "want trace, debug"},
		{"DELETE", "/v1/members", "", 405, "method DELETE not allowed"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		req.Header.Set(api.TokenHeader, a.APIToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s, want %d containing %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: content type %q", tc.method, tc.path, resp.Header.Get("Content-Type"))
		}
	}
	big := fmt.Sprintf(`{"name":"e","payload":"%s"}`, strings.Repeat("A", 2<<20))
	req, _ := http.NewRequest("POST", base+"/v1/event", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.TokenHeader, a.APIToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", resp.StatusCode)
	}
}

// No agent at the address: an *UnreachableError naming it and wrapping the
// network error. The advice on what to do (--http-addr, SHOAL_HTTP_ADDR) is
// the CLI's to add (internal/cli TestNoAgentAdvice), not the library's.
func TestClientUnreachable(t *testing.T) {
	addr := ports.Free(t)
	_, err := client.New(addr).Members(context.Background(), client.MemberFilter{})
	var ue *client.UnreachableError
	var oe *net.OpError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no shoal agent reachable at "+addr) || !errors.As(err, &oe) ||
		strings.Contains(err.Error(), "--http-addr") {
		t.Fatalf("got %v", err)
	}
}

// do sends a request to the agent's API and returns the status and body,
// which must be JSON. header holds header names and values, in pairs
// ("Host" sets the request's Host).
func do(t *testing.T, method, url, body string, header ...string) (int, []byte) {
	t.Helper()
	status, b, ct := send(t, method, url, body, header...)
	if !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: content type %q, want JSON", method, url, ct)
	}
	return status, b
}

// doRaw is do without the JSON content-type check (/metrics is text).
func doRaw(t *testing.T, method, url, body string, header ...string) (int, []byte) {
	t.Helper()
	status, b, _ := send(t, method, url, body, header...)
	return status, b
}

func send(t *testing.T, method, url, body string, header ...string) (status int, b []byte, contentType string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err = io.ReadAll(resp.Body)
	if err != nil && len(b) == 0 {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header.Get("Content-Type")
}

// errorOf decodes a JSON error body, failing if it is not one.
func errorOf(t *testing.T, body []byte) string {
	t.Helper()
	var e client.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("body %s is not a JSON error: %v", body, err)
	}
	return e.Error
}

func TestMaintOnAppAgent(t *testing.T) {
	ctx := context.Background()
	a, c, _ := startAgent(t, "app9", "", nil)

	st, err := c.Maint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (client.MaintStatus{Node: "app9"}); *st != want {
		t.Fatalf("GET maint = %+v, want %+v", *st, want)
	}
	status, body := do(t, "GET", c.Addr()+"/v1/agent/maint", "")
	if status != http.StatusOK || !strings.Contains(string(body), `"enabled": false`) {
		t.Fatalf("GET /v1/agent/maint: %d %s, want 200 with enabled false", status, body)
	}

	for _, tc := range []struct {
		name, body, want string
	}{
		{"enable on an app agent", `{"enable":true,"reason":"upgrade"}`, "role app"},
		{"disable on an app agent", `{"enable":false}`, "role app"},
		{"reason without enable", `{"enable":false,"reason":"x"}`, "a reason is only given when enabling maintenance"},
		{"unknown field", `{"enable":true,"why":"x"}`, "unknown field"},
		{"not json", `enable`, "bad request body"},
	} {
		status, body := do(t, "PUT", c.Addr()+"/v1/agent/maint", tc.body, api.TokenHeader, a.APIToken())
		if status != http.StatusBadRequest || !strings.Contains(errorOf(t, body), tc.want) {
			t.Errorf("%s: PUT %s = %d %s, want 400 mentioning %q", tc.name, tc.body, status, body, tc.want)
		}
	}

	// Through the client too, as shoal maint enable does.
	_, err = c.SetMaint(ctx, true, "upgrade")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "role app") {
		t.Fatalf("SetMaint on an app agent: %v, want a 400 naming role app", err)
	}
	// Nothing changed.
	if st, err := c.Maint(ctx); err != nil || st.Enabled || st.Reason != "" {
		t.Fatalf("after the refused enable: %+v, %v", st, err)
	}

	status, body = do(t, "POST", c.Addr()+"/v1/agent/maint", `{"enable":true}`)
	if status != http.StatusMethodNotAllowed || !strings.Contains(errorOf(t, body), "method POST not allowed") {
		t.Errorf("POST /v1/agent/maint = %d %s, want 405", status, body)
	}
}

func TestHistoryEndpoint(t *testing.T) {
	ctx := context.Background()
	_, c, _ := startAgent(t, "hist1", "", nil)

	status, body := do(t, "GET", c.Addr()+"/v1/history", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/history = %d %s", status, body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if e := strings.TrimSpace(string(raw["entries"])); !strings.HasPrefix(e, "[") {
		t.Errorf("entries = %s, want an array (never null)", e)
	}
	var h client.HistoryResponse
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Capacity != 1000 || h.Evicted != 0 || h.File != "" || h.Total != uint64(len(h.Entries)) {
		t.Errorf("history = capacity %d evicted %d file %q total %d entries %d; want the default ring of 1000, nothing evicted, no file",
			h.Capacity, h.Evicted, h.File, h.Total, len(h.Entries))
	}

	// Filters that match nothing still give an array.
	for _, q := range []string{"?node=nobody", "?kind=maint&limit=1", "?kind=pool", "?kind=isolation", "?since=2999-01-01T00:00:00Z", "?limit=0"} {
		status, body := do(t, "GET", c.Addr()+"/v1/history"+q, "")
		if status != http.StatusOK {
			t.Errorf("GET /v1/history%s = %d %s", q, status, body)
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil || !strings.HasPrefix(string(raw["entries"]), "[") {
			t.Errorf("GET /v1/history%s: entries %s, %v; want an array", q, raw["entries"], err)
		}
	}
	if h, err := c.History(ctx, client.HistoryFilter{Node: "nobody", Limit: 3}); err != nil || h.Entries == nil || len(h.Entries) != 0 {
		t.Errorf("client History for nobody = %+v, %v", h, err)
	}

	for _, tc := range []struct {
		query, param string
	}{
		{"?limit=abc", `limit "abc"`},
		{"?limit=-1", `limit "-1"`},
		{"?limit=1000001", `limit "1000001"`},
		{"?since=notatime", `since "notatime"`},
		{"?since=10m", `since "10m"`}, // the CLI turns durations into times; the API takes times only
		{"?kind=bogus", `unknown kind "bogus": want one of pool, health, conflict, term, isolation, maint`},
		{"?kind=maintenance", `unknown kind "maintenance"`},
	} {
		status, body := do(t, "GET", c.Addr()+"/v1/history"+tc.query, "")
		if status != http.StatusBadRequest || !strings.Contains(errorOf(t, body), tc.param) {
			t.Errorf("GET /v1/history%s = %d %s, want 400 naming %s", tc.query, status, body, tc.param)
		}
	}

	status, body = do(t, "POST", c.Addr()+"/v1/history", "{}")
	if status != http.StatusMethodNotAllowed || !strings.Contains(errorOf(t, body), "method POST not allowed on /v1/history") {
		t.Errorf("POST /v1/history = %d %s, want 405", status, body)
	}
}
