package consensus

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// fakeView is a gossip view the test controls: voters and db members.
type fakeView struct {
	mu      sync.Mutex
	peers   []Peer
	gone    map[string]bool
	members []pool.Member
	// published: the terms passed to Publish, in order.
	published []pool.Term
}

func (v *fakeView) Publish(terms []pool.Term) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.published = append(v.published, terms...)
}

// timesPublished counts the broadcasts of term n of cluster.
func (v *fakeView) timesPublished(cluster string, n uint64) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := 0
	for _, t := range v.published {
		if t.Cluster == cluster && t.Number == n {
			c++
		}
	}
	return c
}

// publishedTerm reports whether term n of cluster to writer was published.
func (v *fakeView) publishedTerm(cluster string, n uint64, writer string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, t := range v.published {
		if t.Cluster == cluster && t.Number == n && t.Writer == writer {
			return true
		}
	}
	return false
}

func (v *fakeView) Peers() ([]Peer, map[string]bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Peer(nil), v.peers...), v.gone
}

func (v *fakeView) Members() []pool.Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]pool.Member(nil), v.members...)
}

func (v *fakeView) Policy() pool.Policy { return pool.Policy{} }

func (v *fakeView) set(f func(v *fakeView)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dbMember is a db member of cluster "default" as the pool sees it.
func dbMember(name string, writable bool) pool.Member {
	h := tags.Health{State: tags.Passing, ReadOnly: !writable, Replica: !writable, IORunning: !writable, SQLRunning: !writable, LagKnown: true}
	t := map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyHealth: tags.Encode(h)}
	hh, _ := tags.Published(t)
	// Every test voter is on 127.0.0.1: its MySQL address is there too.
	return pool.Member{Name: name, Addr: "127.0.0.1:3306", Status: pool.StatusAlive, Tags: t, Health: hh}
}

type testNode struct {
	*Node
	cancel context.CancelFunc
	done   chan struct{}
	cfg    Config
	logs   *logRecorder // its consensus log lines
}

func startNode(t *testing.T, cfg Config, v View) *testNode {
	t.Helper()
	n, err := Open(cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.ID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tn := &testNode{Node: n, cancel: cancel, done: make(chan struct{}), cfg: cfg, logs: recorderOf(t, cfg.Log)}
	go func() { defer close(tn.done); n.Run(ctx, v, nil) }()
	t.Cleanup(tn.stop)
	return tn
}

func (tn *testNode) stop() {
	tn.cancel()
	<-tn.done
	_ = tn.Close()
}

func nodeConfig(t *testing.T, id, addr string, keys ...string) Config {
	kr, err := ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return Config{ID: id, Bind: addr, Advertise: addr, DataDir: t.TempDir(), Keyring: kr, BootstrapExpect: 3, Log: testLog(t, id),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond}
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leaderOf(nodes []*testNode) *testNode {
	for _, n := range nodes {
		if n.IsLeader() {
			return n
		}
	}
	return nil
}

// TestQuorumBootstrapsAndGrants: three voters that see each other form a
// quorum without a manual step, grant the first term to the only writable
// server, move it on an outside promotion, and keep it across a new
// leader; a fourth agent with another key is never admitted.
func TestQuorumBootstrapsAndGrants(t *testing.T) {
	ids := []string{"db1", "db2", "db3"}
	nodes, view, _ := startQuorum(t, "db1")
	waitUntil(t, "term 1 published by the leader", 5*time.Second, func() bool { return view.publishedTerm("default", 1, "db1") })

	// A stranger with another key advertises itself as a voter.
	strangerAddr := freeAddr(t)
	stranger := startNode(t, nodeConfig(t, "evil", strangerAddr, newKey(t)), &fakeView{gone: map[string]bool{}})
	leader := leaderOf(nodes)
	view.set(func(v *fakeView) {
		v.peers = append(v.peers, Peer{ID: "evil", Addr: strangerAddr})
		v.members = append(v.members, dbMember("evil", true))
	})
	// Not "nothing for 3 s": the leader's reconcile judged the stranger (it
	// logs the refusal after the handshake, where it would have added it),
	// and decide rounds ran with the stranger writable in the member list.
	// The same paths act below: a voter gone for good is removed, a new
	// only writable voter is granted the term.
	waitUntil(t, "the leader refused the stranger", 10*time.Second, func() bool {
		return leader.logs.count("consensus: not admitting a voter: it did not prove its identity", "node", "evil") > 0
	})
	waitDecideRounds(t, leader, 2)
	if l := leaderOf(nodes); l == nil || len(l.Voters()) != 3 {
		t.Fatalf("voters after a stranger advertised itself: %v", l.Voters())
	}
	if got := leaderOf(nodes).FSM().Term("default"); got.Writer != "db1" || got.Number != 1 {
		t.Fatalf("a writable stranger changed the term: %+v", got)
	}
	if r := leaderOf(nodes).Status().Refused; sum(r) == 0 {
		// The leader's probes to the stranger fail at the stranger; the
		// stranger's own stream layer counts them.
		if sum(stranger.Status().Refused) == 0 {
			t.Errorf("no refused raft connection counted on either side")
		}
	}
	view.set(func(v *fakeView) { v.peers, v.members = v.peers[:3], v.members[:3] })

	// Outside promotion: db1 goes read-only, db2 writable.
	view.set(func(v *fakeView) {
		v.members = []pool.Member{dbMember("db1", false), dbMember("db2", true), dbMember("db3", false)}
	})
	waitUntil(t, "term 2 to db2", 5*time.Second, func() bool {
		tm := leaderOf(nodes).FSM().Term("default")
		return tm.Number == 2 && tm.Writer == "db2"
	})

	// The leader stops: another takes over with the same terms.
	old := leaderOf(nodes)
	old.stop()
	var rest []*testNode
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	waitUntil(t, "a new leader", 10*time.Second, func() bool { return leaderOf(rest) != nil })
	// It applies what the old leader committed (the barrier) before it
	// decides: term 2 is never lost.
	waitUntil(t, "the new leader holds term 2", 5*time.Second, func() bool {
		l := leaderOf(rest)
		return l != nil && l.FSM().Term("default").Number == 2
	})
	// and publishes it again, for agents that missed the first broadcast.
	waitUntil(t, "term 2 published again by the new leader", 5*time.Second, func() bool { return view.timesPublished("default", 2) >= 2 })
	// It grants on, with the stopped voter failed in the member list and
	// one of the two left made the only writable server. Before the
	// stopped voter shows in the list at all, it grants nothing.
	stopped := old.ID()
	target := rest[0].ID()
	if target == "db2" {
		target = rest[1].ID()
	}
	members := func(withStopped bool) []pool.Member {
		var ms []pool.Member
		for _, id := range ids {
			switch {
			case id == stopped && withStopped:
				ms = append(ms, withStatus(dbMember(id, false), pool.StatusFailed))
			case id != stopped:
				ms = append(ms, dbMember(id, id == target))
			}
		}
		return ms
	}
	newLeader := leaderOf(rest)
	waiting := newLeader.logs.count("consensus: not deciding terms: a voter is not in the member list yet", "voter", stopped)
	view.set(func(v *fakeView) { v.members = members(false) })
	// Not "nothing for 1 s": the leader's decide rounds ran on this member
	// list and held back for the missing voter; right below, the same
	// rounds grant once it shows.
	waitUntil(t, "the leader holds back for "+stopped, 5*time.Second, func() bool {
		return newLeader.logs.count("consensus: not deciding terms: a voter is not in the member list yet", "voter", stopped) > waiting
	})
	waitDecideRounds(t, newLeader, 2)
	if tm := leaderOf(rest).FSM().Term("default"); tm.Number != 2 {
		t.Fatalf("granted while a voter (%s) is missing from the member list: %+v", stopped, tm)
	}
	view.set(func(v *fakeView) { v.members = members(true) })
	waitUntil(t, "term 3 to "+target, 5*time.Second, func() bool {
		tm := leaderOf(rest).FSM().Term("default")
		return tm.Number == 3 && tm.Writer == target
	})
	if got := len(leaderOf(rest).Voters()); got != 3 {
		t.Fatalf("voters = %d, want 3 (a failed voter stays)", got)
	}

	// The stopped voter comes back from its data directory: it catches up.
	back := startNode(t, old.cfg, view)
	waitUntil(t, stopped+" catches up to term 3", 10*time.Second, func() bool { return back.FSM().Term("default").Number == 3 })

	// It leaves for good: it is removed.
	back.stop()
	view.set(func(v *fakeView) {
		v.gone = map[string]bool{stopped: true}
		v.peers = slices.DeleteFunc(v.peers, func(p Peer) bool { return p.ID == stopped })
	})
	waitUntil(t, stopped+" removed after it left", 10*time.Second, func() bool {
		l := leaderOf(rest)
		return l != nil && len(l.Voters()) == 2
	})
}

func withStatus(m pool.Member, s pool.Status) pool.Member { m.Status = s; return m }

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestBootstrapWaitsForExpect: two voters of an expected three never form
// a quorum on their own.
func TestBootstrapWaitsForExpect(t *testing.T) {
	key := newKey(t)
	view := &fakeView{gone: map[string]bool{}}
	var nodes []*testNode
	addrs := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	for id, addr := range addrs {
		view.peers = append(view.peers, Peer{ID: id, Addr: addr})
	}
	for id, addr := range addrs {
		nodes = append(nodes, startNode(t, nodeConfig(t, id, addr, key), view))
	}
	// Not "nothing for 3 s": each voter ran three membership rounds on the
	// same two voters (a set seen twice is what bootstraps)...
	for _, n := range nodes {
		waitUntil(t, n.ID()+" ran 3 membership rounds", 10*time.Second, func() bool { return n.rounds.membership.Load() >= 3 })
	}
	for _, n := range nodes {
		if n.HasState() {
			t.Fatalf("%s bootstrapped with 2 of 3 expected voters", n.ID())
		}
	}
	// ... and the same rounds bootstrap once the third voter shows.
	c := freeAddr(t)
	view.set(func(v *fakeView) { v.peers = append(v.peers, Peer{ID: "c", Addr: c}) })
	nodes = append(nodes, startNode(t, nodeConfig(t, "c", c, key), view))
	waitUntil(t, "a quorum of the three", 20*time.Second, func() bool {
		for _, n := range nodes {
			if !n.HasState() {
				return false
			}
		}
		return true
	})
}

// waitDecideRounds waits until n's leader loop has completed k more
// decide rounds: k >= 2 makes sure a whole round ran on what the test
// set before the call.
func waitDecideRounds(t *testing.T, n *testNode, k uint64) {
	t.Helper()
	want := n.rounds.decide.Load() + k
	waitUntil(t, fmt.Sprintf("%d decide rounds on %s", k, n.ID()), 10*time.Second, func() bool { return n.rounds.decide.Load() >= want })
}

// TestNodeTrustsVoters: the stream layer's reserved slots go to the IPs of
// the raft configuration's servers and of the voters the gossip shows,
// and to no other.
func TestNodeTrustsVoters(t *testing.T) {
	addr := freeAddr(t)
	n, err := Open(nodeConfig(t, "db1", addr, newKey(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ip := netip.MustParseAddr
	if n.stream.isTrusted(ip("127.0.0.7")) {
		t.Fatal("an IP is trusted before any configuration or gossip")
	}
	// Before any configuration: the voters the gossip shows.
	n.setGossipPeers([]Peer{{ID: "db4", Addr: "127.0.0.8:7950"}, {ID: "db5", Addr: "db5.example:7950"}})
	if !n.stream.isTrusted(ip("127.0.0.8")) {
		t.Error("before the bootstrap, a voter of the gossip is not trusted")
	}
	cfg := raft.Configuration{Servers: []raft.Server{
		{ID: "db1", Address: raft.ServerAddress(addr), Suffrage: raft.Voter},
		{ID: "db2", Address: "127.0.0.7:7950", Suffrage: raft.Voter},
		{ID: "db3", Address: "db3.example:7950", Suffrage: raft.Voter}, // no IP: never matches
	}}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the configuration", 5*time.Second, n.HasState)
	// Once configured, only its servers: any gossip-key holder can
	// advertise a voter tag.
	for _, c := range []struct {
		ip   string
		want bool
	}{{"127.0.0.7", true}, {"127.0.0.8", false}, {"127.0.0.1", true}, {"127.0.0.9", false}} {
		if got := n.stream.isTrusted(ip(c.ip)); got != c.want {
			t.Errorf("trusted(%s) = %v, want %v", c.ip, got, c.want)
		}
	}
	// The gossip's voters are those of the last round only.
	n.setGossipPeers(nil)
	if n.stream.isTrusted(ip("127.0.0.8")) {
		t.Error("a voter gone from the gossip is still trusted")
	}
	if !n.stream.isTrusted(ip("127.0.0.7")) {
		t.Error("a server of the configuration is no longer trusted")
	}
}
