package agent

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/internal/api"
	gossiped "github.com/shoaldb/shoal/internal/member"
	filesink "github.com/shoaldb/shoal/internal/sink/file"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// writerHealth is the health tag of a passing writable server.
var writerHealth = tags.Encode(tags.Health{State: tags.Passing, Port: 3306})

// TestHostileMembers: real serf members whose names and tags carry invalid
// UTF-8, terminal escapes, newlines and an oversized name join a real agent
// with the file sink on. /metrics still gathers with printable labels only,
// the pool lists them out as bad-name or bad-tags (never writer or reader),
// no file with a control character or outside lists_dir is created and the
// sink stays ok, /v1/members shows them escaped with the reason, and the one
// whose name is not valid UTF-8 can be force-left and pruned through the
// API by the escaped name it is shown with.
func TestHostileMembers(t *testing.T) {
	dir := t.TempDir()
	lists := filepath.Join(dir, "lists")
	if err := os.Mkdir(lists, 0o755); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t, "app1", "fast", "")
	c.Role = tags.RoleApp
	c.Sinks.File = filesink.Config{Path: filepath.Join(dir, "pool.json"), ListsDir: lists}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	app := startNode(t, c)
	srv := httptest.NewServer(api.New(app.a, slog.New(slog.DiscardHandler), "", nil))
	defer srv.Close()
	cl := client.New(srv.URL, client.WithToken(app.a.APIToken()))

	longName := strings.Repeat("x", 1000) + "\x1b]0;pwned\x07"
	testkit.StartSerf(t, "db-ok", map[string]string{"role": "db", "cluster": "main", "sh": writerHealth}, c.Bind)
	badUTF8 := testkit.StartSerf(t, "db\xff", map[string]string{"role": "db", "cluster": "c\xff", "sh": writerHealth}, c.Bind)
	testkit.StartSerf(t, "evil", map[string]string{"role": "db", "cluster": "main\n\x1b[31mX", "sh": writerHealth, "note": "\x1b[2J"}, c.Bind)
	testkit.StartSerf(t, "evil2", map[string]string{"role": "db", "cluster": strings.Repeat("c", 300), "sh": writerHealth}, c.Bind)
	testkit.StartSerf(t, longName, map[string]string{"role": "db", "cluster": "main", "sh": writerHealth}, c.Bind)

	longShown := gossiped.Escape(longName)
	want := map[string]string{ // cluster/node -> place
		"main/db-ok":                        "writer",
		"main/" + longShown:                 "out:bad-name",
		`c\xff/db\xff`:                      "out:bad-name",
		`main\n\x1b[31mX/evil`:              "out:bad-tags",
		strings.Repeat("c", 300) + "/evil2": "out:bad-tags",
	}
	places := func() map[string]string {
		got := map[string]string{}
		for _, cp := range app.a.pool.router.Current().Pool.Clusters {
			for _, n := range cp.Writers {
				got[cp.Name+"/"+n.Name] = "writer"
			}
			for _, n := range cp.Readers {
				got[cp.Name+"/"+n.Name] = "reader"
			}
			for _, n := range cp.Out {
				got[cp.Name+"/"+n.Name] = "out:" + string(n.Reason)
			}
		}
		return got
	}
	testkit.WaitFor(t, 20*time.Second, "the pool places every member", func() bool {
		got := places()
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return len(got) == len(want)
	})
	for _, cp := range app.a.pool.router.Current().Pool.Clusters {
		for _, n := range cp.Out {
			if !gossiped.Printable(n.Name) || !gossiped.Printable(n.Detail) || !gossiped.Printable(cp.Name) {
				t.Errorf("unsafe pool text: cluster %q node %q detail %q", cp.Name, n.Name, n.Detail)
			}
		}
	}

	// /metrics: the agent's collectors through a real registry.
	reg := prometheus.NewRegistry()
	reg.MustRegister(app.a.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var outSeries int
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !utf8.ValidString(l.GetValue()) || !gossiped.Printable(l.GetValue()) {
					t.Errorf("%s: label %s=%q is not printable UTF-8", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
			if mf.GetName() == "shoal_pool_out" {
				outSeries++
			}
		}
	}
	if outSeries != 4 {
		t.Errorf("shoal_pool_out has %d series, want 4", outSeries)
	}

	// Files: only the valid cluster's lists, printable names, sink ok.
	testkit.WaitFor(t, 10*time.Second, "the file sink is ok, with a note on the skipped clusters", func() bool {
		pv, err := app.a.PoolView("")
		return err == nil && len(pv.Sinks) == 1 && pv.Sinks[0].State == "ok" &&
			strings.Count(strings.Join(pv.Sinks[0].Notes, "\n"), "no list files") == 3
	})
	testkit.WaitFor(t, 10*time.Second, "the file sink writes main's lists", func() bool {
		b, err := os.ReadFile(filepath.Join(lists, "main-writers.txt"))
		_, err2 := os.Stat(filepath.Join(lists, "main-readers.txt"))
		return err == nil && err2 == nil && strings.HasSuffix(string(b), ":3306\n")
	})
	entries, err := os.ReadDir(lists)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !gossiped.Printable(e.Name()) || strings.ContainsAny(e.Name(), `/\`) {
			t.Errorf("list file with an unsafe name: %q", e.Name())
		}
	}
	if strings.Join(names, " ") != "main-readers.txt main-writers.txt" {
		t.Errorf("lists_dir holds %q, want main's two lists only", names)
	}

	// /v1/members: escaped names, the reason, printable tags.
	ms, err := cl.Members(context.Background(), client.MemberFilter{})
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]*client.MemberProblem{}
	for _, m := range ms {
		shown[m.Name] = m.Invalid
		for k, v := range m.Tags {
			if m.Invalid != nil && (!gossiped.Printable(k) || !gossiped.Printable(v)) {
				t.Errorf("member %q: tag %q=%q not escaped", m.Name, k, v)
			}
		}
	}
	for name, reason := range map[string]string{`db\xff`: "bad-name", "evil": "bad-tags", "evil2": "bad-tags", longShown: "bad-name"} {
		if p := shown[name]; p == nil || p.Reason != reason || !gossiped.Printable(p.Detail) {
			t.Errorf("/v1/members %.40q: invalid = %+v, want %s", name, p, reason)
		}
	}
	if p, ok := shown["db-ok"]; !ok || p != nil {
		t.Errorf("/v1/members db-ok: present %v, invalid %+v", ok, p)
	}

	// force-leave --prune by the escaped name, through the API.
	if err := badUTF8.Shutdown(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "db\\xff failed", func() bool { return statusOf(app.a, "db\xff") == serf.StatusFailed })
	if err := cl.ForceLeave(context.Background(), `db\xff`, true); err != nil {
		t.Fatalf("force-leave by escaped name: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "db\\xff pruned", func() bool { return statusOf(app.a, "db\xff") == serf.StatusNone })
	testkit.WaitFor(t, 10*time.Second, "db\\xff gone from the pool", func() bool {
		_, ok := places()[`c\xff/db\xff`]
		return !ok
	})
}

// An agent never publishes a tag value the other agents would refuse: the
// local tag change is refused with the rule it breaks, and nothing changes.
func TestLocalTagsFollowGossipRules(t *testing.T) {
	n := startNode(t, testConfig(t, "tags1", "fast", ""))
	for _, v := range []string{"eu\n", "eu\xff", "\x1b[2J", strings.Repeat("v", 513)} {
		if err := n.a.CheckTagChange(map[string]string{"dc": v}, nil); err == nil || !strings.Contains(err.Error(), `"dc"`) {
			t.Errorf("CheckTagChange(dc=%q) = %v", v, err)
		}
		if _, err := n.a.UpdateTags(map[string]string{"dc": v}, nil); err == nil || !strings.Contains(err.Error(), `"dc"`) {
			t.Errorf("UpdateTags(dc=%q) = %v", v, err)
		}
	}
	if _, ok := n.a.Serf().LocalMember().Tags["dc"]; ok {
		t.Error("a refused tag was published")
	}
	if _, err := n.a.UpdateTags(map[string]string{"dc": "eu-1 (Frankfurt)"}, nil); err != nil {
		t.Errorf("a printable value refused: %v", err)
	}
}
