package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

type testNode struct {
	a    *Agent
	cfg  *config.Config
	logs *testkit.SyncBuffer
}

// testConfig returns a config for an in-process agent on loopback.
func testConfig(t testing.TB, name, profile, key string, join ...string) *config.Config {
	c := config.Default()
	c.Node = name
	c.Bind = ports.Free(t)
	c.Profile = profile
	c.RPCAddr = ""
	c.HTTPAddr = ""
	c.Join = join
	c.APITokenFile = filepath.Join(t.TempDir(), "api-token")
	c.RetryInterval = 100 * time.Millisecond
	c.RetryMaxWait = time.Second
	c.LogLevel = "debug"
	if key == "" {
		c.InsecureNoEncryption = true
	} else {
		c.Encrypt = key
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func startNode(t testing.TB, c *config.Config) *testNode {
	t.Helper()
	buf := &testkit.SyncBuffer{}
	logs := logging.New(buf, "text", slog.LevelDebug)
	a, err := New(c, logs)
	if err != nil {
		t.Fatal(err)
	}
	err = testkit.StartRetrying(func() error { return a.Start(context.Background()) }, func() {
		a.Shutdown()
		c.Bind = ports.Free(t)
		if a, err = New(c, logs); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatalf("start %s: %v", c.Node, err)
	}
	n := &testNode{a: a, cfg: c, logs: buf}
	t.Cleanup(func() {
		a.Shutdown()
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", c.Node, buf.String())
		}
	})
	return n
}

// startCluster starts n agents that all join the first one.
func startCluster(t testing.TB, n int, profile, key string) []*testNode {
	t.Helper()
	first := testConfig(t, "node0", profile, key)
	nodes := []*testNode{startNode(t, first)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startNode(t, testConfig(t, fmt.Sprintf("node%d", i), profile, key, first.Bind)))
	}
	// Join news spreads by gossip with few retransmits in the lan/local
	// profiles; a member that misses it learns at the next push-pull (15-30 s).
	testkit.WaitFor(t, 75*time.Second, "cluster converges", func() bool {
		for _, nd := range nodes {
			if countStatus(nd.a, serf.StatusAlive) != n {
				return false
			}
		}
		return true
	})
	return nodes
}

func countStatus(a *Agent, st serf.MemberStatus) int {
	c := 0
	for _, m := range a.Members() {
		if m.Status == st {
			c++
		}
	}
	return c
}

func statusOf(a *Agent, name string) serf.MemberStatus {
	for _, m := range a.Members() {
		if m.Name == name {
			return m.Status
		}
	}
	return serf.StatusNone
}

func TestClusterJoinConverges(t *testing.T) {
	nodes := startCluster(t, 5, "local", "")
	for _, n := range nodes {
		info := n.a.Info("")
		if !n.a.Serf().EncryptionEnabled() == (n.cfg.Encrypt != "") {
			t.Errorf("%s: encryption state wrong", n.cfg.Node)
		}
		if len(n.cfg.Join) > 0 && !info.Join.Joined {
			t.Errorf("%s: join status %+v", n.cfg.Node, info.Join)
		}
	}
}

// TestFailureDetected stops one agent's gossip without a leave (as a crash
// would) and checks every survivor marks it failed within the profile bound.
func TestFailureDetected(t *testing.T) {
	for _, tc := range []struct {
		profile string
		bound   time.Duration
	}{
		{"fast", 10 * time.Second},
		{"local", 40 * time.Second}, // Lifeguard max suspicion ≈ 13 s plus the wait to be probed
	} {
		t.Run(tc.profile, func(t *testing.T) {
			nodes := startCluster(t, 4, tc.profile, "")
			victim := nodes[3]
			start := time.Now()
			victim.a.Shutdown()
			testkit.WaitFor(t, tc.bound, "all survivors see node3 failed", func() bool {
				for _, n := range nodes[:3] {
					if statusOf(n.a, "node3") != serf.StatusFailed {
						return false
					}
				}
				return true
			})
			t.Logf("profile %s: all survivors saw failed after %s", tc.profile, time.Since(start).Round(time.Millisecond))
		})
	}
}

func TestGracefulLeaveSeenAsLeft(t *testing.T) {
	nodes := startCluster(t, 3, "fast", "")
	if err := nodes[2].a.Leave(); err != nil {
		t.Fatal(err)
	}
	nodes[2].a.Shutdown()
	testkit.WaitFor(t, 10*time.Second, "node2 left everywhere", func() bool {
		return statusOf(nodes[0].a, "node2") == serf.StatusLeft && statusOf(nodes[1].a, "node2") == serf.StatusLeft
	})
}

func TestSnapshotRejoinsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	nodes := startCluster(t, 3, "fast", "")
	c := testConfig(t, "snappy", "fast", "", nodes[0].cfg.Bind)
	c.Snapshot = filepath.Join(dir, "snapshot")
	n := startNode(t, c)
	testkit.WaitFor(t, 10*time.Second, "snappy joined", func() bool { return countStatus(nodes[0].a, serf.StatusAlive) == 4 })
	// Crash it: no leave, so the snapshot still lists its peers as alive.
	n.a.Shutdown()
	testkit.WaitFor(t, 10*time.Second, "snappy failed", func() bool { return statusOf(nodes[0].a, "snappy") == serf.StatusFailed })

	c2 := *c
	c2.Join = nil // nothing but the snapshot tells it where the cluster is
	startNode(t, &c2)
	testkit.WaitFor(t, 10*time.Second, "snappy alive again everywhere without a join address", func() bool {
		for _, nd := range nodes {
			if statusOf(nd.a, "snappy") != serf.StatusAlive {
				return false
			}
		}
		return true
	})
}

func TestDuplicateNameRefused(t *testing.T) {
	nodes := startCluster(t, 3, "fast", "")
	dup := testConfig(t, "node1", "fast", "", nodes[0].cfg.Bind)
	n := startNode(t, dup)
	select {
	case err := <-n.a.Fatal():
		want := `node name "node1" is already used by a live member at ` + nodes[1].cfg.Bind
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Fatalf("error = %v, want it to contain %q", err, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("duplicate name was not refused")
	}
	// The original keeps its name and address everywhere.
	for _, nd := range nodes {
		for _, m := range nd.a.Members() {
			if m.Name == "node1" && (m.Status != serf.StatusAlive || fmt.Sprintf("%s:%d", m.Addr, m.Port) != nodes[1].cfg.Bind) {
				t.Errorf("%s sees node1 as %s at %s:%d", nd.cfg.Node, m.Status, m.Addr, m.Port)
			}
		}
	}
}

func TestWrongKeyRefused(t *testing.T) {
	k1, _ := GenerateKey()
	k2, _ := GenerateKey()
	nodes := startCluster(t, 2, "fast", k1)
	bad := testConfig(t, "intruder", "fast", k2, nodes[0].cfg.Bind)
	bad.RetryMax = 2
	n := startNode(t, bad)
	select {
	case err := <-n.a.Fatal():
		if !bytes.Contains([]byte(err.Error()), []byte("no installed keys could decrypt the message")) {
			t.Fatalf("join error = %v, want the decryption failure named", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("join with a wrong key did not fail")
	}
	info := n.a.Info("")
	if info.Join.Joined || info.Join.LastError == "" {
		t.Errorf("info join = %+v, want not joined with an error", info.Join)
	}
	for _, nd := range nodes {
		if statusOf(nd.a, "intruder") != serf.StatusNone {
			t.Errorf("%s lists the intruder", nd.cfg.Node)
		}
	}
}

func TestTagsPropagateAndPersist(t *testing.T) {
	nodes := startCluster(t, 3, "fast", "")
	tagsFile := filepath.Join(t.TempDir(), "tags.json")
	c := testConfig(t, "tagged", "fast", "", nodes[0].cfg.Bind)
	c.TagsFile = tagsFile
	c.Tags = map[string]string{"team": "dba"}
	n := startNode(t, c)
	if _, err := n.a.UpdateTags(map[string]string{"dc": "eu1"}, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "tags seen by every member", func() bool {
		for _, nd := range nodes {
			for _, m := range nd.a.Members() {
				if m.Name == "tagged" && (m.Tags["dc"] != "eu1" || m.Tags["team"] != "" || m.Tags["role"] != "app") {
					return false
				}
			}
		}
		return true
	})
	n.a.Shutdown()
	// Restarted with the same config, the tags file wins.
	c2 := *c
	c2.Bind = ports.Free(t)
	n2 := startNode(t, &c2)
	got := n2.a.Serf().LocalMember().Tags
	if got["dc"] != "eu1" || got["team"] != "" || got["role"] != "app" {
		t.Fatalf("tags after restart = %v, want the persisted {dc: eu1} plus role=app", got)
	}
}

// TestDuplicateNameLoneNodeSurvives covers the case serf's own resolution
// gets wrong: a one-node cluster and a newcomer with its name. Nobody else
// can vote; the newcomer must step down and the established node must stay.
func TestDuplicateNameLoneNodeSurvives(t *testing.T) {
	orig := startNode(t, testConfig(t, "lonely", "fast", ""))
	dup := startNode(t, testConfig(t, "lonely", "fast", "", orig.cfg.Bind))
	select {
	case err := <-dup.a.Fatal():
		if !strings.Contains(err.Error(), `node name "lonely" is already used by a live member at `+orig.cfg.Bind) {
			t.Fatalf("error = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("duplicate name was not refused")
	}
	select {
	case err := <-orig.a.Fatal():
		t.Fatalf("the established node stopped: %v", err)
	case <-time.After(2 * time.Second):
	}
	if orig.a.Serf().State() != serf.SerfAlive {
		t.Fatalf("established node state %s", orig.a.Serf().State())
	}
}

func TestKeyRotation(t *testing.T) {
	k1, _ := GenerateKey()
	k2, _ := GenerateKey()
	dir := t.TempDir()
	var nodes []*testNode
	for i := 0; i < 3; i++ {
		c := testConfig(t, fmt.Sprintf("k%d", i), "fast", k1)
		if i > 0 {
			c.Join = []string{nodes[0].cfg.Bind}
		}
		c.KeyringFile = filepath.Join(dir, fmt.Sprintf("keyring%d.json", i))
		nodes = append(nodes, startNode(t, c))
	}
	testkit.WaitFor(t, 10*time.Second, "converged", func() bool {
		for _, n := range nodes {
			if countStatus(n.a, serf.StatusAlive) != 3 {
				return false
			}
		}
		return true
	})
	for _, step := range []struct{ op, key string }{{"install", k2}, {"use", k2}, {"remove", k1}} {
		r, err := nodes[1].a.KeyOp(step.op, step.key)
		if err != nil || r.NumErr != 0 || r.NumResp != 3 {
			t.Fatalf("%s: %+v %v", step.op, r, err)
		}
	}
	r, err := nodes[2].a.KeyOp("list", "")
	if err != nil || len(r.Keys) != 1 || r.Keys[k2] != 3 {
		t.Fatalf("list after rotation: %+v %v", r, err)
	}
	for i := range nodes {
		keys, err := readKeyringFile(filepath.Join(dir, fmt.Sprintf("keyring%d.json", i)))
		if err != nil || len(keys) != 1 || keys[0] != k2 {
			t.Errorf("keyring file %d = %v, %v", i, keys, err)
		}
	}
	// A newcomer with only the old key is now refused.
	old := testConfig(t, "stale", "fast", k1, nodes[0].cfg.Bind)
	old.RetryMax = 1
	n := startNode(t, old)
	select {
	case err := <-n.a.Fatal():
		if !strings.Contains(err.Error(), "decrypt") {
			t.Fatalf("stale key join error: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node with the removed key joined")
	}
	// And one with the new key is welcome.
	startNode(t, testConfig(t, "fresh", "fast", k2, nodes[0].cfg.Bind))
	testkit.WaitFor(t, 10*time.Second, "fresh joined", func() bool { return statusOf(nodes[2].a, "fresh") == serf.StatusAlive })
}
