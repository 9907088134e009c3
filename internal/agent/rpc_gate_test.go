package agent

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/client"
)

const errAuthRequired = "Authentication required"

func rpcClient(t *testing.T, addr, token string) *client.RPCClient {
	t.Helper()
	c, err := client.ClientFromConfig(&client.Config{Addr: addr, AuthKey: token, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("rpc connect (token %t): %v", token != "", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Without rpc_auth, the Serf RPC serves read-only commands to anyone, and
// what changes the agent or reveals the gossip key only after auth with the
// API token; shoal's own tags are refused even then, and the connection
// stays in sync. After Shutdown nothing of the RPC is left running.
func TestSerfRPCNeedsAPITokenForChanges(t *testing.T) {
	c := testConfig(t, "rpc", "fast", "")
	c.RPCAddr = "127.0.0.1:0"
	n := startNode(t, c)
	addr := n.a.RPCAddr()

	anon := rpcClient(t, addr, "")
	if ms, err := anon.Members(); err != nil || len(ms) != 1 {
		t.Fatalf("members without auth: %v, %v", ms, err)
	}
	if _, err := anon.Stats(); err != nil {
		t.Fatalf("stats without auth: %v", err)
	}
	refused := map[string]func() error{
		"tags":        func() error { return anon.UpdateTags(map[string]string{"role": "web"}, nil) },
		"list-keys":   func() error { _, _, _, err := anon.ListKeys(); return err },
		"leave":       anon.Leave,
		"force-leave": func() error { return anon.ForceLeave("x") },
		"event":       func() error { return anon.UserEvent("e", nil, false) },
	}
	for name, f := range refused {
		if err := f(); err == nil || err.Error() != errAuthRequired {
			t.Errorf("%s without auth: %v, want %q", name, err, errAuthRequired)
		}
	}
	if _, err := client.ClientFromConfig(&client.Config{Addr: addr, AuthKey: "not-the-token", Timeout: 5 * time.Second}); err == nil ||
		err.Error() != "Invalid authentication token" {
		t.Fatalf("wrong token: %v", err)
	}

	before := n.a.Serf().LocalMember().Tags
	authed := rpcClient(t, addr, n.a.APIToken())
	for _, tc := range []struct {
		set map[string]string
		del []string
		key string
	}{
		{map[string]string{"role": "web"}, nil, "role"},
		{map[string]string{"sh": "passing"}, nil, "sh"},
		{map[string]string{"cluster": "other"}, nil, "cluster"},
		{map[string]string{"maint": "x"}, nil, "maint"},
		{nil, []string{"role"}, "role"},
	} {
		err := authed.UpdateTags(tc.set, tc.del)
		if want := `tag "` + tc.key + `"`; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "reserved by shoal") {
			t.Errorf("tags %v -%v: %v, want %q", tc.set, tc.del, err, want)
		}
		if ms, err := authed.Members(); err != nil || len(ms) != 1 {
			t.Fatalf("members after a refused tags command: %v, %v", ms, err)
		}
	}
	// `serf tags -set pad=<424 x>`: within memberlist's 512 bytes today,
	// but no room left for a longer health tag. Refused, naming the budget
	// and the size.
	if err := authed.UpdateTags(map[string]string{"pad": strings.Repeat("x", 424)}, nil); err == nil ||
		!strings.Contains(err.Error(), "128-byte user tag budget") || !strings.Contains(err.Error(), "431 bytes") {
		t.Errorf("tags pad=<424 x>: %v, want the budget and the size named", err)
	}
	if err := authed.UpdateTags(map[string]string{"team": "dba"}, nil); err != nil {
		t.Fatal(err)
	}
	local := n.a.Serf().LocalMember().Tags
	for _, k := range []string{"role", "sh", "cluster", "maint"} {
		if local[k] != before[k] {
			t.Errorf("tag %s = %q after the refused RPC tag changes, was %q", k, local[k], before[k])
		}
	}
	if local["team"] != "dba" {
		t.Fatalf("local tags after the RPC tag changes: %v", local)
	}
	// Unencrypted test cluster: serf itself answers, with its own error.
	if _, _, _, err := authed.ListKeys(); err != nil && err.Error() == errAuthRequired {
		t.Fatalf("list-keys after auth: %v", err)
	}

	n.a.Shutdown()
	var left string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = goroutinesWith("internal/serfrpc.", "(*AgentIPC).handleClient", "(*AgentIPC).listen"); left == "" {
			return
		}
	}
	t.Fatalf("rpc goroutines left after Shutdown:\n%s", left)
}

// With rpc_auth set, every command needs it (serf's rule), and the API
// token is not it.
func TestSerfRPCWithRPCAuth(t *testing.T) {
	c := testConfig(t, "rpc", "fast", "")
	c.RPCAddr = "127.0.0.1:0"
	c.RPCAuth = "s3cret"
	n := startNode(t, c)
	anon := rpcClient(t, n.a.RPCAddr(), "")
	if _, err := anon.Members(); err == nil || err.Error() != errAuthRequired {
		t.Fatalf("members without auth: %v", err)
	}
	if _, err := client.ClientFromConfig(&client.Config{Addr: n.a.RPCAddr(), AuthKey: n.a.APIToken(), Timeout: 5 * time.Second}); err == nil {
		t.Fatal("API token accepted as rpc_auth")
	}
	if ms, err := rpcClient(t, n.a.RPCAddr(), "s3cret").Members(); err != nil || len(ms) != 1 {
		t.Fatalf("members with rpc_auth: %v, %v", ms, err)
	}
}

func goroutinesWith(substrs ...string) string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "agent.goroutinesWith") {
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
