// Package api serves the agent's HTTP JSON API. Every error is a JSON body
// {"error": "..."} with a fitting HTTP status.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/pkg/client"
)

// Backend is what the API needs from the agent.
type Backend interface {
	Info(httpAddr string) client.Info
	Members() []serf.Member
	Join(addrs []string, replay bool) (int, error)
	ForceLeave(node string, prune bool) error
	UserEvent(name string, payload []byte, coalesce bool) error
	Query(name string, payload []byte, params *serf.QueryParam) (*serf.QueryResponse, error)
	UpdateTags(set map[string]string, del []string) (map[string]string, error)
	KeyOp(op, key string) (*serf.KeyResponse, error)
	Monitor(f func(line string)) (stop func())
	RequestLeave()
	PoolView(cluster string) (client.PoolResponse, error)
	LocalHealth() (role string, mysql *client.LocalHealth)
	Maint() client.MaintStatus
	SetMaint(enable bool, reason string) (client.MaintStatus, error)
	History(f client.HistoryFilter) client.HistoryResponse
	HookStats() []client.HookStats
	TestHook(ctx context.Context, req client.HookTestRequest) (client.HookTestResponse, error)
}

// maxBody bounds every request body.
const maxBody = 1 << 20

// Server is the HTTP API handler.
type Server struct {
	b        Backend
	log      *slog.Logger
	mux      *http.ServeMux
	httpAddr string
}

// New returns the API handler. metrics, if not nil, is served at /metrics.
func New(b Backend, log *slog.Logger, httpAddr string, metrics http.Handler) *Server {
	s := &Server{b: b, log: log, mux: http.NewServeMux(), httpAddr: httpAddr}
	s.mux.HandleFunc("GET /v1/members", s.members)
	s.mux.HandleFunc("GET /v1/agent/self", s.self)
	s.mux.HandleFunc("POST /v1/agent/join", s.join)
	s.mux.HandleFunc("POST /v1/agent/leave", s.leave)
	s.mux.HandleFunc("POST /v1/agent/force-leave", s.forceLeave)
	s.mux.HandleFunc("PUT /v1/agent/tags", s.tags)
	s.mux.HandleFunc("POST /v1/agent/tags", s.tags)
	s.mux.HandleFunc("POST /v1/event", s.event)
	s.mux.HandleFunc("POST /v1/query", s.query)
	s.mux.HandleFunc("GET /v1/keys", s.listKeys)
	s.mux.HandleFunc("POST /v1/keys/{op}", s.keyOp)
	s.mux.HandleFunc("GET /v1/monitor", s.monitor)
	s.mux.HandleFunc("GET /v1/health", s.health)
	s.mux.HandleFunc("GET /v1/pool", s.pool)
	s.mux.HandleFunc("GET /v1/agent/maint", s.maint)
	s.mux.HandleFunc("PUT /v1/agent/maint", s.setMaint)
	s.mux.HandleFunc("GET /v1/history", s.history)
	s.mux.HandleFunc("GET /v1/hooks", s.hooks)
	s.mux.HandleFunc("POST /v1/hooks/test", s.testHook)
	if metrics != nil {
		s.mux.Handle("GET /metrics", metrics)
	}
	// Known paths asked with another method get a JSON 405.
	for _, p := range []string{"/v1/members", "/v1/agent/self", "/v1/agent/join", "/v1/agent/leave",
		"/v1/agent/force-leave", "/v1/agent/tags", "/v1/event", "/v1/query", "/v1/keys", "/v1/keys/{op}",
		"/v1/monitor", "/v1/health", "/v1/pool", "/v1/agent/maint", "/v1/history", "/v1/hooks", "/v1/hooks/test", "/metrics"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
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

// decode reads a JSON body strictly: bounded size, no unknown fields.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
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

// ToMember converts a serf member to the API type.
func ToMember(m serf.Member) client.Member {
	tags := m.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return client.Member{
		Name: m.Name, Addr: m.Addr.String(), Port: m.Port, Status: m.Status.String(), Tags: tags,
		Protocol: [3]uint8{m.ProtocolMin, m.ProtocolMax, m.ProtocolCur},
		Delegate: [3]uint8{m.DelegateMin, m.DelegateMax, m.DelegateCur},
	}
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
	for _, m := range s.b.Members() {
		if statusRe != nil && !statusRe.MatchString(m.Status.String()) {
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
			out = append(out, ToMember(m))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, client.MembersResponse{Members: out})
}

func (s *Server) self(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.b.Info(s.httpAddr))
}

// health answers 200 when the agent is in the cluster and, on a db agent,
// its MySQL is passing; 503 otherwise (for load balancers and k8s probes).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	info := s.b.Info(s.httpAddr)
	role, mysql := s.b.LocalHealth()
	resp := client.HealthResponse{Status: "ok", Node: info.Node, Gossip: info.Status, Role: role, MySQL: mysql}
	switch {
	case info.Status != "alive":
		resp.Status = "gossip " + info.Status
	case mysql != nil && mysql.State != "passing":
		resp.Status = "mysql " + mysql.State
	}
	if resp.Status != "ok" {
		writeJSON(w, http.StatusServiceUnavailable, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) pool(w http.ResponseWriter, r *http.Request) {
	p, err := s.b.PoolView(r.URL.Query().Get("cluster"))
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
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
	if err := s.b.ForceLeave(req.Node, req.Prune); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("force-leave %s: %w", req.Node, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
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
	writeJSON(w, http.StatusOK, s.b.Maint())
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
	writeJSON(w, http.StatusOK, st)
}

// maxHistoryLimit bounds ?limit= (the ring holds at most a million entries).
const maxHistoryLimit = 1_000_000

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := client.HistoryFilter{Node: q.Get("node"), Cluster: q.Get("cluster"), Kind: q.Get("kind")}
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
	writeJSON(w, http.StatusOK, s.b.History(f))
}

func (s *Server) hooks(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, client.HooksResponse{Handlers: s.b.HookStats()})
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
	resp, err := s.b.TestHook(ctx, req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if resp.Handlers == nil {
		resp.Handlers = []client.HookStats{}
	}
	writeJSON(w, http.StatusOK, resp)
}
