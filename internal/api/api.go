// Package api serves the agent's HTTP JSON API. Every error is a JSON body
// {"error": "..."} with a fitting HTTP status.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/ui"
	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

// Backend is what the API needs from the agent. It speaks the agent's
// types (package view and serf's); the handlers convert them to the public
// wire types of pkg/client (convert.go), here and nowhere else.
type Backend interface {
	Info(httpAddr string) view.Info
	Members() []serf.Member
	Join(addrs []string, replay bool) (int, error)
	// ForceLeave fails with an error wrapping ErrNoSuchMember when node is
	// not a member.
	ForceLeave(node string, prune bool) (view.ForceLeave, error)
	UserEvent(name string, payload []byte, coalesce bool) error
	Query(name string, payload []byte, params *serf.QueryParam) (*serf.QueryResponse, error)
	UpdateTags(set map[string]string, del []string) (map[string]string, error)
	KeyOp(op, key string) (*serf.KeyResponse, error)
	Monitor(f func(line string)) (stop func())
	RequestLeave()
	PoolView(cluster string) (view.Pool, error)
	LocalHealth() (role string, mysql *view.LocalHealth)
	Maint() view.Maint
	SetMaint(enable bool, reason string) (view.Maint, error)
	// Switchover runs a switchover; an error wrapping view.ErrSwitchover
	// means it could not start (answered 409, or 400 for a
	// *view.SwitchoverRequestError).
	Switchover(ctx context.Context, req view.SwitchoverRequest) (view.Switchover, error)
	// Failover runs (or with DryRun, plans) the failover of a cluster
	// whose writer is dead; an error wrapping view.ErrFailoverRequest is
	// answered 400, view.ErrFailover 409 (with the result when there is
	// one).
	Failover(ctx context.Context, req view.FailoverRequest) (view.Failover, error)
	History(f history.Filter) view.History
	// ReplicaLags is each replica's lag as the agent judges it now, by
	// node name (GET /v1/members shows it on the member).
	ReplicaLags() map[string]view.Lag
	// MemberRTT is the round trip to a member estimated from serf's
	// network coordinates; false when unknown (and for the agent itself).
	MemberRTT(name string) (time.Duration, bool)
	HookStats() []hooks.HandlerStats
	TestHook(ctx context.Context, req view.HookTest) (view.HookTestResult, error)
	// APIToken is the token the closed routes need; APITokenFile where
	// it is kept (named in the 401 answer).
	APIToken() string
	APITokenFile() string
}

// ErrNoSuchMember is wrapped by Backend errors about a node that is not a
// member (answered 404). It is view.ErrNoSuchMember, which the agent wraps
// without importing this package.
var ErrNoSuchMember = view.ErrNoSuchMember

// maxBody bounds every request body.
const maxBody = 1 << 20

// Server is the HTTP API handler.
type Server struct {
	b        Backend
	log      *slog.Logger
	mux      *http.ServeMux
	httpAddr string
	// hosts are the DNS names answered in Host besides IP literals and
	// localhost (lower case): the listener's own name, set by AllowHosts.
	hosts  map[string]bool
	routes []route
}

// New returns the API handler for a listener on httpAddr. metrics, if not
// nil, is served at /metrics.
func New(b Backend, log *slog.Logger, httpAddr string, metrics http.Handler) *Server {
	s := &Server{b: b, log: log, mux: http.NewServeMux(), httpAddr: httpAddr, hosts: map[string]bool{}}
	s.AllowHosts(httpAddr)
	// The one table of endpoints. open: a view without secrets, served
	// without the token; every other route needs it.
	s.routes = []route{
		{method: "GET", path: "/v1/members", open: true, h: s.members},
		{method: "GET", path: "/v1/agent/self", open: true, h: s.self},
		{method: "GET", path: LivePath, open: true, h: live},
		{method: "POST", path: "/v1/agent/join", h: s.join},
		{method: "POST", path: "/v1/agent/leave", h: s.leave},
		{method: "POST", path: "/v1/agent/force-leave", h: s.forceLeave},
		{method: "PUT", path: "/v1/agent/tags", h: s.tags},
		{method: "POST", path: "/v1/agent/tags", h: s.tags},
		{method: "POST", path: "/v1/event", h: s.event},
		{method: "POST", path: "/v1/query", h: s.query},
		{method: "GET", path: "/v1/keys", h: s.listKeys},
		{method: "POST", path: "/v1/keys/{op}", h: s.keyOp},
		{method: "GET", path: "/v1/monitor", h: s.monitor},
		{method: "GET", path: "/v1/health", open: true, h: s.health},
		{method: "GET", path: "/v1/pool", open: true, h: s.pool},
		{method: "GET", path: "/v1/agent/maint", open: true, h: s.maint},
		{method: "PUT", path: "/v1/agent/maint", h: s.setMaint},
		{method: "POST", path: "/v1/switchover", h: s.switchover},
		{method: "POST", path: "/v1/failover", h: s.failover},
		{method: "GET", path: "/v1/history", open: true, h: s.history},
		// The status page (internal/ui): static files that read the open
		// routes above; no write is possible from it.
		{method: "GET", path: "/ui", open: true, h: ui.Page},
		{method: "GET", path: "/ui/{asset}", open: true, h: ui.Asset},
		// Open, with each handler's arguments hidden unless the request
		// carries the token (see hooks).
		{method: "GET", path: "/v1/hooks", open: true, h: s.hooks},
		{method: "POST", path: "/v1/hooks/test", h: s.testHook},
	}
	if metrics != nil {
		s.routes = append(s.routes, route{method: "GET", path: "/metrics", open: true, h: metrics.ServeHTTP})
	}
	seen := map[string]bool{}
	for _, rt := range s.routes {
		s.mux.HandleFunc(rt.method+" "+rt.path, s.guard(rt))
		if seen[rt.path] {
			continue
		}
		seen[rt.path] = true
		// A known path asked with another method gets a JSON 405.
		s.mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed on %s", r.Method, r.URL.Path))
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP implements http.Handler, recovering from panics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("api handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
			writeError(w, http.StatusInternalServerError, errors.New("internal error"))
		}
	}()
	if status, err := s.checkBrowser(r); err != nil {
		writeError(w, status, err)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, client.ErrorResponse{Error: err.Error()})
}

// decode reads a JSON body strictly: bounded size, no unknown fields, one
// value and nothing after it but white space.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Anything but the end of the body after the value is refused:
		// another value, a stray byte or a broken read.
		var se *json.SyntaxError
		switch _, terr := dec.Token(); {
		case terr == io.EOF:
		case terr == nil || errors.As(terr, &se):
			err = errTrailingData
		default:
			err = terr
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", maxBody))
			return false
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("bad request body: %w", err))
		return false
	}
	return true
}

// errTrailingData: a body with more after its JSON value ({}{}, {}xxxx).
var errTrailingData = errors.New("trailing data after the JSON body")

// ToMember converts a serf member to the API type. The member is admitted
// first (member.FromSerf): one that breaks the rules for gossiped names and
// tags gets Invalid and escaped Name and Tags; a valid db member gets its
// health tag as admission decoded it.
func ToMember(sm serf.Member) client.Member {
	v := member.FromSerf(sm)
	tg := v.Tags
	if tg == nil {
		tg = map[string]string{}
	}
	out := client.Member{
		Name: v.Name, Addr: sm.Addr.String(), Port: sm.Port, Status: sm.Status.String(), Tags: tg,
		Protocol: [3]uint8{sm.ProtocolMin, sm.ProtocolMax, sm.ProtocolCur},
		Delegate: [3]uint8{sm.DelegateMin, sm.DelegateMax, sm.DelegateCur},
	}
	switch {
	case !v.Problem.OK():
		out.Invalid = &client.MemberProblem{Reason: string(v.Problem.Reason), Detail: v.Problem.Detail}
	case v.Tags[tags.KeyRole] != tags.RoleDB:
		// An app member has no server, so no health to show.
	case v.Health != nil:
		out.Health = memberHealth(*v.Health)
	case v.HealthErr != "":
		out.Health = &client.MemberHealth{Error: v.HealthErr}
	default:
		out.Health = &client.MemberHealth{Error: "no health tag published"}
	}
	return out
}

func anchored(field, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("%s: bad regular expression %q: %w", field, expr, err)
	}
	return re, nil
}

func (s *Server) members(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var statusRe, nameRe *regexp.Regexp
	var err error
	if v := q.Get("status"); v != "" {
		if statusRe, err = anchored("status", v); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
	}
	if v := q.Get("name"); v != "" {
		if nameRe, err = anchored("name", v); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
	}
	tagRes := map[string]*regexp.Regexp{}
	for _, t := range q["tag"] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			writeError(w, http.StatusBadRequest, fmt.Errorf("tag filter %q: want key=regex", t))
			return
		}
		if tagRes[k], err = anchored("tag "+k, v); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
	}
	out := []client.Member{}
	for _, sm := range s.b.Members() {
		m := ToMember(sm)
		if rtt, ok := s.b.MemberRTT(sm.Name); ok {
			sec := rtt.Seconds()
			m.RTTSeconds = &sec
		}
		if statusRe != nil && !statusRe.MatchString(m.Status) {
			continue
		}
		if nameRe != nil && !nameRe.MatchString(m.Name) {
			continue
		}
		ok := true
		for k, re := range tagRes {
			if !re.MatchString(m.Tags[k]) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	withLags(out, s.b.ReplicaLags())
	writeJSON(w, http.StatusOK, client.MembersResponse{Members: out})
}

func (s *Server) self(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, toInfo(s.b.Info(s.httpAddr)))
}

// LivePath answers 200 {"status": "alive"} while the agent's HTTP server
// runs, and nothing else: the liveness probe. It is served even when every
// connection slot is busy (LimitedListener's reserved slots).
const LivePath = "/v1/agent/live"

func live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

// health answers 200 when the agent is healthy, 503 otherwise (for load
// balancers, container and k8s probes). Healthy is: gossip alive; joined,
// that is the start-up join reached a node or no join address is configured
// (alone on purpose); its health reaches the cluster; and, on a db agent,
// its MySQL is passing. The status names the first check that fails.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	info := s.b.Info(s.httpAddr)
	role, mysql := s.b.LocalHealth()
	pub := info.Publish
	cpub := toPublish(pub)
	resp := client.HealthResponse{Status: "ok", Node: info.Node, Gossip: info.Status, Role: role, MySQL: toLocalHealth(mysql), Publish: &cpub}
	switch {
	case info.Status != "alive":
		resp.Status = "gossip " + info.Status
	case !info.Join.Joined && len(info.Join.Addrs) > 0:
		resp.Status = notJoined(info.Join)
	case !pub.OK && (pub.MinimalHealth || len(pub.WithheldTags) == 0):
		// The cluster does not see this node's health as it is.
		resp.Status = "health not published: " + pub.Error
	case mysql != nil && mysql.State != "passing":
		resp.Status = "mysql " + mysql.State
	}
	if resp.Status != "ok" {
		writeJSON(w, http.StatusServiceUnavailable, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// notJoined is the health status of an agent whose start-up join has not
// reached any node yet (a wrong gossip key, a firewall, peers down).
func notJoined(j view.JoinStatus) string {
	st := fmt.Sprintf("not joined: no node of %s answered", strings.Join(j.Addrs, ", "))
	if j.Attempts > 0 {
		st += fmt.Sprintf(" (%d attempts)", j.Attempts)
	}
	if j.LastError != "" {
		st += ": " + j.LastError
	}
	return st
}

func (s *Server) pool(w http.ResponseWriter, r *http.Request) {
	p, err := s.b.PoolView(r.URL.Query().Get("cluster"))
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	writeJSON(w, http.StatusOK, ToPool(p))
}

func (s *Server) join(w http.ResponseWriter, r *http.Request) {
	var req client.JoinRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Addrs) == 0 {
		writeError(w, http.StatusBadRequest, errors.New("addrs: at least one address is required"))
		return
	}
	n, err := s.b.Join(req.Addrs, req.Replay)
	if n == 0 && err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("join %v: %w", req.Addrs, err))
		return
	}
	writeJSON(w, http.StatusOK, client.JoinResponse{Joined: n})
}

func (s *Server) leave(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "leaving"})
	s.b.RequestLeave()
}

func (s *Server) forceLeave(w http.ResponseWriter, r *http.Request) {
	var req client.ForceLeaveRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Node == "" {
		writeError(w, http.StatusBadRequest, errors.New("node: required"))
		return
	}
	resp, err := s.b.ForceLeave(req.Node, req.Prune)
	switch {
	case errors.Is(err, ErrNoSuchMember):
		writeError(w, http.StatusNotFound, err)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Errorf("force-leave %s: %w", req.Node, err))
		return
	}
	writeJSON(w, http.StatusOK, toForceLeave(resp))
}

func (s *Server) tags(w http.ResponseWriter, r *http.Request) {
	var req client.TagsRequest
	if !decode(w, r, &req) {
		return
	}
	tags, err := s.b.UpdateTags(req.Set, req.Delete)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, client.TagsResponse{Tags: tags})
}

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	var req client.EventRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" {
		writeError(w, http.StatusBadRequest, errors.New("name: required"))
		return
	}
	if err := s.b.UserEvent(req.Name, req.Payload, req.Coalesce); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("event %s: %w", req.Name, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "sent"})
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	var req client.QueryRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" {
		writeError(w, http.StatusBadRequest, errors.New("name: required"))
		return
	}
	params := &serf.QueryParam{FilterNodes: req.FilterNode, FilterTags: req.FilterTags, RequestAck: req.RequestAck}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > 5*time.Minute {
			writeError(w, http.StatusBadRequest, fmt.Errorf("timeout %q: want a duration from 1ms to 5m", req.Timeout))
			return
		}
		params.Timeout = d
	}
	start := time.Now()
	resp, err := s.b.Query(req.Name, req.Payload, params)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("query %s: %w", req.Name, err))
		return
	}
	out := client.QueryResponse{Acks: []string{}, Responses: map[string][]byte{}}
	ackCh, respCh := resp.AckCh(), resp.ResponseCh()
	for ackCh != nil || respCh != nil {
		select {
		case a, ok := <-ackCh:
			if !ok {
				ackCh = nil
				continue
			}
			out.Acks = append(out.Acks, a)
		case nr, ok := <-respCh:
			if !ok {
				respCh = nil
				continue
			}
			out.Responses[nr.From] = nr.Payload
		case <-r.Context().Done():
			resp.Close()
			return
		}
	}
	sort.Strings(out.Acks)
	out.Duration = time.Since(start).Round(time.Millisecond).String()
	writeJSON(w, http.StatusOK, out)
}

func toKeyResponse(kr *serf.KeyResponse) client.KeyResponse {
	return client.KeyResponse{NumNodes: kr.NumNodes, NumResp: kr.NumResp, NumErr: kr.NumErr, Messages: kr.Messages, Keys: kr.Keys}
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	s.runKeyOp(w, "list", "")
}

func (s *Server) keyOp(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	switch op {
	case "install", "use", "remove":
	default:
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown key operation %q (want install, use or remove)", op))
		return
	}
	var req client.KeyRequest
	if !decode(w, r, &req) {
		return
	}
	s.runKeyOp(w, op, req.Key)
}

func (s *Server) runKeyOp(w http.ResponseWriter, op, key string) {
	kr, err := s.b.KeyOp(op, key)
	if err != nil && kr == nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("keys %s: %w", op, err))
		return
	}
	status := http.StatusOK
	if err != nil || kr.NumErr > 0 {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, toKeyResponse(kr))
}

// monitor streams log lines as text until the client goes away. Lines are
// buffered per client and dropped (with a marker line) when it reads slowly.
func (s *Server) monitor(w http.ResponseWriter, r *http.Request) {
	level := r.URL.Query().Get("level")
	if level == "" {
		level = "info"
	}
	switch strings.ToLower(level) {
	case "trace", "debug", "info", "warn", "error", "err":
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("level %q: want trace, debug, info, warn or error", level))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, errors.New("streaming unsupported"))
		return
	}
	lines := make(chan string, 512)
	var dropped atomic.Int64
	stop := s.b.Monitor(func(line string) {
		if !levelAtLeast(line, level) {
			return
		}
		select {
		case lines <- line:
		default:
			dropped.Add(1)
		}
	})
	defer stop()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case l := <-lines:
			if _, err := fmt.Fprintln(w, l); err != nil {
				return
			}
			for n := len(lines); n > 0; n-- {
				fmt.Fprintln(w, <-lines)
			}
			if d := dropped.Swap(0); d > 0 {
				fmt.Fprintf(w, "%s [WARN] monitor: dropped %d log lines: client reads too slowly\n", time.Now().UTC().Format("2006/01/02 15:04:05.000"), d)
			}
			flusher.Flush()
		}
	}
}

func levelAtLeast(line, level string) bool {
	order := []string{"TRACE", "DEBUG", "INFO", "WARN", "ERR"}
	want := strings.ToUpper(level)
	if want == "ERROR" {
		want = "ERR"
	}
	min := 2
	for i, l := range order {
		if l == want {
			min = i
		}
	}
	for i, l := range order {
		if strings.Contains(line, "["+l+"]") {
			return i >= min
		}
	}
	return true
}

func (s *Server) maint(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, toMaint(s.b.Maint()))
}

func (s *Server) setMaint(w http.ResponseWriter, r *http.Request) {
	var req client.MaintRequest
	if !decode(w, r, &req) {
		return
	}
	if !req.Enable && req.Reason != "" {
		writeError(w, http.StatusBadRequest, errors.New("a reason is only given when enabling maintenance"))
		return
	}
	st, err := s.b.SetMaint(req.Enable, req.Reason)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, toMaint(st))
}

func (s *Server) switchover(w http.ResponseWriter, r *http.Request) {
	var req client.SwitchoverRequest
	if !decode(w, r, &req) {
		return
	}
	vr, err := view.SwitchoverRequest{To: req.To, Cluster: req.Cluster,
		CatchUp: seconds(req.CatchUpSeconds), Applied: seconds(req.AppliedSeconds), Force: req.Force}.Normalize()
	if err == nil {
		if p, perr := s.b.PoolView(""); perr == nil {
			err = checkSwitchoverNames(p, vr)
		}
	}
	if err == nil {
		var res view.Switchover
		res, err = s.b.Switchover(r.Context(), vr)
		if err == nil {
			writeJSON(w, http.StatusOK, toSwitchover(res))
			return
		}
	}
	var re *view.SwitchoverRequestError
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, view.ErrSwitchover):
		writeError(w, http.StatusConflict, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

func (s *Server) failover(w http.ResponseWriter, r *http.Request) {
	var req client.FailoverRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := s.b.Failover(r.Context(), view.FailoverRequest{Cluster: req.Cluster, DryRun: req.DryRun})
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, toFailover(res))
	case errors.Is(err, view.ErrFailoverRequest):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, view.ErrFailover):
		writeError(w, http.StatusConflict, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

// checkSwitchoverNames refuses a request whose cluster, or whose target,
// is not in this agent's pool (a bad argument: 400), before the agent
// checks the rest (a state that may change: 409).
func checkSwitchoverNames(p view.Pool, req view.SwitchoverRequest) error {
	for _, c := range p.Clusters {
		if req.Cluster != "" && c.Name != req.Cluster {
			continue
		}
		for _, l := range [][]view.PoolNode{c.Writers, c.Readers, c.Out} {
			for _, n := range l {
				if n.Name == req.To {
					return nil
				}
			}
		}
		if req.Cluster != "" {
			return &view.SwitchoverRequestError{Field: view.SwitchoverFieldTo, Value: strconv.Quote(req.To),
				Reason: fmt.Sprintf("not a db member of cluster %q in this agent's pool", req.Cluster)}
		}
	}
	if req.Cluster != "" {
		return &view.SwitchoverRequestError{Field: view.SwitchoverFieldCluster, Value: strconv.Quote(req.Cluster),
			Reason: "no such cluster in this agent's pool"}
	}
	return &view.SwitchoverRequestError{Field: view.SwitchoverFieldTo, Value: strconv.Quote(req.To),
		Reason: "not a db member of any cluster in this agent's pool"}
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// maxHistoryLimit bounds ?limit= (the ring holds at most a million entries).
const maxHistoryLimit = 1_000_000

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kind, err := history.ParseKind(q.Get("kind"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	f := history.Filter{Node: q.Get("node"), Cluster: q.Get("cluster"), Kind: kind}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("since %q: want an RFC3339 time", v))
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxHistoryLimit {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number from 0 to %d", v, maxHistoryLimit))
			return
		}
		f.Limit = n
	}
	writeJSON(w, http.StatusOK, toHistory(s.b.History(f)))
}

// hooks lists the event handlers. A handler's arguments may hold a secret
// (env TOKEN=... cmd, --password=...), so without the API token each spec
// is shown as its filter and program only, and Redacted is set.
func (s *Server) hooks(w http.ResponseWriter, r *http.Request) {
	hs := toHookStats(s.b.HookStats())
	resp := client.HooksResponse{Handlers: hs}
	if !s.hasToken(r) {
		for i := range hs {
			hs[i].Spec = hooks.RedactSpec(hs[i].Spec)
		}
		resp.Redacted = true
	}
	writeJSON(w, http.StatusOK, resp)
}

// maxHookTestWait bounds how long POST /v1/hooks/test waits for the runs.
const maxHookTestWait = 2 * time.Minute

func (s *Server) testHook(w http.ResponseWriter, r *http.Request) {
	var req client.HookTestRequest
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxHookTestWait)
	defer cancel()
	res, err := s.b.TestHook(ctx, view.HookTest{Event: req.Event, Name: req.Name, Payload: req.Payload})
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, client.HookTestResponse{Handlers: toHookStats(res.Handlers), Response: res.Response, TimedOut: res.TimedOut})
}
