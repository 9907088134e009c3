package serfrpc

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/logutils"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/client"
	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

const testToken = "test-token-0123456789"

// testKey is a gossip key, so that the key commands have a keyring to use.
var testKey = bytes.Repeat([]byte{7}, 32)

type testAgent struct {
	sa   *sagent.Agent
	ipc  *sagent.AgentIPC
	gate *Gate
	logs *testkit.SyncBuffer
}

func (ta *testAgent) addr() string { return ta.gate.Addr().String() }

// startAgent runs a real serf agent (gossip on 127.0.0.1) with its RPC
// served behind a gate on 127.0.0.1.
func startAgent(t *testing.T, name string, cfg Config) *testAgent {
	t.Helper()
	lw := sagent.NewLogWriter(64)
	sc := serf.DefaultConfig()
	sc.NodeName = name
	sc.Tags = map[string]string{"role": "web"}
	sc.MemberlistConfig = memberlist.DefaultLocalConfig()
	sc.MemberlistConfig.Name = name
	sc.MemberlistConfig.BindAddr = "127.0.0.1"
	sc.MemberlistConfig.BindPort = 0
	kr, err := memberlist.NewKeyring(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	sc.MemberlistConfig.Keyring = kr
	ac := sagent.DefaultConfig()
	ac.NodeName = name
	sa, err := sagent.Create(ac, sc, lw)
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.Start(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	g, err := New(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ta := &testAgent{sa: sa, gate: g, logs: logs}
	ta.ipc = sagent.NewAgentIPC(sa, "", g.Backend(), io.Discard, lw, false)
	t.Cleanup(func() {
		g.Close()
		ta.ipc.Shutdown()
		closeClients(t, ta.addr())
		_ = sa.Shutdown()
		if t.Failed() {
			t.Logf("gate log:\n%s", logs.String())
		}
	})
	return ta
}

func dial(t *testing.T, addr, token string) *client.RPCClient {
	t.Helper()
	c, err := client.ClientFromConfig(&client.Config{Addr: addr, AuthKey: token, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("connect with token %q: %v", token, err)
	}
	openClients.Lock()
	openClients.m[addr] = append(openClients.m[addr], c)
	openClients.Unlock()
	return c
}

// openClients holds the test clients of each gate address; the agent's
// cleanup closes them after the gate. Serf's client library races when
// Close runs while its reader delivers a stream record (Cleanup closes the
// channel Handle sends on, hashicorp/serf client/rpc_client.go), so a
// client is closed only once its reader has seen the connection end and
// closed it from its own goroutine.
var openClients = struct {
	sync.Mutex
	m map[string][]*client.RPCClient
}{m: map[string][]*client.RPCClient{}}

// closeClients waits for the clients of addr to see their connection end
// (the gate must be closed) and reports those that did not.
func closeClients(t *testing.T, addr string) {
	openClients.Lock()
	cs := openClients.m[addr]
	delete(openClients.m, addr)
	openClients.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for i, c := range cs {
		for !c.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !c.IsClosed() {
			t.Errorf("client %d still connected 5 s after the gate closed", i)
			_ = c.Close()
		}
	}
}

func membersWork(t *testing.T, c *client.RPCClient, after string) {
	t.Helper()
	ms, err := c.Members()
	if err != nil || len(ms) != 1 {
		t.Fatalf("members after %s = %v, %v (connection out of sync?)", after, ms, err)
	}
}

func TestReadOnlyCommandsOpenWithoutAuth(t *testing.T) {
	ta := startAgent(t, "n1", Config{})
	c := dial(t, ta.addr(), "")
	membersWork(t, c, "connect")
	ms, err := c.MembersFiltered(map[string]string{"role": "web"}, "alive", "n.*")
	if err != nil || len(ms) != 1 {
		t.Fatalf("members-filtered = %v, %v", ms, err)
	}
	stats, err := c.Stats()
	if err != nil || stats["agent"]["name"] != "n1" {
		t.Fatalf("stats = %v, %v", stats, err)
	}
	if _, err := c.GetCoordinate("n1"); err != nil {
		t.Fatalf("get-coordinate: %v", err)
	}
}

// Each command that changes the agent or reveals a secret is refused
// before auth, with serf's error, and the connection stays usable; after
// auth with the token it works.
func TestChangingCommandsNeedAuth(t *testing.T) {
	ta := startAgent(t, "n1", Config{})
	self := ta.sa.Serf().LocalMember()
	selfAddr := net.JoinHostPort(self.Addr.String(), fmt.Sprint(self.Port))
	key := base64.StdEncoding.EncodeToString(testKey)
	ops := []struct {
		name string
		run  func(c *client.RPCClient) error
	}{
		{"tags", func(c *client.RPCClient) error { return c.UpdateTags(map[string]string{"team": "dba"}, nil) }},
		{"list-keys", func(c *client.RPCClient) error { _, _, _, err := c.ListKeys(); return err }},
		{"install-key", func(c *client.RPCClient) error { _, err := c.InstallKey(key); return err }},
		{"use-key", func(c *client.RPCClient) error { _, err := c.UseKey(key); return err }},
		{"event", func(c *client.RPCClient) error { return c.UserEvent("deploy", []byte("v1"), false) }},
		{"force-leave", func(c *client.RPCClient) error { return c.ForceLeave("nobody") }},
		{"join", func(c *client.RPCClient) error { _, err := c.Join([]string{selfAddr}, false); return err }},
		// monitor and stream stay open on the authorised connection: their
		// records then flow while the later commands run on it. (Stopping
		// right away races inside serf's client library: Stop closes the
		// channel its reader may be sending to.)
		{"monitor", func(c *client.RPCClient) error {
			_, err := c.Monitor(logutils.LogLevel("DEBUG"), make(chan string, 512))
			return err
		}},
		{"stream", func(c *client.RPCClient) error {
			_, err := c.Stream("*", make(chan map[string]any, 512))
			return err
		}},
		{"stop", func(c *client.RPCClient) error { return c.Stop(client.StreamHandle(12345)) }},
		{"query", func(c *client.RPCClient) error {
			return c.Query(&client.QueryParam{Name: "q", Timeout: 200 * time.Millisecond, RespCh: make(chan client.NodeResponse, 4)})
		}},
		{"respond", func(c *client.RPCClient) error { return c.Respond(999999, nil) }},
	}
	anon := dial(t, ta.addr(), "")
	authed := dial(t, ta.addr(), testToken)
	for _, op := range ops {
		if err := op.run(anon); err == nil || err.Error() != errAuthRequired {
			t.Errorf("%s without auth: err = %v, want %q", op.name, err, errAuthRequired)
		}
		membersWork(t, anon, op.name+" refused")
		err := op.run(authed)
		if op.name == "respond" {
			// Authorised: it reaches serf, which knows no such query.
			if err == nil || !strings.Contains(err.Error(), "No pending queries") {
				t.Errorf("respond after auth: %v, want serf's own answer", err)
			}
		} else if err != nil {
			t.Errorf("%s after auth: %v", op.name, err)
		}
		membersWork(t, authed, op.name)
	}
	if got := ta.sa.Serf().LocalMember().Tags["team"]; got != "dba" {
		t.Errorf("tag team = %q after the authorised tags command", got)
	}

	// leave last: it shuts the agent down.
	if err := anon.Leave(); err == nil || err.Error() != errAuthRequired {
		t.Fatalf("leave without auth: %v", err)
	}
	membersWork(t, anon, "leave refused")
	if ta.sa.Serf().State() != serf.SerfAlive {
		t.Fatalf("agent state %s after a refused leave", ta.sa.Serf().State())
	}
	if err := authed.Leave(); err != nil {
		t.Fatalf("leave after auth: %v", err)
	}
	select {
	case <-ta.sa.ShutdownCh():
	case <-time.After(5 * time.Second):
		t.Fatal("agent still running after an authorised leave")
	}
	// Close from the server side: the client library's own Close races
	// with its reader while records arrive (it closes the channels the
	// reader sends to); on EOF the reader closes them itself.
	ta.gate.Close()
	for deadline := time.Now().Add(5 * time.Second); !authed.IsClosed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("client still open after the gate closed")
		}
	}
}

func TestWrongTokenRefused(t *testing.T) {
	ta := startAgent(t, "n1", Config{})
	_, err := client.ClientFromConfig(&client.Config{Addr: ta.addr(), AuthKey: "wrong", Timeout: 5 * time.Second})
	if err == nil || err.Error() != errInvalidAuthToken {
		t.Fatalf("wrong token: %v, want %q", err, errInvalidAuthToken)
	}
	if !strings.Contains(ta.logs.String(), "wrong auth token") {
		t.Error("no log line for the wrong token")
	}
}

func TestStrictModeNeedsAuthForReads(t *testing.T) {
	ta := startAgent(t, "n1", Config{Strict: true})
	c := dial(t, ta.addr(), "")
	if _, err := c.Members(); err == nil || err.Error() != errAuthRequired {
		t.Fatalf("members without auth in strict mode: %v", err)
	}
	if _, err := c.Stats(); err == nil || err.Error() != errAuthRequired {
		t.Fatalf("stats without auth in strict mode: %v", err)
	}
	membersWork(t, dial(t, ta.addr(), testToken), "auth")
}

// A tags command the validator refuses is answered with its message, never
// reaches serf, and the same connection keeps working.
func TestTagsValidator(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	check := func(set map[string]string, del []string) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprint(set, del))
		for k := range set {
			if k == "role" || k == "sh" {
				return fmt.Errorf("tag %q is reserved by shoal", k)
			}
		}
		for _, k := range del {
			if k == "role" {
				return fmt.Errorf("tag %q is reserved by shoal", k)
			}
		}
		return nil
	}
	ta := startAgent(t, "n1", Config{CheckTags: check})
	c := dial(t, ta.addr(), testToken)
	for _, tc := range []struct {
		set  map[string]string
		del  []string
		want string
	}{
		{map[string]string{"role": "db"}, nil, `tag "role" is reserved by shoal`},
		{map[string]string{"sh": "bogus", "x": "y"}, nil, `tag "sh" is reserved by shoal`},
		{nil, []string{"role"}, `tag "role" is reserved by shoal`},
	} {
		err := c.UpdateTags(tc.set, tc.del)
		if err == nil || err.Error() != tc.want {
			t.Errorf("tags %v -%v: err = %v, want %q", tc.set, tc.del, err, tc.want)
		}
		membersWork(t, c, "a refused tags command")
	}
	if tags := ta.sa.Serf().LocalMember().Tags; tags["role"] != "web" || tags["sh"] != "" || tags["x"] != "" {
		t.Fatalf("refused tag changes reached serf: %v", tags)
	}
	if err := c.UpdateTags(map[string]string{"team": "dba"}, nil); err != nil {
		t.Fatal(err)
	}
	if tags := ta.sa.Serf().LocalMember().Tags; tags["team"] != "dba" || tags["role"] != "web" {
		t.Fatalf("tags = %v", tags)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 || seen[3] != "map[team:dba] []" {
		t.Fatalf("validator saw %q", seen)
	}
}

// The gate's own answers and the relayed stream records share one
// connection: written whole, never inside each other.
func TestInjectedAnswersDoNotCorruptStream(t *testing.T) {
	ta := startAgent(t, "n1", Config{CheckTags: func(map[string]string, []string) error { return errors.New("no") }})
	c := dial(t, ta.addr(), testToken)
	events := make(chan map[string]any, 1024)
	h, err := c.Stream("user", events)
	if err != nil {
		t.Fatal(err)
	}
	// serf answers a stream request before it registers the stream's
	// handler (the deferred RegisterEventHandler in its ipc.go), so an
	// event raised in-process right after the answer can miss the stream,
	// with serf alone too. serf reads a connection's next request only
	// after that: one more round trip makes the stream live.
	membersWork(t, c, "stream")
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if err := ta.sa.UserEvent(fmt.Sprint("ev", i), bytes.Repeat([]byte{'p'}, 400), false); err != nil {
				t.Errorf("user event %d: %v", i, err)
				return
			}
		}
	}()
	// The client library waits for ever on a desynchronised connection:
	// bound the wait here.
	refusedCh := make(chan int, 1)
	failed := make(chan error, 1)
	go func() {
		refused := 0
		for finished := false; !finished || refused < n; {
			select {
			case <-done:
				finished = true
			default:
			}
			if err := c.UpdateTags(map[string]string{"a": "b"}, nil); err == nil || err.Error() != "no" {
				failed <- fmt.Errorf("refused tags #%d: %v", refused, err)
				return
			}
			refused++
		}
		refusedCh <- refused
	}()
	var refused int
	select {
	case refused = <-refusedCh:
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("refused tags commands stopped being answered: connection out of sync")
	}
	got := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream closed after %d events (decode error?)", len(got))
			}
			got[fmt.Sprint(ev["Name"])] = true
		case <-deadline:
			t.Fatalf("received %d of %d events", len(got), n)
		}
	}
	if err := c.Stop(h); err != nil {
		t.Fatal(err)
	}
	membersWork(t, c, "stop")
	t.Logf("%d refusals interleaved with %d stream records", refused, n)
}

// rawConn speaks the protocol by hand, for what the client library never
// sends.
type rawConn struct {
	t   *testing.T
	c   net.Conn
	enc *codec.Encoder
	dec *codec.Decoder
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, enc: codec.NewEncoder(c, msgpackHandle()), dec: codec.NewDecoder(c, msgpackHandle())}
}

func (r *rawConn) send(cmd string, seq uint64, body any) error {
	if err := r.enc.Encode(&requestHeader{Command: cmd, Seq: seq}); err != nil {
		return err
	}
	if body != nil {
		return r.enc.Encode(body)
	}
	return nil
}

func (r *rawConn) recv() (responseHeader, error) {
	var h responseHeader
	err := r.dec.Decode(&h)
	return h, err
}

func (r *rawConn) handshake() {
	r.t.Helper()
	if err := r.send(cmdHandshake, 1, &handshakeRequest{Version: 1}); err != nil {
		r.t.Fatal(err)
	}
	if h, err := r.recv(); err != nil || h.Error != "" || h.Seq != 1 {
		r.t.Fatalf("handshake: %+v, %v", h, err)
	}
}

// A refused request's body is consumed; a request over the size bound ends
// its connection only; an unknown command ends it too (its framing is not
// known), with serf's answer.
func TestRawProtocolEdges(t *testing.T) {
	ta := startAgent(t, "n1", Config{MaxRequestBytes: 4096})

	r := dialRaw(t, ta.addr())
	if err := r.send(cmdMembers, 1, nil); err != nil {
		t.Fatal(err)
	}
	if h, err := r.recv(); err != nil || h.Error != errHandshakeRequired {
		t.Fatalf("before handshake: %+v, %v", h, err)
	}
	if _, err := r.recv(); err == nil {
		t.Fatal("connection still open after a request before the handshake")
	}

	r = dialRaw(t, ta.addr())
	r.handshake()
	// A refused event with a body, then members: answered in order, in sync.
	if err := r.send(cmdEvent, 2, map[string]any{"Name": "x", "Payload": []byte("hello"), "Coalesce": false}); err != nil {
		t.Fatal(err)
	}
	if err := r.send(cmdMembers, 3, nil); err != nil {
		t.Fatal(err)
	}
	if h, err := r.recv(); err != nil || h.Seq != 2 || h.Error != errAuthRequired {
		t.Fatalf("refused event: %+v, %v", h, err)
	}
	if h, err := r.recv(); err != nil || h.Seq != 3 || h.Error != "" {
		t.Fatalf("members after a refused event: %+v, %v", h, err)
	}
	var members struct{ Members []map[string]any }
	if err := r.dec.Decode(&members); err != nil || len(members.Members) != 1 {
		t.Fatalf("members body: %v, %v", members, err)
	}
	// Duplicate handshake: serf's answer, connection kept.
	if err := r.send(cmdHandshake, 4, &handshakeRequest{Version: 1}); err != nil {
		t.Fatal(err)
	}
	if h, err := r.recv(); err != nil || h.Error != errDuplicateHandshake {
		t.Fatalf("second handshake: %+v, %v", h, err)
	}
	// Over the bound: the connection is closed, nothing reaches serf.
	// (The write itself may fail: the gate closes while it is under way.)
	_ = r.send(cmdAuth, 5, &authRequest{AuthKey: strings.Repeat("k", 8192)})
	if h, err := r.recv(); err == nil {
		t.Fatalf("answer %+v to a request over the size bound", h)
	}

	// Unknown command: answered, then closed.
	r = dialRaw(t, ta.addr())
	r.handshake()
	if err := r.send("frobnicate", 2, map[string]any{"X": 1}); err != nil {
		t.Fatal(err)
	}
	if h, err := r.recv(); err != nil || h.Seq != 2 || h.Error != errAuthRequired {
		t.Fatalf("unknown command: %+v, %v", h, err)
	}
	if _, err := r.recv(); err == nil {
		t.Fatal("connection still open after an unknown command")
	}

	// The gate still serves.
	membersWork(t, dial(t, ta.addr(), ""), "the edge cases")
}

// A client that never sends its handshake is closed after SetupTimeout.
func TestHandshakeTimeout(t *testing.T) {
	ta := startAgent(t, "n1", Config{SetupTimeout: 300 * time.Millisecond})
	r := dialRaw(t, ta.addr())
	start := time.Now()
	if _, err := r.recv(); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("silent client: %v after %s", err, time.Since(start))
	}
}

func TestConnectionLimit(t *testing.T) {
	ta := startAgent(t, "n1", Config{})
	clients := make([]*client.RPCClient, 0, DefaultMaxConns)
	for range DefaultMaxConns {
		clients = append(clients, dial(t, ta.addr(), ""))
	}
	c, err := client.ClientFromConfig(&client.Config{Addr: ta.addr(), Timeout: 5 * time.Second})
	if err == nil {
		_ = c.Close()
		t.Fatalf("connection %d accepted", DefaultMaxConns+1)
	}
	if !strings.Contains(ta.logs.String(), "too many open connections") {
		t.Error("no log line for the refused connection")
	}
	for _, c := range clients {
		membersWork(t, c, "the refused connection")
	}
	_ = clients[0].Close()
	var last error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := client.ClientFromConfig(&client.Config{Addr: ta.addr(), Timeout: 5 * time.Second})
		if last = err; err == nil {
			_ = c.Close()
			return
		}
	}
	t.Fatalf("no connection accepted after one closed: %v", last)
}

// After Close (and serf's own IPC shutdown) no goroutine of the gate or of
// serf's IPC is left, even with streams, a monitor and a query running.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	ta := startAgent(t, "n1", Config{})
	var streams []chan map[string]any
	for range 3 {
		c := dial(t, ta.addr(), testToken)
		ch := make(chan map[string]any, 16)
		streams = append(streams, ch)
		if _, err := c.Stream("*", ch); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Monitor("DEBUG", make(chan string, 16)); err != nil {
			t.Fatal(err)
		}
		if err := c.Query(&client.QueryParam{Name: "q", Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	idle := dialRaw(t, ta.addr()) // connected, no handshake
	_ = idle
	// Let serf's event loop hand every query to every stream before the
	// streams close: serf v0.11.0's eventStream.Stop closes the channel its
	// HandleEvent may be sending on (a race in serf's agent package, seen
	// by -race in CI), which is not what this test is about.
	// Stream i was opened before queries i, i+1, ...: it gets 3-i of them.
	for i, ch := range streams {
		for got := 0; got < len(streams)-i; got++ {
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatalf("stream %d: %d of the %d queries sent after it opened arrived", i, got, len(streams)-i)
			}
		}
	}
	if n := countStacks("internal/serfrpc."); n == 0 {
		t.Fatal("no gate goroutines seen while running: the check cannot work")
	}
	ta.gate.Close()
	ta.ipc.Shutdown()
	var left string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = stacksWith("internal/serfrpc.", "(*AgentIPC).handleClient", "(*eventStream).stream", "(*logStream).stream"); left == "" {
			return
		}
	}
	t.Fatalf("goroutines left after Close:\n%s", left)
}

func countStacks(substr string) int {
	return strings.Count(stacksWith(substr), "goroutine ")
}

// stacksWith returns the goroutine stacks that contain any of substrs
// (this test's own goroutine excluded).
func stacksWith(substrs ...string) string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "serfrpc.TestNoGoroutine") || strings.Contains(g, "serfrpc.stacksWith") {
			continue
		}
		for _, s := range substrs {
			if strings.Contains(g, s) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// A panic while handling one connection (here in the tag validator) ends
// that connection only.
func TestPanicEndsOnlyItsConnection(t *testing.T) {
	ta := startAgent(t, "n1", Config{CheckTags: func(set map[string]string, _ []string) error {
		if set["boom"] != "" {
			panic("validator bug")
		}
		return nil
	}})
	other := dial(t, ta.addr(), "")
	c, err := client.ClientFromConfig(&client.Config{Addr: ta.addr(), AuthKey: testToken, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.UpdateTags(map[string]string{"boom": "1"}, nil) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("tags command answered without error after a panic")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer and no close after a panic")
	}
	_ = c.Close()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(ta.logs.String(), "validator bug"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no log line for the panic")
		}
	}
	membersWork(t, other, "another connection's panic")
	membersWork(t, dial(t, ta.addr(), ""), "another connection's panic")
}

// serf's stats lists the agent's event handlers from serf's own handler
// config; the gate replaces that section with what EventHandlers says
// (told whether the client authenticated) and keeps every other section.
func TestStatsListEventHandlers(t *testing.T) {
	ta := startAgent(t, "n1", Config{EventHandlers: func(authed bool) map[string]string {
		if authed {
			return map[string]string{"member-join:": "/bin/notify --key=s3cret", "user:deploy": "/bin/deploy"}
		}
		return map[string]string{"member-join:": "/bin/notify …", "user:deploy": "/bin/deploy"}
	}})
	for _, tc := range []struct {
		token string
		want  string
	}{{"", "/bin/notify …"}, {testToken, "/bin/notify --key=s3cret"}} {
		c := dial(t, ta.addr(), tc.token)
		stats, err := c.Stats()
		if err != nil {
			t.Fatalf("stats (token %q): %v", tc.token, err)
		}
		eh := stats["event_handlers"]
		if len(eh) != 2 || eh["member-join:"] != tc.want || eh["user:deploy"] != "/bin/deploy" {
			t.Errorf("event_handlers (token %q) = %v, want member-join: %q and user:deploy", tc.token, eh, tc.want)
		}
		if stats["agent"]["name"] != "n1" || stats["serf"]["members"] != "1" || stats["runtime"]["goroutines"] == "" {
			t.Errorf("other sections changed: %v", stats)
		}
		membersWork(t, c, "stats")
	}
}

// TestLeaveCallback: with Config.Leave set, an authorised leave runs the
// callback instead of serf's handler (which shuts serf's agent down under
// shoal): the client gets the callback's answer, serf keeps running until
// the agent itself stops it, and a leave without auth never calls it.
func TestLeaveCallback(t *testing.T) {
	var calls, after atomic.Int32
	answer := errors.New("leave: not confirmed within leave_timeout 5s: no peer answered")
	ta := startAgent(t, "leaver", Config{Token: testToken, Leave: func() error {
		if calls.Add(1) == 1 {
			return nil
		}
		return answer
	}, AfterLeave: func() {
		if after.Add(1) != calls.Load() {
			t.Error("AfterLeave ran before Leave")
		}
	}})
	anon := dial(t, ta.addr(), "")
	if err := anon.Leave(); err == nil || err.Error() != errAuthRequired {
		t.Fatalf("leave without auth: %v", err)
	}
	if n, m := calls.Load(), after.Load(); n != 0 || m != 0 {
		t.Fatalf("callbacks ran %d and %d times for a refused leave", n, m)
	}
	if err := dial(t, ta.addr(), testToken).Leave(); err != nil {
		t.Fatalf("leave after auth: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("callback ran %d times, want 1", n)
	}
	// AfterLeave runs once the answer is written: the client may already
	// have it, so wait a little.
	for deadline := time.Now().Add(5 * time.Second); after.Load() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("AfterLeave not called after the answer")
		}
	}
	if st := ta.sa.Serf().State(); st != serf.SerfAlive {
		t.Fatalf("serf state %s: serf's own leave handler ran", st)
	}
	// The callback's error is the client's answer, in serf's format.
	if err := dial(t, ta.addr(), testToken).Leave(); err == nil || err.Error() != answer.Error() {
		t.Fatalf("second leave: %v, want %q", err, answer)
	}
	membersWork(t, dial(t, ta.addr(), testToken), "leave callback")
}
