package process

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/ports"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
	"github.com/shoaldb/shoal/pkg/client"
)

// consensusOf reads an agent's consensus state (nil when it has none or
// does not answer).
func consensusOf(p *proc) *client.Consensus {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := client.New(p.http).Info(ctx)
	if err != nil {
		return nil
	}
	return info.Consensus
}

func termOf(c *client.Consensus, cluster string) client.Term {
	if c != nil {
		for _, t := range c.Terms {
			if t.Cluster == cluster {
				return t
			}
		}
	}
	return client.Term{}
}

func voterIDs(c *client.Consensus) []string {
	var ids []string
	if c != nil {
		for _, v := range c.Voters {
			ids = append(ids, v.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestConsensusIdentityWithRealAgents (issue 36, finding 1): three real db
// agents on real MariaDB servers form the writer-term quorum. A process
// that holds only the gossip key joins as "evil1" with a voter tag for a
// port of its own, which it relays byte for byte to db2's raft port, and
// gossips a passing writable server. Before voters proved an identity, the
// leader added evil1 as a voter about a second after it joined. Then the
// writer's agent (db1) is killed, its MariaDB left running, and once the
// gossip lets the name be reclaimed the attacker joins as "db1" with a
// voter tag relayed to db2 and its own MySQL port: before, it was granted
// the next term at its address within milliseconds. Now neither happens.
func TestConsensusIdentityWithRealAgents(t *testing.T) {
	mariadbtest.Require(t)
	gkey, ckey := newKey(t), newKey(t)
	t.Setenv("SHOAL_MYSQL_PASSWORD", "pw-identity")
	names := []string{"db1", "db2", "db3"}
	agents := map[string]*proc{}
	rafts := map[string]string{}
	for i, name := range names {
		srv := mariadbtest.Start(t, mariadbtest.Options{ReadOnly: i > 0})
		srv.CreateUser(mariadbtest.User{Name: "shoal", Password: "pw-identity", Grants: "SLAVE MONITOR"})
		rafts[name] = ports.Free(t)
		args := []string{"--mysql-addr", srv.Addr(), "--mysql-user", "shoal", "--cluster", "main",
			"--consensus-key", ckey, "--consensus-keyring-file", t.TempDir() + "/consensus.keyring",
			"--consensus-bind", rafts[name], "--consensus-bootstrap-expect", "3",
			// The attack waits for the name to be reclaimable; 30 s by default.
			"--dead-node-reclaim-time", "2s"}
		if i > 0 {
			args = append(args, "--join", agents["db1"].bind)
		}
		agents[name] = startAgent(t, name, gkey, args...)
	}
	holds := func(p *proc, n uint64, writer string) bool {
		c := consensusOf(p)
		tm := termOf(c, "main")
		return c != nil && c.Bootstrapped && len(c.Voters) == 3 && tm.Term == n && tm.Writer == writer
	}
	testkit.WaitFor(t, 60*time.Second, "term 1 to db1 on every voter", func() bool {
		for _, p := range agents {
			if !holds(p, 1, "db1") {
				return false
			}
		}
		return true
	})
	describe := func() string {
		var b strings.Builder
		for _, name := range names {
			c := consensusOf(agents[name])
			fmt.Fprintf(&b, "\n  %s: voters %v term %+v", name, voterIDs(c), termOf(c, "main"))
		}
		return b.String()
	}
	leaderLog := func() string {
		c := consensusOf(agents["db1"])
		if c == nil || agents[c.Leader] == nil {
			return ""
		}
		return agents[c.Leader].log.String()
	}

	// evil1: the gossip key, a relay to db2's raft port, a writable server.
	relay := testkit.Relay(t, rafts["db2"])
	_, relayPort, _ := net.SplitHostPort(relay)
	port, _ := strconv.ParseUint(relayPort, 10, 16)
	writable := tags.Encode(tags.Health{State: tags.Passing, Port: 13306})
	evil := testkit.StartSerfKeyed(t, "evil1", map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main",
		tags.KeyHealth: writable, tags.KeyVoter: tags.FormatVoter(tags.VoterTag{Port: uint16(port)})}, agents["db1"].bind, gkey)
	testkit.WaitFor(t, 20*time.Second, "the leader tries to admit evil1", func() bool {
		return strings.Contains(leaderLog(), `node=evil1`)
	})
	time.Sleep(3 * time.Second) // three more reconcile rounds
	for _, name := range names {
		if v := voterIDs(consensusOf(agents[name])); !slices.Equal(v, names) {
			t.Fatalf("%s's voters with evil1 around: %v%s", name, v, describe())
		}
	}
	if !strings.Contains(leaderLog(), "ErrWrongIdentity") && !strings.Contains(leaderLog(), "proved another voter identity") {
		t.Errorf("the leader's log does not say why evil1 was refused:\n%s", leaderLog())
	}
	_ = evil.Shutdown()

	// The writer's agent dies; its MariaDB stays up and writable.
	if err := agents["db1"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "db1 seen failed", func() bool {
		m := members(t, agents["db2"].http)
		return m["db1"].Status == "failed"
	})
	time.Sleep(3 * time.Second) // past dead_node_reclaim_time
	reclaim := testkit.StartSerfKeyed(t, "db1", map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main",
		tags.KeyHealth: writable, tags.KeyVoter: tags.FormatVoter(tags.VoterTag{Port: uint16(port), InConfig: true})}, agents["db2"].bind, gkey)
	defer func() { _ = reclaim.Shutdown() }()
	testkit.WaitFor(t, 20*time.Second, "the attacker holds the name db1", func() bool {
		m := members(t, agents["db2"].http)
		return m["db1"].Status == "alive"
	})
	time.Sleep(5 * time.Second)
	for _, name := range names[1:] {
		c := consensusOf(agents[name])
		if tm := termOf(c, "main"); tm.Term != 1 || strings.HasSuffix(tm.Addr, ":13306") {
			t.Fatalf("%s's term after the name reclaim: %+v%s", name, tm, describe())
		}
		for _, v := range c.Voters {
			if v.ID == "db1" && v.Addr != rafts["db1"] {
				t.Errorf("%s: db1's raft address moved to %s (the relay is %s)", name, v.Addr, relay)
			}
		}
	}
}
