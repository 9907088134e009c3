package process

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// asNobody runs the shoal CLI as uid/gid 65534 with no groups.
func asNobody(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", shoalBin(t)}, args...)
	cmd := exec.CommandContext(ctx, "setpriv", argv...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	return run(t, cmd)
}

// TestUnprivilegedUserCannotDrainTheAgent reproduces the report: a local
// user other than the agent's could read the gossip key and make the agent
// leave. Now that user's CLI fails with the token error, a browser-style
// POST is refused, and root's CLI reads the token file.
func TestUnprivilegedUserCannotDrainTheAgent(t *testing.T) {
	needSetpriv(t, "runs the CLI")
	key := newKey(t)
	a := startAnswering(t, "sec1", key)

	// Reads stay open to everyone.
	if out, errOut, code := asNobody(t, "members", "--http-addr", a.http); code != 0 || !strings.Contains(out, "sec1") {
		t.Fatalf("members as nobody: exit %d\n%s%s", code, out, errOut)
	}
	// The key and the leave are not.
	wantErr := "permission denied reading " + a.tokenFile + " (from --token-file): run as root or the agent's user, or pass --token"
	out, errOut, code := asNobody(t, "keys", "list", "--http-addr", a.http, "--token-file", a.tokenFile)
	if code != 1 || !strings.Contains(errOut, wantErr) || strings.Contains(out+errOut, key) {
		t.Fatalf("keys list as nobody: exit %d, want 1 with %q\n%s%s", code, wantErr, out, errOut)
	}
	if _, errOut, code := asNobody(t, "leave", "--http-addr", a.http, "--token-file", a.tokenFile); code != 1 || !strings.Contains(errOut, wantErr) {
		t.Fatalf("leave as nobody: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{
		{"tags", "--set", "x=y"}, {"maint", "enable", "--reason", "x"}, {"event", "e"},
		{"hooks", "test", "user", "--name", "x"}, {"force-leave", "nobody"}, {"monitor"}, {"join", "127.0.0.1:1"},
	} {
		if _, errOut, code := asNobody(t, append(args, "--http-addr", a.http, "--token-file", a.tokenFile)...); code != 1 || !strings.Contains(errOut, "permission denied reading") {
			t.Errorf("%v as nobody: exit %d: %s", args, code, errOut)
		}
	}

	// Plain HTTP, as a browser page or curl would send it.
	post := func(path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+a.http+path, strings.NewReader(`{}`))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		hdr    map[string]string
		status int
	}{
		{map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403},
		{map[string]string{"Content-Type": "text/plain"}, 415},
		{map[string]string{"Content-Type": "application/json"}, 401},
	} {
		if status, body := post("/v1/agent/leave", tc.hdr); status != tc.status {
			t.Errorf("POST /v1/agent/leave %v = %d %s, want %d", tc.hdr, status, body, tc.status)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+a.http+"/v1/members", nil)
	req.Host = "rebound.example:8946"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("GET /v1/members with a rebound Host: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	select {
	case <-a.done:
		t.Fatalf("the agent exited:\n%s", a.log.String())
	default:
	}

	// Root reads the token file it is told of.
	out, errOut, code = shoal(t, "keys", "list", "--http-addr", a.http)
	if code != 0 || !strings.Contains(out, key) {
		t.Fatalf("keys list as root: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(a.log.String(), mustRead(t, a.tokenFile)) {
		t.Error("the agent logged its token")
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestHTTPBeyondLoopbackRefusedAtStart: an agent whose config puts
// http_addr on 0.0.0.0 without TLS or insecure_http exits 2 naming
// http_addr; with insecure_http it starts and warns.
func TestHTTPBeyondLoopbackRefusedAtStart(t *testing.T) {
	key := newKey(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	port := strings.TrimPrefix(ports.Free(t), "127.0.0.1:")
	if err := os.WriteFile(cfg, []byte("http_addr: 0.0.0.0:"+port+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := shoal(t, "agent", "--config", cfg, "--node", "open1", "--bind", ports.Free(t), "--encrypt", key,
		"--api-token-file", filepath.Join(dir, "api-token"))
	if code != 2 || !strings.Contains(errOut, `http_addr (--http-addr) "0.0.0.0:`+port+`"`) ||
		!strings.Contains(errOut, "http_tls_cert_file") || !strings.Contains(errOut, "insecure_http") {
		t.Fatalf("agent with http_addr 0.0.0.0: exit %d, want 2 naming http_addr:\n%s", code, errOut)
	}

	// The last --http-addr wins over startAgent's loopback one.
	a := startAgent(t, "open2", key, "--http-addr", "0.0.0.0:"+port, "--insecure-http")
	testkit.WaitFor(t, 20*time.Second, "the insecure_http warning", func() bool {
		return strings.Contains(a.log.String(), "listens beyond loopback without TLS")
	})
	if l := a.log.String(); !strings.Contains(l, "level=WARN") && !strings.Contains(l, "[WARN]") {
		t.Errorf("the warning is not at WARN level:\n%s", l)
	}
}
