package process

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// fleetDB starts a MariaDB server and a db agent of cluster main on it,
// with the consensus key and bootstrap_expect expect; join may be "".
func fleetDB(t *testing.T, name, gkey, ckey string, expect int, readOnly bool, join string) (*proc, *mariadbtest.Server) {
	t.Helper()
	srv := mariadbtest.Start(t, mariadbtest.Options{ReadOnly: readOnly})
	srv.CreateUser(mariadbtest.User{Name: "shoal", Password: "pw-fleet", Grants: "SLAVE MONITOR"})
	args := []string{"--mysql-addr", srv.Addr(), "--mysql-user", "shoal", "--cluster", "main",
		"--consensus-key", ckey, "--consensus-keyring-file", t.TempDir() + "/consensus.keyring",
		"--consensus-bind", ports.Free(t), "--consensus-bootstrap-expect", strconv.Itoa(expect)}
	if join != "" {
		args = append(args, "--join", join)
	}
	return startAgent(t, name, gkey, args...), srv
}

// writersOf is an agent's writers of cluster main ("?" when it does not
// answer).
func writersOf(p *proc) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := client.New(p.http).Pool(ctx, "main")
	if err != nil {
		return "?"
	}
	var names []string
	for _, w := range r.Writers {
		names = append(names, w.Name)
	}
	return strings.Join(names, ",")
}

// metricOf reads one sample of an agent's /metrics (-1 when absent).
func metricOf(p *proc, name string) float64 {
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestFleetIdentityWithRealAgents (issue 36, findings 2 and 3): fleet X
// (db1-db3 voting, app1 routing) and fleet Y (y1, y2, bootstrap_expect 2)
// run from a copied configuration: the same gossip key and consensus key,
// never joined. Y's writer moves to y2 (term 2).
//
//   - A gossip-key holder replays Y's signed term into X. Before terms named
//     their raft group, every agent of X followed "term 2: y2" (X's own
//     term is 1) and X had no writer. Now they ignore it, count it, and
//     route writes to db1 as before.
//   - Y joins X: two raft groups in one gossip, each with a writable holder.
//     Before, routers split between db1 and y2. Now no agent routes writes
//     in main, `shoal info` shows both groups, the leader of X does not
//     admit Y's voters, and writes come back to db1 once Y has left.
func TestFleetIdentityWithRealAgents(t *testing.T) {
	mariadbtest.Require(t)
	gkey, ckey := newKey(t), newKey(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", "pw-fleet")
	db1, _ := fleetDB(t, "db1", gkey, ckey, 3, false, "")
	db2, _ := fleetDB(t, "db2", gkey, ckey, 3, true, db1.bind)
	db3, _ := fleetDB(t, "db3", gkey, ckey, 3, true, db1.bind)
	app := startAgent(t, "app1", gkey, "--role", "app", "--join", db1.bind,
		"--consensus-key", ckey, "--consensus-keyring-file", t.TempDir()+"/consensus.keyring")
	y1, y1srv := fleetDB(t, "y1", gkey, ckey, 2, false, "")
	y2, y2srv := fleetDB(t, "y2", gkey, ckey, 2, true, y1.bind)
	x := []*proc{db1, db2, db3, app}
	testkit.WaitFor(t, 60*time.Second, "fleet X routes writes to db1 by term 1", func() bool {
		for _, p := range x {
			if writersOf(p) != "db1" {
				return false
			}
		}
		return termOf(consensusOf(app), "main").Term == 1
	})
	testkit.WaitFor(t, 60*time.Second, "fleet Y's term 1 to y1", func() bool { return termOf(consensusOf(y1), "main").Term == 1 })
	y1srv.SetReadOnly(true)
	y2srv.SetReadOnly(false)
	testkit.WaitFor(t, 30*time.Second, "fleet Y's term 2 to y2", func() bool {
		tm := termOf(consensusOf(y1), "main")
		return tm.Term == 2 && tm.Writer == "y2"
	})

	t.Run("replayed_term_of_another_fleet", func(t *testing.T) {
		// Capture Y's signed term as any member of Y's gossip can: a term query.
		spy := testkit.StartSerfKeyed(t, "spy", nil, y1.bind, gkey)
		resp, err := spy.Query(consensus.TermQuery, consensus.EncodeTermQuery("main"), &serf.QueryParam{FilterTags: map[string]string{tags.KeyVoter: ".+"}})
		if err != nil {
			t.Fatal(err)
		}
		var signed []byte
		for r := range resp.ResponseCh() {
			signed = r.Payload
			break
		}
		resp.Close()
		if signed == nil {
			t.Fatal("no voter of Y answered the term query")
		}
		_ = spy.Shutdown()
		before := metricOf(app, "shoal_terms_foreign_group_total")
		replay := testkit.StartSerfKeyed(t, "replayer", nil, db1.bind, gkey)
		for range 3 {
			if err := replay.UserEvent(consensus.TermEvent, signed, false); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		time.Sleep(3 * time.Second)
		for _, p := range x {
			if w, tm := writersOf(p), termOf(consensusOf(p), "main"); w != "db1" || tm.Term != 1 || tm.Writer != "db1" {
				t.Errorf("after the replay an agent of X routes writes to %q by term %+v", w, tm)
			}
		}
		if after := metricOf(app, "shoal_terms_foreign_group_total"); after <= before {
			t.Errorf("app1 did not count the replayed term as another group's: %v before, %v after", before, after)
		}
		_ = replay.Shutdown()
	})

	t.Run("two_groups_in_one_gossip", func(t *testing.T) {
		if _, errOut, code := shoal(t, "join", "--http-addr", y1.http, db1.bind); code != 0 {
			t.Fatalf("join Y to X: exit %d: %s", code, errOut)
		}
		all := []*proc{db1, db2, db3, app, y1, y2}
		// The joiners' alive messages reach most agents within a second;
		// one that missed every copy (seen in CI: app1, with the spy and
		// the replayer just gone and taking gossip) learns them at the
		// next push-pull, at most serf's 30 s later.
		testkit.WaitFor(t, 45*time.Second, "every agent sees both raft groups", func() bool {
			for _, p := range all {
				if c := consensusOf(p); c == nil || len(c.Groups) != 2 {
					return false
				}
			}
			return true
		})
		// For 5 s no agent routes writes in main.
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			for _, p := range all {
				if w := writersOf(p); w != "" && w != "?" {
					c := consensusOf(p)
					t.Fatalf("with two raft groups an agent routes writes to %s (its groups: %+v)", w, c.Groups)
				}
			}
		}
		if v := voterIDs(consensusOf(db1)); fmt.Sprint(v) != "[db1 db2 db3]" {
			t.Errorf("X's voters with Y joined: %v", v)
		}
		out, _, _ := shoal(t, "info", "--http-addr", app.http)
		if !strings.Contains(out, "SPLIT: voters of 2 raft groups") {
			t.Errorf("shoal info on app1 does not show the split:\n%s", out)
		}
		if v := metricOf(app, "shoal_consensus_raft_groups"); v != 2 {
			t.Errorf("shoal_consensus_raft_groups on app1 = %v, want 2", v)
		}
		// Y leaves: X routes writes to db1 again.
		for _, p := range []*proc{y1, y2} {
			if _, errOut, code := shoal(t, "leave", "--http-addr", p.http); code != 0 {
				t.Fatalf("leave: exit %d: %s", code, errOut)
			}
		}
		testkit.WaitFor(t, 20*time.Second, "X routes writes to db1 after Y left", func() bool {
			for _, p := range x {
				if writersOf(p) != "db1" {
					return false
				}
			}
			return true
		})
	})
}
