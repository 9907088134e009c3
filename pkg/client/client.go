// Package client is the Go client of the shoal agent's HTTP API, and its
// wire types. The shoal CLI uses it; other programs may import it.
//
// A Client talks to one agent:
//
//	c := client.New("127.0.0.1:8946", client.WithToken(tok))
//	p, err := c.Pool(ctx, "")
//
// Calls are bounded by their context and, when the context has no deadline,
// by the client's timeout (DefaultTimeout unless WithTimeout says
// otherwise); Monitor streams until its context ends. Errors are typed: an
// *APIError is an answer of the agent (its HTTP status and message), an
// *UnreachableError means no agent answered at the address (it wraps the
// network error), a *TimeoutError means the agent did not answer in time.
//
// The open routes (members, self, health, pool, maint, history, hooks)
// need no token; every other call needs the agent's API token (WithToken,
// or WithTokenFinder to find it on the first 401).
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAddr is the agent's default HTTP address.
const DefaultAddr = "127.0.0.1:8946"

// TokenHeader is the header that carries the API token.
const TokenHeader = "X-Shoal-Token"

// DefaultTimeout bounds a call whose context has no deadline, unless
// WithTimeout sets another bound.
const DefaultTimeout = 30 * time.Second

// hookTestWait is how long the agent waits at most for the handlers of
// POST /v1/hooks/test (the API's maxHookTestWait): TestHook's timeout is
// the client's plus this.
const hookTestWait = 2 * time.Minute

// The agent's default switchover waits, in seconds (SwitchoverRequest):
// the request's timeout counts them when the request leaves them zero.
// internal/view holds the agent's (a test holds them equal).
const (
	switchoverCatchUpSeconds = 30
	switchoverAppliedSeconds = 10
)

// Client talks to one agent. It is safe for concurrent use.
type Client struct {
	addr    string
	base    string
	http    *http.Client
	tls     *tls.Config
	timeout time.Duration // 0: calls are bounded by their context only

	mu     sync.Mutex
	token  string
	finder TokenFinder
	found  bool // the finder ran (it runs at most once)
}

// TokenFinder finds the API token when the agent asks for one (answers
// 401) and the client has none; c is the client asking. Its error is
// returned in place of the 401.
type TokenFinder func(ctx context.Context, c *Client) (string, error)

// Option configures a Client.
type Option func(*Client)

// WithToken sends tok as the API token with every request.
func WithToken(tok string) Option { return func(c *Client) { c.token = tok } }

// WithTokenFinder sets how to find the token on the first 401 answer; the
// request is then sent again, once, with it. Unused when WithToken gave
// one.
func WithTokenFinder(f TokenFinder) Option { return func(c *Client) { c.finder = f } }

// WithTLSConfig sets the TLS configuration for an https:// address (for
// example RootCAs holding the CA that signed the agent's certificate). It
// applies to the client's transport when that is an *http.Transport (the
// default one, or WithHTTPClient's); with another http.RoundTripper,
// configure TLS in it instead.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// WithHTTPClient sends the requests with hc instead of a client of the
// package's own. hc's Timeout, if set, applies to every call, Monitor's
// stream included; prefer WithTimeout, which leaves streams alone.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTimeout bounds each call whose context has no deadline to d (default
// DefaultTimeout); d <= 0 leaves calls bounded by their context only.
// Monitor is never bounded by it. Query adds the query's own timeout and
// TestHook the agent's wait for the handlers (2 minutes) to d.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = max(d, 0) }
}

// New returns a client for the agent at addr: "host:port" (HTTP),
// "http://host:port" or "https://host:port".
func New(addr string, opts ...Option) *Client {
	if addr == "" {
		addr = DefaultAddr
	}
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &Client{addr: addr, base: strings.TrimRight(base, "/"), timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.tls != nil {
		c.http = withTLS(c.http, c.tls)
	}
	return c
}

// withTLS returns a copy of hc whose transport uses cfg; hc is unchanged.
// A transport that is not an *http.Transport is kept as it is.
func withTLS(hc *http.Client, cfg *tls.Config) *http.Client {
	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return hc
	}
	tr.TLSClientConfig = cfg
	out := *hc
	out.Transport = tr
	return &out
}

// bound applies the client's timeout, plus extra, to a call whose ctx has
// no deadline.
func (c *Client) bound(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc, time.Duration) {
	if _, ok := ctx.Deadline(); ok || c.timeout <= 0 {
		return ctx, func() {}, 0
	}
	d := c.timeout + extra
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, d
}

// currentToken is the token to send, "" for none.
func (c *Client) currentToken() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// findToken runs the finder after a 401, once. retry reports whether the
// request should be sent again with the token found.
func (c *Client) findToken(ctx context.Context) (retry bool, err error) {
	c.mu.Lock()
	if c.finder == nil || c.found || c.token != "" {
		c.mu.Unlock()
		return false, nil
	}
	c.found = true
	f := c.finder
	c.mu.Unlock()
	tok, err := f(ctx, c)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.token = tok
	c.mu.Unlock()
	return true, nil
}

// sendAuthed sends a request; when the agent answers 401 and the client
// has a token finder, it finds the token once and sends the request again.
func (c *Client) sendAuthed(ctx context.Context, method, u string, body []byte) (*http.Response, error) {
	resp, err := c.send(ctx, method, u, body)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	retry, ferr := c.findToken(ctx)
	if ferr != nil {
		resp.Body.Close()
		return nil, ferr
	}
	if !retry {
		return resp, nil
	}
	resp.Body.Close()
	return c.send(ctx, method, u, body)
}

// send sends one request, with the token if there is one.
func (c *Client) send(ctx context.Context, method, u string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := c.currentToken(); tok != "" {
		req.Header.Set(TokenHeader, tok)
	}
	return c.http.Do(req)
}

// Addr is the address this client talks to.
func (c *Client) Addr() string { return c.addr }

// APIError is an error answered by the agent. Its text is the agent's
// message; Status is the HTTP status, for code that needs it (401: the
// token is missing or wrong, 404: no such member, cluster or endpoint).
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("the agent answered HTTP %d", e.Status)
	}
	return e.Message
}

// UnreachableError means no agent answered at the address: the connection
// failed. Err is the network error.
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no shoal agent reachable at %s (%v)", e.Addr, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// TimeoutError means the agent did not answer a call in time. Timeout is
// the client's bound that ran out (see WithTimeout), 0 when it was the
// context's own deadline. It matches context.DeadlineExceeded (errors.Is).
type TimeoutError struct {
	Addr    string
	Timeout time.Duration
	Err     error
}

func (e *TimeoutError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("no answer from the shoal agent at %s within %s", e.Addr, e.Timeout)
	}
	return fmt.Sprintf("no answer from the shoal agent at %s before the deadline", e.Addr)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	return c.doWithin(ctx, 0, method, path, q, in, out)
}

// doWithin is do with extra time on top of the client's timeout.
func (c *Client) doWithin(ctx context.Context, extra time.Duration, method, path string, q url.Values, in, out any) error {
	ctx, cancel, bound := c.bound(ctx, extra)
	defer cancel()
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	resp, err := c.sendAuthed(ctx, method, u, body)
	if err != nil {
		return c.transportError(err, bound)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &TimeoutError{Addr: c.addr, Timeout: bound, Err: err}
		}
		return fmt.Errorf("read answer from %s: %w", c.addr, err)
	}
	if resp.StatusCode/100 != 2 {
		var er ErrorResponse
		if json.Unmarshal(data, &er) == nil && er.Error != "" {
			return &APIError{Status: resp.StatusCode, Message: er.Error}
		}
		if out != nil && json.Unmarshal(data, out) == nil {
			return &APIError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
		}
		return &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(data))}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer from %s%s: %w", c.addr, path, err)
	}
	return nil
}

// transportError turns a failed round trip into an UnreachableError when
// no agent answered, and into a TimeoutError when one was connected but
// did not answer in time (bound: the client's timeout applied, 0 none).
func (c *Client) transportError(err error, bound time.Duration) error {
	var ne net.Error
	var oe *net.OpError
	dial := errors.As(err, &oe) && oe.Op == "dial"
	switch {
	case !dial && errors.Is(err, context.DeadlineExceeded):
		return &TimeoutError{Addr: c.addr, Timeout: bound, Err: err}
	case oe != nil || (errors.As(err, &ne) && !errors.Is(err, context.Canceled)):
		return &UnreachableError{Addr: c.addr, Err: err}
	}
	return err
}

// Members lists members matching f.
func (c *Client) Members(ctx context.Context, f MemberFilter) ([]Member, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	keys := make([]string, 0, len(f.Tags))
	for k := range f.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("tag", k+"="+f.Tags[k])
	}
	var r MembersResponse
	if err := c.do(ctx, http.MethodGet, "/v1/members", q, nil, &r); err != nil {
		return nil, err
	}
	return r.Members, nil
}

// Info describes the agent.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var r Info
	if err := c.do(ctx, http.MethodGet, "/v1/agent/self", nil, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Health is the agent's own health.
func (c *Client) Health(ctx context.Context) (*HealthResponse, error) {
	var r HealthResponse
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, nil, &r); err != nil {
		return &r, err
	}
	return &r, nil
}

// Join asks the agent to join addrs.
func (c *Client) Join(ctx context.Context, addrs []string, replay bool) (int, error) {
	var r JoinResponse
	err := c.do(ctx, http.MethodPost, "/v1/agent/join", nil, JoinRequest{Addrs: addrs, Replay: replay}, &r)
	return r.Joined, err
}

// Leave asks the agent to leave the cluster gracefully and exit.
func (c *Client) Leave(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/agent/leave", nil, struct{}{}, nil)
}

// ForceLeave marks a failed node as left (prune: forget it entirely). An
// unknown node is an *APIError with Status 404; an alive node is left
// alone (see ForceLeaveNode for what was done).
func (c *Client) ForceLeave(ctx context.Context, node string, prune bool) error {
	_, err := c.ForceLeaveNode(ctx, node, prune)
	return err
}

// ForceLeaveNode is ForceLeave, saying what was done.
func (c *Client) ForceLeaveNode(ctx context.Context, node string, prune bool) (ForceLeaveResponse, error) {
	var out ForceLeaveResponse
	err := c.do(ctx, http.MethodPost, "/v1/agent/force-leave", nil, ForceLeaveRequest{Node: node, Prune: prune}, &out)
	return out, err
}

// Event sends a user event.
func (c *Client) Event(ctx context.Context, name string, payload []byte, coalesce bool) error {
	return c.do(ctx, http.MethodPost, "/v1/event", nil, EventRequest{Name: name, Payload: payload, Coalesce: coalesce}, nil)
}

// Query runs a query and returns the collected responses.
func (c *Client) Query(ctx context.Context, req QueryRequest) (*QueryResponse, error) {
	var extra time.Duration
	if d, err := time.ParseDuration(req.Timeout); err == nil && d > 0 {
		extra = d
	}
	var r QueryResponse
	if err := c.doWithin(ctx, extra, http.MethodPost, "/v1/query", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// UpdateTags sets and deletes tags and returns the new set.
func (c *Client) UpdateTags(ctx context.Context, set map[string]string, del []string) (map[string]string, error) {
	var r TagsResponse
	if err := c.do(ctx, http.MethodPut, "/v1/agent/tags", nil, TagsRequest{Set: set, Delete: del}, &r); err != nil {
		return nil, err
	}
	return r.Tags, nil
}

// ListKeys lists the gossip keys in use across the cluster.
func (c *Client) ListKeys(ctx context.Context) (*KeyResponse, error) {
	var r KeyResponse
	err := c.do(ctx, http.MethodGet, "/v1/keys", nil, nil, &r)
	return &r, err
}

// KeyOp runs install, use or remove for key across the cluster.
func (c *Client) KeyOp(ctx context.Context, op, key string) (*KeyResponse, error) {
	var r KeyResponse
	err := c.do(ctx, http.MethodPost, "/v1/keys/"+url.PathEscape(op), nil, KeyRequest{Key: key}, &r)
	return &r, err
}

// Monitor streams log lines at or above level to fn until ctx ends or the
// agent closes the stream.
func (c *Client) Monitor(ctx context.Context, level string, fn func(line string)) error {
	q := url.Values{"level": {level}}
	u := c.base + "/v1/monitor?" + q.Encode()
	resp, err := c.sendAuthed(ctx, http.MethodGet, u, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &UnreachableError{Addr: c.addr, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var er ErrorResponse
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = json.Unmarshal(data, &er)
		return &APIError{Status: resp.StatusCode, Message: er.Error}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

// WaitReady polls the agent until it answers or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		_, err := c.Info(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent at %s not ready: %w", c.addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Pool returns the routing pool; cluster "" means every cluster.
func (c *Client) Pool(ctx context.Context, cluster string) (*PoolResponse, error) {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	var r PoolResponse
	if err := c.do(ctx, http.MethodGet, "/v1/pool", q, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Maint returns the agent's node maintenance state.
func (c *Client) Maint(ctx context.Context) (*MaintStatus, error) {
	var r MaintStatus
	if err := c.do(ctx, http.MethodGet, "/v1/agent/maint", nil, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// SetMaint enables (with a reason) or disables maintenance on the agent's
// node. Every agent then keeps the node out of the pool.
func (c *Client) SetMaint(ctx context.Context, enable bool, reason string) (*MaintStatus, error) {
	var r MaintStatus
	if err := c.do(ctx, http.MethodPut, "/v1/agent/maint", nil, MaintRequest{Enable: enable, Reason: reason}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// History returns the agent's pool and health transitions, oldest first.
func (c *Client) History(ctx context.Context, f HistoryFilter) (*HistoryResponse, error) {
	q := url.Values{}
	for k, v := range map[string]string{"node": f.Node, "cluster": f.Cluster, "kind": f.Kind} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var r HistoryResponse
	if err := c.do(ctx, http.MethodGet, "/v1/history", q, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Hooks lists the agent's event handlers with their queues and last runs.
// Without the token the agent hides each handler's arguments; the client
// then tries its token finder once and asks again, and returns the hidden
// view if no token can be found.
func (c *Client) Hooks(ctx context.Context) (*HooksResponse, error) {
	var r HooksResponse
	if err := c.do(ctx, http.MethodGet, "/v1/hooks", nil, nil, &r); err != nil {
		return nil, err
	}
	if !r.Redacted {
		return &r, nil
	}
	if retry, err := c.findToken(ctx); err != nil || !retry {
		return &r, nil
	}
	var full HooksResponse
	if err := c.do(ctx, http.MethodGet, "/v1/hooks", nil, nil, &full); err != nil {
		return nil, err
	}
	return &full, nil
}

// TestHook runs the handlers matching a synthetic event once and waits for
// them.
func (c *Client) TestHook(ctx context.Context, req HookTestRequest) (*HookTestResponse, error) {
	var r HookTestResponse
	if err := c.doWithin(ctx, hookTestWait, http.MethodPost, "/v1/hooks/test", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Switchover moves a cluster's writer to req.To and waits until every
// router applied the new term (or the waits ran out). An error means it
// did not start (the agent says why) or the request failed; a switchover
// that ran and failed returns its steps with Error set.
// Failover asks the agent for the failover of a cluster whose writer is
// dead, or with DryRun what one would do. A run takes up to about two
// minutes (the survey's drain and every step).
func (c *Client) Failover(ctx context.Context, req FailoverRequest) (*Failover, error) {
	var r Failover
	if err := c.doWithin(ctx, 3*time.Minute, http.MethodPost, "/v1/failover", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (c *Client) Switchover(ctx context.Context, req SwitchoverRequest) (*Switchover, error) {
	var r Switchover
	extra := time.Duration((max(req.CatchUpSeconds, switchoverCatchUpSeconds)+max(req.AppliedSeconds, switchoverAppliedSeconds))*float64(time.Second)) + time.Minute
	if err := c.doWithin(ctx, extra, http.MethodPost, "/v1/switchover", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
