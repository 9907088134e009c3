// Package client is the Go client of the shoal agent's HTTP API. The shoal
// CLI uses it; other programs may import it.
package client

import (
	"bufio"
	"bytes"
	"context"
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
	"time"
)

// DefaultAddr is the agent's default HTTP address.
const DefaultAddr = "127.0.0.1:8946"

// Client talks to one agent.
type Client struct {
	addr string
	base string
	http *http.Client
}

// New returns a client for the agent at addr ("host:port" or a URL).
func New(addr string) *Client {
	if addr == "" {
		addr = DefaultAddr
	}
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{addr: addr, base: strings.TrimRight(base, "/"), http: &http.Client{}}
}

// Addr is the address this client talks to.
func (c *Client) Addr() string { return c.addr }

// APIError is an error answered by the agent.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("agent answered %d: %s", e.Status, e.Message) }

// UnreachableError means no agent answered at the address.
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no shoal agent reachable at %s (%v); start one with `shoal agent`, or point elsewhere with --http-addr or SHOAL_HTTP_ADDR", e.Addr, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &oe) || (errors.As(err, &ne) && !errors.Is(err, context.Canceled)) {
			return &UnreachableError{Addr: c.addr, Err: err}
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
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

// ForceLeave marks a failed node as left (prune: forget it entirely).
func (c *Client) ForceLeave(ctx context.Context, node string, prune bool) error {
	return c.do(ctx, http.MethodPost, "/v1/agent/force-leave", nil, ForceLeaveRequest{Node: node, Prune: prune}, nil)
}

// Event sends a user event.
func (c *Client) Event(ctx context.Context, name string, payload []byte, coalesce bool) error {
	return c.do(ctx, http.MethodPost, "/v1/event", nil, EventRequest{Name: name, Payload: payload, Coalesce: coalesce}, nil)
}

// Query runs a query and returns the collected responses.
func (c *Client) Query(ctx context.Context, req QueryRequest) (*QueryResponse, error) {
	var r QueryResponse
	if err := c.do(ctx, http.MethodPost, "/v1/query", nil, req, &r); err != nil {
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/monitor?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
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
func (c *Client) Hooks(ctx context.Context) (*HooksResponse, error) {
	var r HooksResponse
	if err := c.do(ctx, http.MethodGet, "/v1/hooks", nil, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// TestHook runs the handlers matching a synthetic event once and waits for
// them.
func (c *Client) TestHook(ctx context.Context, req HookTestRequest) (*HookTestResponse, error) {
	var r HookTestResponse
	if err := c.do(ctx, http.MethodPost, "/v1/hooks/test", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
