package process

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

type poolJSON struct {
	Writers []struct{ Name, Addr, Reason, Detail string } `json:"writers"`
	Readers []struct{ Name, Addr, Reason, Detail string } `json:"readers"`
	Out     []struct{ Name, Addr, Reason, Detail string } `json:"out"`
}

// TestPoolMaintHistoryCLI runs the acceptance interface end to end with the
// real binary: a db agent on a real MariaDB (password from
// SHOAL_MYSQL_PASSWORD) and an app agent; shoal pool --format json, shoal
// maint and shoal history against them.
func TestPoolMaintHistoryCLI(t *testing.T) {
	mariadbtest.Require(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	srv.CreateUser(mariadbtest.User{Name: "shoal", Password: "pw-proc", Grants: "SLAVE MONITOR"})
	t.Setenv("SHOAL_MYSQL_PASSWORD", "pw-proc")
	out, _, _ := shoal(t, "keygen")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	db := startAgent(t, "db1", key, "--mysql-addr", srv.Addr(), "--mysql-user", "shoal")
	app := startAgent(t, "app1", key, "--join", db.bind)

	for _, p := range []*proc{db, app} {
		testkit.WaitFor(t, 20*time.Second, "agent answers", func() bool {
			_, _, code := shoal(t, "info", "--http-addr", p.http)
			return code == 0
		})
	}
	pool := func(http string) poolJSON {
		t.Helper()
		out, errOut, code := shoal(t, "pool", "--http-addr", http, "--format", "json")
		if code != 0 {
			t.Fatalf("shoal pool: exit %d: %s", code, errOut)
		}
		var p poolJSON
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("shoal pool json: %v\n%s", err, out)
		}
		if p.Writers == nil || p.Readers == nil || p.Out == nil {
			t.Fatalf("writers, readers and out must be arrays:\n%s", out)
		}
		return p
	}
	testkit.WaitFor(t, 30*time.Second, "app sees db1 as the writer", func() bool {
		p := pool(app.http)
		return len(p.Writers) == 1 && p.Writers[0].Name == "db1" && p.Writers[0].Addr == srv.Addr()
	})

	if _, errOut, code := shoal(t, "maint", "enable", "--http-addr", app.http); code != 1 || !strings.Contains(errOut, "role app") {
		t.Errorf("maint on an app agent: exit %d: %s", code, errOut)
	}
	if out, errOut, code := shoal(t, "maint", "enable", "--reason", "disk swap", "--http-addr", db.http); code != 0 || !strings.Contains(out, "MAINTENANCE on") {
		t.Fatalf("maint enable: exit %d: %s%s", code, out, errOut)
	}
	testkit.WaitFor(t, 10*time.Second, "db1 out for maintenance on app1", func() bool {
		p := pool(app.http)
		return len(p.Writers) == 0 && len(p.Out) == 1 && p.Out[0].Reason == "maintenance" && p.Out[0].Detail == "disk swap"
	})
	if out, _, code := shoal(t, "maint", "disable", "--http-addr", db.http); code != 0 || !strings.Contains(out, "maintenance off") {
		t.Fatalf("maint disable: exit %d: %s", code, out)
	}
	testkit.WaitFor(t, 10*time.Second, "db1 back as writer", func() bool { return len(pool(app.http).Writers) == 1 })

	out, errOut, code := shoal(t, "history", "--http-addr", app.http, "--node", "db1", "--format", "json")
	if code != 0 {
		t.Fatalf("history: exit %d: %s", code, errOut)
	}
	var h struct {
		Entries []struct{ Kind, From, To, Reason string } `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, e := range h.Entries {
		path = append(path, e.From+">"+e.To+":"+e.Reason)
	}
	got := strings.Join(path, " ")
	if !strings.Contains(got, "writer>out:maintenance out>writer:") {
		t.Errorf("app1 history of db1: %s", got)
	}
	if out, _, code := shoal(t, "history", "--http-addr", db.http, "--kind", "maint"); code != 0 || !strings.Contains(out, "disk swap") {
		t.Errorf("db1 maint history: exit %d:\n%s", code, out)
	}
	if _, errOut, code := shoal(t, "history", "--since", "yesterday", "--http-addr", db.http); code != 2 || !strings.Contains(errOut, `--since "yesterday"`) {
		t.Errorf("history --since yesterday: exit %d: %s", code, errOut)
	}
}
