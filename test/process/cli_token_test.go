package process

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// fakeAgentEnv makes TestCLIFakeAgentProcess serve a fake agent instead of
// returning (the test binary re-run as another user).
const fakeAgentEnv = "SHOAL_TEST_FAKE_AGENT"

// fakeAgent is what a local user can run on a free port, or on the
// agent's port while the agent is down: it answers every closed route 401
// and names a token file in /v1/agent/self, hoping the CLI reads it and
// sends the token. It records every request's headers.
type fakeAgent struct {
	named string // the token file it names

	mu      sync.Mutex
	headers []http.Header
}

func (f *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.record(r.Header.Clone())
	if r.Method == http.MethodGet && r.URL.Path == "/v1/agent/self" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"fake","role":"db","api_token_file":%q}`, f.named)
		return
	}
	http.Error(w, `{"error":"this request needs the API token"}`, http.StatusUnauthorized)
}

func (f *fakeAgent) record(h http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headers = append(f.headers, h)
}

// sawToken reports whether any request carried tok, in any header.
func sawToken(headers []http.Header, tok string) bool {
	for _, h := range headers {
		for _, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, tok) {
					return true
				}
			}
		}
	}
	return false
}

// writeToken writes a token file (mode 0600) and returns its token.
func writeToken(t *testing.T, path string) string {
	t.Helper()
	tok := "cli-token-test-" + strings.Repeat("x", 24)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tok
}

// stateCommands change the agent's state; each needs the token.
var stateCommands = [][]string{{"maint", "enable"}, {"tags", "--set", "x=y"}, {"leave"}, {"keys", "list"}}

// TestCLINeverReadsTheFileTheServerNames: a fake agent on a free loopback
// port answers 401 and names a readable token file in /v1/agent/self;
// root's CLI, pointed at it, reads only the file it is told of (none
// here) and sends no token.
func TestCLINeverReadsTheFileTheServerNames(t *testing.T) {
	dir := t.TempDir()
	named := filepath.Join(dir, "agent", "api-token")
	tok := writeToken(t, named)
	fake := &fakeAgent{named: named}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	empty := filepath.Join(dir, "state")
	env := []string{"STATE_DIRECTORY=" + empty, "SHOAL_API_TOKEN_FILE=", "SHOAL_HTTP_TOKEN="}
	for _, args := range stateCommands {
		_, errOut, code := shoalEnv(t, env, append([]string{"--http-addr", ln.Addr().String()}, args...)...)
		if code != 1 || !strings.Contains(errOut, filepath.Join(empty, "api-token")) || !strings.Contains(errOut, "--token-file") {
			t.Errorf("shoal %v against the fake agent: exit %d, want 1 naming the path tried and --token-file; stderr:\n%s", args, code, errOut)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.headers) == 0 {
		t.Fatal("the fake agent got no request")
	}
	if sawToken(fake.headers, tok) {
		t.Fatalf("the fake agent received the token of the file it named: %v", fake.headers)
	}
}

// TestCLIFakeAgentProcess is the fake agent when run with fakeAgentEnv
// set (by TestCLIKeepsTheTokenFromAnotherUsersListener, as another user):
// it prints its address, then one JSON line of headers per request.
func TestCLIFakeAgentProcess(t *testing.T) {
	named := os.Getenv(fakeAgentEnv)
	if named == "" {
		return // not a test by itself
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	fmt.Println(ln.Addr().String())
	fake := &fakeAgent{named: named}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		enc.Encode(r.Header)
		mu.Unlock()
		fake.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	srv.Close()
}

// TestCLIKeepsTheTokenFromAnotherUsersListener: the token is where root's
// CLI looks by default, and a program of another user listens where the
// CLI is pointed (a squatted agent port): the CLI reads the token but
// does not send it, as the listener is not the file owner's nor root's.
func TestCLIKeepsTheTokenFromAnotherUsersListener(t *testing.T) {
	needSetpriv(t, "runs a fake agent")
	state := t.TempDir()
	tok := writeToken(t, filepath.Join(state, "api-token"))
	addr, headers := startFakeAgentAsNobody(t, filepath.Join(state, "api-token"))

	env := []string{"STATE_DIRECTORY=" + state, "SHOAL_API_TOKEN_FILE=", "SHOAL_HTTP_TOKEN="}
	for _, args := range stateCommands {
		_, errOut, code := shoalEnv(t, env, append([]string{"--http-addr", addr}, args...)...)
		if code != 1 || !strings.Contains(errOut, "runs as uid 65534") || strings.Contains(errOut, tok) {
			t.Errorf("shoal %v against another user's listener: exit %d, want 1 saying who listens; stderr:\n%s", args, code, errOut)
		}
	}
	got := headers()
	if len(got) == 0 {
		t.Fatal("the fake agent got no request")
	}
	if sawToken(got, tok) {
		t.Fatalf("the fake agent of another user received the token: %v", got)
	}
}

// startFakeAgentAsNobody runs TestCLIFakeAgentProcess as uid 65534 and
// returns its address and a function returning the headers it saw.
func startFakeAgentAsNobody(t *testing.T, named string) (string, func() []http.Header) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy other users can run (go test's build directory is private).
	dir, err := os.MkdirTemp("", "shoal-fake-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "fake-agent")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestCLIFakeAgentProcess$")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", fakeAgentEnv + "=" + named}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var headers []http.Header
	addrc := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for first := true; sc.Scan(); first = false {
			if first {
				addrc <- strings.TrimSpace(sc.Text())
				continue
			}
			var h http.Header
			if json.Unmarshal(sc.Bytes(), &h) == nil {
				mu.Lock()
				headers = append(headers, h)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { stdin.Close(); cancel(); cmd.Wait() })
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(60 * time.Second):
		t.Fatal("the fake agent did not start")
	}
	testkit.WaitFor(t, 20*time.Second, "fake agent answers", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr, func() []http.Header {
		stdin.Close() // it stops serving and exits: every request is printed
		cmd.Wait()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return headers
	}
}

// TestCLITokenFileWithARealAgent: against a real agent, the CLI reads the
// token at the default path ($STATE_DIRECTORY/api-token), from
// --token-file and from SHOAL_API_TOKEN_FILE, and every state-changing
// command works.
func TestCLITokenFileWithARealAgent(t *testing.T) {
	a := startAgent(t, "clitok", newKey(t))
	testkit.WaitFor(t, 20*time.Second, "agent up", func() bool { return members(t, a.http)["clitok"].Status == "alive" })
	base := []string{"SHOAL_API_TOKEN_FILE=", "SHOAL_HTTP_TOKEN="}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"default path", append(base, "STATE_DIRECTORY="+filepath.Dir(a.tokenFile)), nil},
		{"--token-file", append(base, "STATE_DIRECTORY="+t.TempDir()), []string{"--token-file", a.tokenFile}},
		{"SHOAL_API_TOKEN_FILE", []string{"STATE_DIRECTORY=" + t.TempDir(), "SHOAL_API_TOKEN_FILE=" + a.tokenFile, "SHOAL_HTTP_TOKEN="}, nil},
	} {
		for _, args := range [][]string{{"tags", "--set", "via=" + strings.ReplaceAll(tc.name, " ", "_")}, {"keys", "list"}} {
			out, errOut, code := shoalEnv(t, tc.env, append(append([]string{"--http-addr", a.http}, args...), tc.args...)...)
			if code != 0 {
				t.Errorf("%s: shoal %v: exit %d\n%s%s", tc.name, args, code, out, errOut)
			}
		}
	}
}
