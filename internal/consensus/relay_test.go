package consensus

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// startRelay relays a fresh 127.0.0.1 port to target (testkit.Relay).
func startRelay(t *testing.T, target string) string { return testkit.Relay(t, target) }

// startQuorum starts three voters db1..db3 that bootstrap from view and
// waits until every one holds term 1 of cluster "default" to writer.
func startQuorum(t *testing.T, writer string) ([]*testNode, *fakeView, map[string]string) {
	t.Helper()
	key := newKey(t)
	ids := []string{"db1", "db2", "db3"}
	addrs := map[string]string{}
	view := &fakeView{gone: map[string]bool{}}
	for _, id := range ids {
		addrs[id] = freeAddr(t)
		view.peers = append(view.peers, Peer{ID: id, Addr: addrs[id]})
		view.members = append(view.members, dbMember(id, id == writer))
	}
	var nodes []*testNode
	for _, id := range ids {
		nodes = append(nodes, startNode(t, nodeConfig(t, id, addrs[id], key), view))
	}
	waitUntil(t, "term 1 to "+writer+" on every voter", 20*time.Second, func() bool {
		for _, n := range nodes {
			if tm := n.FSM().Term("default"); tm.Number != 1 || tm.Writer != writer || len(n.Voters()) != 3 {
				return false
			}
		}
		return leaderOf(nodes) != nil
	})
	return nodes, view, addrs
}

// TestRelayedVoterNeverAdmitted (issue 36, finding 1): a process that holds
// only the gossip key advertises a voter tag for its own port and relays
// that port byte for byte to a real voter's raft port, or to the leader's
// own. Every handshake through the relay completes with the real voter's
// certificate; before voters proved an identity the leader added the
// relay as voter "evil1" about 1 s after it appeared, granted it the term
// when it gossiped a writable server, and a relay to the leader's own port
// made leaders step down again and again. Now the certificate names the
// real voter and its address, the leader refuses, nothing changes.
func TestRelayedVoterNeverAdmitted(t *testing.T) {
	nodes, view, addrs := startQuorum(t, "db1")
	leader := leaderOf(nodes)
	var other string
	for id := range addrs {
		if id != leader.ID() {
			other = id
		}
	}
	toOther, toLeader := startRelay(t, addrs[other]), startRelay(t, addrs[leader.ID()])
	raftTerm := leader.Status().RaftTerm
	view.set(func(v *fakeView) {
		v.peers = append(v.peers, Peer{ID: "evil1", Addr: toOther}, Peer{ID: "evil2", Addr: toLeader})
		// evil1 gossips a writable server, and db1 becomes read-only:
		// evil1 would be the only writable voter, if it were one.
		v.members = []pool.Member{dbMember("db1", false), dbMember("db2", false), dbMember("db3", false), dbMember("evil1", true), dbMember("evil2", false)}
	})
	// Not "nothing for 4 s": the leader judged both relays (it logs each
	// refusal after the handshake, where it would have added the voter),
	// and decide rounds ran with evil1 the only writable server.
	for _, id := range []string{"evil1", "evil2"} {
		waitUntil(t, "the leader refused "+id, 10*time.Second, func() bool {
			return leader.logs.count("consensus: not admitting a voter: it did not prove its identity", "node", id) > 0
		})
	}
	waitDecideRounds(t, leader, 2)
	l := leaderOf(nodes)
	if l == nil {
		t.Fatal("no leader with relays around")
	}
	if v := l.Voters(); len(v) != 3 || v["evil1"] != "" || v["evil2"] != "" {
		t.Fatalf("voters with relays around: %v", v)
	}
	if tm := l.FSM().Term("default"); tm.Number != 1 || tm.Writer != "db1" {
		t.Fatalf("term with relays around: %+v", tm)
	}
	if l != leader || l.Status().RaftTerm != raftTerm {
		t.Errorf("the leader changed with a relay to its own port: %s in raft term %d, was %s in %d", l.ID(), l.Status().RaftTerm, leader.ID(), raftTerm)
	}
}

// TestNameReclaimGetsNoTerm (issue 36, finding 1): the agent of the writer
// db2 dies (its MySQL still up); a gossip-key holder joins under its name
// with its own MySQL address, advertising a voter port that relays to
// another voter. Before voters proved an identity the leader moved db2's
// raft address to the relay and granted db2 a new term at the attacker's
// address within milliseconds. Now neither: the relay proves another voter,
// and the real db2 does not answer, so no writer proves itself.
func TestNameReclaimGetsNoTerm(t *testing.T) {
	nodes, view, addrs := startQuorum(t, "db1")
	leader := leaderOf(nodes)
	var victim *testNode
	for _, n := range nodes {
		if n != leader {
			victim = n
		}
	}
	// The victim becomes the writer (term 2), then its agent dies.
	view.set(func(v *fakeView) {
		v.members = nil
		for _, id := range []string{"db1", "db2", "db3"} {
			v.members = append(v.members, dbMember(id, id == victim.ID()))
		}
	})
	waitUntil(t, "term 2 to "+victim.ID(), 10*time.Second, func() bool {
		tm := leader.FSM().Term("default")
		return tm.Number == 2 && tm.Writer == victim.ID()
	})
	victim.stop()
	var rest string
	for id := range addrs {
		if id != victim.ID() && id != leader.ID() {
			rest = id
		}
	}
	relay := startRelay(t, addrs[rest])
	view.set(func(v *fakeView) {
		for i, p := range v.peers {
			if p.ID == victim.ID() {
				v.peers[i].Addr = relay
			}
		}
		for i, m := range v.members {
			if m.Name == victim.ID() {
				v.members[i].Addr = "127.0.0.1:13306" // the attacker's MySQL
			}
		}
	})
	// Not "nothing for 4 s": the leader judged the relay under the
	// victim's name (and refused it), and it decided a new term for the
	// victim at the attacker's address, whose proof failed.
	waitUntil(t, "the leader refused the relay as "+victim.ID(), 10*time.Second, func() bool {
		return leader.logs.count("consensus: not admitting a voter: it did not prove its identity", "node", victim.ID(), "addr", relay) > 0
	})
	waitUntil(t, "the leader tried the grant to "+victim.ID()+" at the attacker's address", 10*time.Second, func() bool {
		return leader.logs.count("consensus: writer term not granted: the writer did not prove it is the voter", "writer", victim.ID(), "addr", "127.0.0.1:13306") > 0
	})
	if a := leader.Voters()[victim.ID()]; a != addrs[victim.ID()] {
		t.Errorf("%s's raft address moved to %s (the relay is %s)", victim.ID(), a, relay)
	}
	if tm := leader.FSM().Term("default"); tm.Number != 2 || tm.Addr != "127.0.0.1:3306" {
		t.Fatalf("term after a name reclaim: %+v", tm)
	}
	view.set(func(v *fakeView) {
		if slices.ContainsFunc(v.published, func(tm pool.Term) bool { return tm.Addr == "127.0.0.1:13306" }) {
			t.Error("a term with the attacker's address was published")
		}
	})
}

// TestStreamIdentity: a dialer accepts only the voter it expects at the
// address it dials; a relay, a voter at another address and an address
// outside the configuration are refused; a certificate of the right key
// that names no voter (a shoal from before identities) is refused by both
// sides.
func TestStreamIdentity(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	server := listenLayerAs(t, kr, "db1", StreamOptions{})
	acc := acceptAll(t, server)
	client := listenLayerAs(t, kr, "db2", StreamOptions{})
	exchange(t, client, server, acc)

	relay := startRelay(t, server.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	creds := testCreds(t, kr, "db3", "127.0.0.1:1")
	for _, tc := range []struct{ node, addr string }{
		{"evil1", relay},                 // a relay under its own name
		{"db1", relay},                   // a relay under the real voter's name
		{"db2", server.Addr().String()},  // the right address, another name
		{"db1 ", server.Addr().String()}, // a look-alike name
	} {
		id, err := Probe(ctx, tc.addr, creds, tc.node)
		if !errors.Is(err, ErrWrongIdentity) {
			t.Errorf("probe of %q at %s: %v, want ErrWrongIdentity", tc.node, tc.addr, err)
		}
		if !id.Has("db1", server.Addr().String()) {
			t.Errorf("probe of %q at %s: proven %v, want db1's identity", tc.node, tc.addr, id)
		}
	}
	// raft's own dial through the relay, as if the configuration had evil1 there.
	testVoters.Store(relay, "evil1")
	if _, err := client.Dial(raft.ServerAddress(relay), 2*time.Second); !errors.Is(err, ErrWrongIdentity) {
		t.Errorf("raft dial through a relay: %v, want ErrWrongIdentity", err)
	}
	if _, err := client.Dial("127.0.0.1:1", 2*time.Second); !errors.Is(err, ErrNotAVoter) {
		t.Errorf("raft dial of an address outside the configuration: %v, want ErrNotAVoter", err)
	}

	// A client with the keyring's own self-signed certificate (what a
	// shoal before identities presents): the server refuses it.
	before := server.Refused()[RefusedNoIdentity]
	c, err := tls.Dial("tcp", server.Addr().String(), &tls.Config{
		InsecureSkipVerify: true,
		Certificates:       []tls.Certificate{*kr.keys[0].cert},
		MinVersion:         tls.VersionTLS13,
	})
	if err == nil {
		_, _ = c.Write([]byte{0})
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	waitRefused(t, server, RefusedNoIdentity, before+1)
	noConn(t, acc)
}

// TestIssueRefusesBadIdentities: credentials are issued only for an
// identity that a peer can read back.
func TestIssueRefusesBadIdentities(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	for _, id := range []Identity{
		{Node: "", Addrs: []string{"127.0.0.1:7950"}},
		{Node: string(make([]byte, maxIdentityNode+1)), Addrs: []string{"127.0.0.1:7950"}},
		{Node: "db1"},
		{Node: "db1", Addrs: []string{"no port"}},
		{Node: "\xff", Addrs: []string{"127.0.0.1:7950"}},
	} {
		if _, err := kr.Issue(id); err == nil {
			t.Errorf("Issue(%q) succeeded", id.Node)
		}
	}
	c, err := kr.Issue(Identity{Node: "db1/x?y=z é", Addrs: []string{"[::1]:7950", "10.0.0.1:7950"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := identityOf(c.certs[0].Leaf)
	if err != nil || !got.Has("db1/x?y=z é", "[::1]:7950") || !got.HasHost("10.0.0.1") {
		t.Fatalf("identity read back: %v, %v", got, err)
	}
}

// TestBootstrapRefusesMismatchedExpect (issue 36, finding 3): a voter that
// sees another voter announce a different bootstrap_expect does not
// bootstrap: voters given different numbers would each form a raft group
// of their own.
func TestBootstrapRefusesMismatchedExpect(t *testing.T) {
	key := newKey(t)
	addrs := map[string]string{"a": freeAddr(t), "b": freeAddr(t), "c": freeAddr(t)}
	cfg := nodeConfig(t, "a", addrs["a"], key)
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	peers := []Peer{{ID: "b", Addr: addrs["b"], Expect: 3}, {ID: "c", Addr: addrs["c"], Expect: 1}}
	for range 3 { // the same set seen twice is what bootstraps
		ok, err := n.MaybeBootstrap(context.Background(), peers)
		if ok || !errors.Is(err, ErrExpectMismatch) {
			t.Fatalf("MaybeBootstrap with a voter of bootstrap_expect 1: %v, %v; want no bootstrap, ErrExpectMismatch", ok, err)
		}
	}
	if n.HasState() {
		t.Fatal("bootstrapped")
	}
}
