package process

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestAPIRefusesForeignHostOnEveryListener: a DNS rebinding page sends
// its own name in Host. A listener beyond loopback (insecure_http) refused
// no Host before; now it answers only IP literals, localhost, its own names
// and http_allowed_hosts, as the loopback listener does.
func TestAPIRefusesForeignHostOnEveryListener(t *testing.T) {
	out, _, _ := shoal(t, "keygen")
	port := strings.TrimPrefix(ports.Free(t), "127.0.0.1:")
	startAgent(t, "host1", strings.TrimSpace(out), "--http-addr", "0.0.0.0:"+port, "--insecure-http",
		"--http-allowed-hosts", "shoal.example,db1.shoal.example")
	addr := "127.0.0.1:" + port
	testkit.WaitFor(t, 20*time.Second, "agent answers", func() bool {
		status, err := getFresh(addr, "/v1/agent/self", 5*time.Second)
		return err == nil && status == http.StatusOK
	})
	for _, c := range []struct {
		host string
		want int
	}{
		{"attacker.example", http.StatusForbidden},
		{"attacker.example:" + port, http.StatusForbidden},
		{"shoal.example.attacker.example", http.StatusForbidden},
		{"127.0.0.1:" + port, http.StatusOK},
		{"192.0.2.10:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"shoal.example:" + port, http.StatusOK},
		{"DB1.shoal.example", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/members", nil)
		req.Host = c.host
		resp, body := testkit.Fetch(t, req)
		if resp.StatusCode != c.want {
			t.Errorf("GET /v1/members with Host %s: %d %s, want %d", c.host, resp.StatusCode, body, c.want)
		}
		if c.want == http.StatusForbidden && !strings.Contains(body, "DNS rebinding") {
			t.Errorf("Host %s refused without saying why: %s", c.host, body)
		}
	}
	// A name that is not a DNS name is a configuration error (exit 2).
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(cfg, []byte("insecure_no_encryption: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := shoal(t, "agent", "--http-allowed-hosts", "http://x.example", "--config-check", cfg)
	if code != 2 || !strings.Contains(errOut, "http_allowed_hosts") {
		t.Errorf("--http-allowed-hosts http://x.example: exit %d, want 2 naming http_allowed_hosts: %s", code, errOut)
	}
}
