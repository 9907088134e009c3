package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/pkg/client"
)

// evil is text an attacker controls (a node name, a tag, a query answer, a
// MySQL error): it clears the screen, sets the terminal title, forges a
// row on a line of its own, returns the carriage, holds invalid UTF-8, a
// right-to-left override and the one-byte CSI.
const evil = "db9\x1b[2J\x1b]0;pwned\x07\nFORGED row\r\xff\u202e\u009b"

// evilShown is evil as sanitize shows it.
const evilShown = `db9\x1b[2J\x1b]0;pwned\a\nFORGED row\r\xff\u202e\u009b`

// checkClean fails if out holds anything a terminal acts on (C0 but
// newline and the renderers' own tabs, DEL, C1, bidi controls, line
// separators), invalid UTF-8, a
// different number of lines than the renderer writes for harmless text
// (wantLines), or a line of evil's own.
func checkClean(t *testing.T, what string, out []byte, wantLines int) {
	t.Helper()
	if !utf8.Valid(out) {
		t.Errorf("%s: raw invalid UTF-8 in:\n%q", what, out)
	}
	for _, r := range string(out) {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029') {
			t.Errorf("%s: raw %U in:\n%q", what, r, out)
			break
		}
	}
	if n := bytes.Count(out, []byte("\n")); n != wantLines {
		t.Errorf("%s: %d lines, want %d (a forged line?):\n%s", what, n, wantLines, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "FORGED") {
			t.Errorf("%s: forged line %q", what, line)
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"db1":                       "db1",
		"Zürich-東京-🐟":               "Zürich-東京-🐟", // ordinary UTF-8 unchanged
		`C:\path`:                   `C:\path`,     // nothing to escape: unchanged
		"db\xff":                    `db\xff`,
		"a\tb\nc\r":                 `a\tb\nc\r`,
		"\x1b[31mred":               `\x1b[31mred`,
		"\x1b]0;title\x07":          `\x1b]0;title\a`,
		"\u009b2J\x7f":              `\u009b2J\x7f`,
		"admin\u202etxt.exe":        `admin\u202etxt.exe`,
		"\u2066x\u2069\u200f\u061c": `\u2066x\u2069\u200f\u061c`,
		"a\u2028b\u2029":            `a\u2028b\u2029`,
		"back\\slash\x1b":           `back\\slash\x1b`, // once escaping, a backslash is escaped too
		"\ufffd":                    "\ufffd",          // a valid replacement character stays
		evil:                        evilShown,
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// lines counts the lines render writes for harmless text.
func lines(t *testing.T, render func(text string) []byte) int {
	t.Helper()
	return bytes.Count(render("x"), []byte("\n"))
}

// TestRenderersEscapeHostileText feeds every renderer hostile text in
// every string field that comes from another machine or the agent.
func TestRenderersEscapeHostileText(t *testing.T) {
	utcLocal(t)
	renderers := map[string]func(text string) []byte{
		"members": func(s string) []byte {
			var b bytes.Buffer
			writeMembers(&b, []client.Member{{Name: s, Addr: s, Port: 7946, Status: s, Tags: map[string]string{s: s, "role": s}}}, "table", nil)
			return b.Bytes()
		},
		"members --columns": func(s string) []byte {
			var b bytes.Buffer
			writeMembers(&b, []client.Member{{Name: s, Addr: s, Status: s, Tags: map[string]string{"role": s}}}, "table", []string{"role"})
			return b.Bytes()
		},
		"info": func(s string) []byte {
			var b bytes.Buffer
			writeInfo(&b, &client.Info{Node: s, Addr: s, Status: s, Version: s, GoVersion: s, Uptime: s, Profile: s,
				Tags: map[string]string{s: s}, Encrypted: true, KeyringFile: s, KeyWarning: s, Snapshot: s, RPCAddr: s,
				Join:    client.JoinStatus{Addrs: []string{s}, Attempts: 2, LastError: s},
				Timings: client.Timings{ProbeInterval: s, ProbeTimeout: s, GossipInterval: s},
				Serf:    client.SerfStats{Members: 3, Failed: 1}, Consensus: hostileConsensus(s)})
			return b.Bytes()
		},
		"switchover": func(s string) []byte {
			var b bytes.Buffer
			writeSwitchover(&b, &client.Switchover{ID: s, Cluster: s, Old: s, Target: s, From: 1, Term: 2, ReadOnlySeconds: 0.2,
				Steps:   []client.SwitchStep{{Name: s, Node: s, OK: true, Detail: s}, {Name: s, Node: s, Detail: s}},
				Routers: client.RoutersApplied{Applied: []string{s}, Pending: map[string]string{s: s}, Unreachable: map[string]string{s: s}}})
			return b.Bytes()
		},
		"failover": func(s string) []byte {
			var b bytes.Buffer
			writeFailover(&b, &client.Failover{Cluster: s, Writer: s, Term: 1, Dead: true, Death: s, Pick: s, Why: s, Outcome: s,
				Candidates: []client.FailoverCandidate{{Node: s, Position: s}, {Node: s, Position: s, Out: s}}})
			return b.Bytes()
		},
		"health": func(s string) []byte {
			var b bytes.Buffer
			lag := int64(3)
			writeHealth(&b, &client.HealthResponse{Node: s, Role: s, Gossip: s, Status: s, MySQL: &client.LocalHealth{
				State: s, Reason: s, Message: s, Target: s, Version: s, Replica: true, LagSeconds: &lag,
				LastIOError: s, LastSQLError: s, LastDuration: s, Published: s}})
			return b.Bytes()
		},
		"history": func(s string) []byte {
			var b bytes.Buffer
			writeHistory(&b, &client.HistoryResponse{Capacity: 1, Evicted: 1, File: s, Entries: []client.HistoryEntry{
				{Time: historyTime, Kind: s, Cluster: s, Node: s, From: s, To: s, Reason: s, Detail: s}}})
			return b.Bytes()
		},
		"hooks": func(s string) []byte {
			var b bytes.Buffer
			writeHooks(&b, []client.HookStats{{Spec: s, LastError: s, LastDuration: s, LastStart: historyTime, Dropped: 2,
				DroppedByClass: map[string]map[string]uint64{"user": {"queue_full": 1}, s: {s: 1}}}})
			return b.Bytes()
		},
		"maint": func(s string) []byte {
			var b bytes.Buffer
			writeMaintText(&b, &client.MaintStatus{Node: s, Enabled: true, Reason: s, Damped: true, DampDetail: s})
			return b.Bytes()
		},
		"pool": func(s string) []byte {
			var b bytes.Buffer
			writePool(&b, &client.PoolResponse{Isolated: true, Isolation: s, Clusters: []client.ClusterPool{{
				Name: s, Conflict: []string{s}, Writers: []client.PoolNode{{Name: s, Addr: s, Reason: s, Detail: s}},
				Readers: []client.PoolNode{{Name: s, Addr: s}}, Out: []client.PoolNode{{Name: s, Addr: s, Reason: s, Detail: s}}}},
				Sinks: []client.SinkStatus{{Name: s, Target: s, State: s, LastError: s, LastErrorAt: sinkFailed, Notes: []string{s}}}})
			return b.Bytes()
		},
		"tags": func(s string) []byte { return []byte(formatTags(map[string]string{s: s}) + "\n") },
	}
	for name, render := range renderers {
		t.Run(name, func(t *testing.T) {
			out := render(evil)
			checkClean(t, name, out, lines(t, render))
			if !bytes.Contains(out, []byte(evilShown)) {
				t.Errorf("the hostile text is not shown escaped:\n%s", out)
			}
		})
	}
}

// hostileAgent is an agent whose every answer carries text: the JSON of
// each endpoint with text in every string, errors quoting it, a monitor
// stream of lines holding it.
func hostileAgent(t *testing.T, text string) string {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(pattern string, status int, v any) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		})
	}
	fail := client.ErrorResponse{Error: "join " + text + ": " + text}
	hooks := []client.HookStats{{Spec: text, LastError: text, LastExitCode: 1, LastStart: historyTime, LastDuration: text}}
	reply("GET /v1/members", 200, client.MembersResponse{Members: []client.Member{{Name: text, Addr: text, Port: 1, Status: text, Tags: map[string]string{text: text}}}})
	reply("GET /v1/agent/self", 200, client.Info{Node: text, Addr: text, Status: text, Version: text, Tags: map[string]string{text: text},
		Join: client.JoinStatus{Addrs: []string{text}, LastError: text}, Serf: client.SerfStats{Members: 1}, Consensus: hostileConsensus(text)})
	reply("GET /v1/health", 200, client.HealthResponse{Status: text, Node: text, Role: text, Gossip: text, MySQL: &client.LocalHealth{State: text, Message: text, Version: text}})
	reply("POST /v1/agent/join", 500, fail)
	reply("POST /v1/agent/force-leave", 500, fail)
	reply("POST /v1/event", 200, struct{}{})
	reply("POST /v1/query", 200, client.QueryResponse{Acks: []string{text}, Responses: map[string][]byte{text: []byte(text)}})
	reply("PUT /v1/agent/tags", 200, client.TagsResponse{Tags: map[string]string{text: text}})
	reply("GET /v1/keys", 200, client.KeyResponse{NumNodes: 2, NumResp: 2, Keys: map[string]int{text: 2}, Messages: map[string]string{text: text}})
	reply("POST /v1/keys/install", 500, client.KeyResponse{NumNodes: 2, NumResp: 2, NumErr: 1, Messages: map[string]string{text: text}})
	reply("GET /v1/pool", 200, client.PoolResponse{Clusters: []client.ClusterPool{{Name: text, Writers: []client.PoolNode{{Name: text, Addr: text}}}}})
	reply("GET /v1/agent/maint", 200, client.MaintStatus{Node: text, Enabled: true, Reason: text})
	reply("PUT /v1/agent/maint", 200, client.MaintStatus{Node: text, Enabled: true, Reason: text})
	reply("GET /v1/history", 200, client.HistoryResponse{Entries: []client.HistoryEntry{{Time: historyTime, Kind: text, Node: text, Detail: text}}})
	reply("GET /v1/hooks", 200, client.HooksResponse{Handlers: hooks})
	reply("POST /v1/hooks/test", 200, client.HookTestResponse{Handlers: hooks, Response: []byte(text)})
	mux.HandleFunc("GET /v1/monitor", func(w http.ResponseWriter, _ *http.Request) {
		// The agent's own monitor stream (internal/logging): serf's log
		// lines quote node names in the message, shoal's in attributes.
		l := logging.New(io.Discard, "text", slog.LevelInfo)
		l.SetMonitor(w)
		std := log.New(&logging.StdWriter{Logger: l.Logger}, "", log.LstdFlags)
		std.Printf("[INFO] serf: EventMemberJoin: %s 10.0.0.9", text)
		l.Logger.With("component", "agent").Warn("query", "from", text, "payload", text)
		// Raw bytes in a record, as an older agent or a serf agent sends
		// them: everything but the record separator is escaped here.
		fmt.Fprintf(w, "2024/05/01 12:00:01.000 [INFO] serf: EventMemberJoin: %s\n", strings.ReplaceAll(text, "\n", " "))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestCommandsEscapeHostileText runs every command that prints what an
// agent answers against an agent answering hostile text (through the real
// client and HTTP), and the same command against one answering "x": the
// hostile run must print as many lines, none of them forged, and nothing
// a terminal would act on, on stdout and stderr.
func TestCommandsEscapeHostileText(t *testing.T) {
	hostile, harmless := hostileAgent(t, evil), hostileAgent(t, "x")
	for _, args := range [][]string{
		{"members"},
		{"members", "--columns", evil},
		{"info"},
		{"health"},
		{"join", "10.0.0.1"},
		{"force-leave", "db9"},
		{"event", evil, "payload"},
		{"query", "load"},
		{"monitor"},
		{"tags", "--set", "a=b"},
		{"keys", "list"},
		{"keys", "install", "a2V5MWtleTFrZXkxa2V5MQ=="},
		{"pool"},
		{"maint"},
		{"maint", "enable", "--reason", "x"},
		{"history"},
		{"hooks", "list"},
		{"hooks", "test", "user", "--name", "x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			run := func(addr string) []byte {
				var out, errb bytes.Buffer
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				Execute(ctx, append(args, "--http-addr", addr), &out, &errb)
				return append(out.Bytes(), errb.Bytes()...)
			}
			out := run(hostile)
			checkClean(t, "stdout+stderr", out, bytes.Count(run(harmless), []byte("\n")))
			if !bytes.Contains(out, []byte("db9")) {
				t.Errorf("the hostile text is not shown at all:\n%s", out)
			}
		})
	}
}

// hostileConsensus is a voter's consensus layer with text in every string
// another machine or the agent gives it.
func hostileConsensus(s string) *client.Consensus {
	return &client.Consensus{Voter: true, ID: s, Addr: s, State: s, Leader: s, LeaderAddr: s, Bootstrapped: true,
		LastContact: historyTime, Refused: map[string]uint64{s: 1},
		Voters: []client.ConsensusVoter{{ID: s, Addr: s, Leader: true}, {ID: s, Addr: s, Failing: true, LastContact: historyTime}},
		Terms:  []client.Term{{Cluster: s, Term: 2, Writer: s, Addr: s, Granted: historyTime, Why: s}}, Failovers: map[string]string{s: s}, Returned: map[string]string{s: s}}
}
