// Package agenttest starts in-process shoal agents for the tests of the
// packages built on top of the agent (api, cli, ui). The agent package's own
// tests cannot use it (it imports the agent) and have their own helpers.
package agenttest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/testutil/ports"
)

// Config is a fast-profile agent named name on a free 127.0.0.1 port, with
// no RPC and no HTTP listener of its own and its API token in a temporary
// file; gossip is unencrypted unless key is set.
func Config(t testing.TB, name, key string) *config.Config {
	t.Helper()
	c := config.Default()
	c.Node, c.Bind, c.RPCAddr, c.HTTPAddr, c.Profile = name, ports.Free(t), "", "", "fast"
	c.Encrypt = key
	c.InsecureNoEncryption = key == ""
	c.APITokenFile = filepath.Join(t.TempDir(), "api-token")
	return c
}

// Start validates c, starts the agent and shuts it down at the end of the
// test.
func Start(t testing.TB, c *config.Config) *agent.Agent {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(c, logging.New(io.Discard, "text", slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	return a
}

// Serve serves a's HTTP API (the status page included) as `shoal agent`
// does, on an httptest server closed at the end of the test, and returns
// its base URL.
func Serve(t testing.TB, a *agent.Agent) string {
	t.Helper()
	srv := httptest.NewServer(api.New(a, slog.New(slog.DiscardHandler), "", nil))
	t.Cleanup(srv.Close)
	return srv.URL
}
