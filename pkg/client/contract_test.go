package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/agenttest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// The contract tests run the client against a real in-process agent and
// its real HTTP API: app1 (role app) with a forged database member db1
// (a real serf member publishing a passing writer's health) joined to it.
func startContractAgent(t *testing.T) (base, token string) {
	t.Helper()
	cfg := agenttest.Config(t, "app1", "")
	cfg.Role = tags.RoleApp
	a := agenttest.Start(t, cfg)
	testkit.StartSerf(t, "db1", map[string]string{
		tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main",
		tags.KeyHealth: tags.Encode(tags.Health{State: tags.Passing, Port: 3306}),
	}, cfg.Bind)
	return agenttest.Serve(t, a), a.APIToken()
}

// getJSON is the raw JSON of an open route, for what the wire must say.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v in %s", url, err, b)
	}
}

func TestContract(t *testing.T) {
	base, token := startContractAgent(t)
	ctx := context.Background()
	anon := client.New(base)
	authed := client.New(base, client.WithToken(token))

	// The pool has db1 as the writer of main once the agent has it.
	testkit.WaitFor(t, 20*time.Second, "db1 the writer of main", func() bool {
		p, err := anon.Pool(ctx, "main")
		return err == nil && len(p.Writers) == 1 && p.Writers[0].Name == "db1"
	})

	t.Run("members", func(t *testing.T) {
		ms, err := anon.Members(ctx, client.MemberFilter{})
		if err != nil || len(ms) != 2 || ms[0].Name != "app1" || ms[1].Name != "db1" {
			t.Fatalf("members %+v, %v", ms, err)
		}
		db := ms[1]
		if db.Status != "alive" || db.Tags["role"] != "db" || db.Health == nil || db.Health.State != "passing" || db.Health.Port != 3306 || db.Invalid != nil {
			t.Fatalf("db1 %+v (health %+v)", db, db.Health)
		}
		if ms[0].Health != nil || ms[0].RTTSeconds != nil {
			t.Fatalf("app1: health %+v, rtt %v: want neither for an app agent itself", ms[0].Health, ms[0].RTTSeconds)
		}
		if only, err := anon.Members(ctx, client.MemberFilter{Tags: map[string]string{"role": "d."}}); err != nil || len(only) != 1 || only[0].Name != "db1" {
			t.Fatalf("members role=d.: %+v, %v", only, err)
		}
		var ae *client.APIError
		if _, err := anon.Members(ctx, client.MemberFilter{Name: "("}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Fatalf("bad regex: %#v", err)
		}
	})

	t.Run("pool", func(t *testing.T) {
		p, err := anon.Pool(ctx, "")
		if err != nil || len(p.Clusters) != 1 || p.Clusters[0].Name != "main" || p.Isolated || p.UpdatedAt.IsZero() {
			t.Fatalf("pool %+v, %v", p, err)
		}
		c := p.Clusters[0]
		if len(c.Writers) != 1 || c.Writers[0].Cluster != "" || p.Writers[0].Cluster != "main" || len(c.Readers) != 0 || c.Conflict == nil || p.Sinks == nil {
			t.Fatalf("pool %+v", p)
		}
		var ae *client.APIError
		if _, err := anon.Pool(ctx, "nope"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Fatalf("unknown cluster: %#v", err)
		}
		// On the wire, empty lists are [], never null.
		var raw struct {
			Clusters []struct {
				Readers, Conflict []any
			}
			Sinks []any
		}
		getJSON(t, base+"/v1/pool", &raw)
		if raw.Clusters[0].Readers == nil || raw.Clusters[0].Conflict == nil || raw.Sinks == nil {
			t.Fatalf("null list in /v1/pool: %+v", raw)
		}
	})

	t.Run("health", func(t *testing.T) {
		h, err := anon.Health(ctx)
		if err != nil || h.Status != "ok" || h.Node != "app1" || h.Role != "app" || h.Gossip != "alive" || h.MySQL != nil || h.Publish == nil || !h.Publish.OK {
			t.Fatalf("health %+v, %v", h, err)
		}
	})

	t.Run("self", func(t *testing.T) {
		in, err := anon.Info(ctx)
		if err != nil || in.Node != "app1" || in.Status != "alive" || in.Version == "" || in.Profile != "fast" || in.Encrypted {
			t.Fatalf("info %+v, %v", in, err)
		}
		if in.Serf.Members != 2 || in.Serf.Failed != 0 || in.Serf.MemberTime == 0 || in.Serf.Encrypted {
			t.Fatalf("serf stats %+v", in.Serf)
		}
		for _, d := range []string{in.Uptime, in.Timings.ProbeInterval, in.Timings.GossipInterval, in.Timings.ReconnectInterval} {
			if _, err := time.ParseDuration(d); err != nil {
				t.Errorf("duration %q: %v", d, err)
			}
		}
		if in.Join.Joined || len(in.Join.Addrs) != 0 || !in.Publish.OK {
			t.Fatalf("join %+v, publish %+v", in.Join, in.Publish)
		}
		// serf's counters are strings on the wire, as serf reports them.
		var raw struct {
			Serf      map[string]any
			Consensus any `json:"consensus"`
		}
		raw.Consensus = "unset"
		getJSON(t, base+"/v1/agent/self", &raw)
		if raw.Serf["members"] != "2" || raw.Serf["encrypted"] != "false" {
			t.Fatalf("serf on the wire: %v", raw.Serf)
		}
		// Without a consensus key there is no consensus field at all.
		if in.Consensus != nil || raw.Consensus != "unset" {
			t.Fatalf("consensus without a consensus key: %+v, on the wire %v", in.Consensus, raw.Consensus)
		}
	})

	t.Run("tags", func(t *testing.T) {
		var ae *client.APIError
		if _, err := anon.UpdateTags(ctx, map[string]string{"team": "dba"}, nil); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("without the token: %#v", err)
		}
		if ms, _ := anon.Members(ctx, client.MemberFilter{Name: "app1"}); len(ms) != 1 || ms[0].Tags["team"] != "" {
			t.Fatalf("a refused change was applied: %+v", ms)
		}
		got, err := authed.UpdateTags(ctx, map[string]string{"team": "dba"}, nil)
		if err != nil || got["team"] != "dba" {
			t.Fatalf("with the token: %v, %v", got, err)
		}
		if _, err := authed.UpdateTags(ctx, map[string]string{"role": "db"}, nil); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Fatalf("reserved key: %#v", err)
		}
		testkit.WaitFor(t, 10*time.Second, "the new tag in the member list", func() bool {
			ms, err := anon.Members(ctx, client.MemberFilter{Tags: map[string]string{"team": "dba"}})
			return err == nil && len(ms) == 1 && ms[0].Name == "app1"
		})
	})

	t.Run("maint, history, hooks", func(t *testing.T) {
		m, err := anon.Maint(ctx)
		if err != nil || m.Node != "app1" || m.Enabled {
			t.Fatalf("maint %+v, %v", m, err)
		}
		var ae *client.APIError
		if _, err := anon.SetMaint(ctx, true, "x"); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("set maint without the token: %#v", err)
		}
		if _, err := authed.SetMaint(ctx, true, "x"); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Fatalf("set maint on an app agent: %#v", err)
		}
		h, err := anon.History(ctx, client.HistoryFilter{Kind: "pool"})
		if err != nil || h.Capacity == 0 || len(h.Entries) == 0 || h.Entries[len(h.Entries)-1].Node != "db1" {
			t.Fatalf("history %+v, %v", h, err)
		}
		hs, err := anon.Hooks(ctx)
		if err != nil || hs.Handlers == nil || len(hs.Handlers) != 0 {
			t.Fatalf("hooks %+v, %v", hs, err)
		}
		if _, err := anon.ListKeys(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("keys without the token: %#v", err)
		}
	})
}
