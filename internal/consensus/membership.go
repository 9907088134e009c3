package consensus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Peer is a voter as the gossip shows it: an alive member whose tags
// advertise a raft port (the agent builds the list).
type Peer struct {
	ID   string // its node name
	Addr string // its raft address, host:port
	// HasState: its tags say it is in a raft configuration already, of
	// the raft group Group ("" when not said).
	HasState bool
	Group    string
	// Expect is the bootstrap_expect its tags say it was given, before it
	// is in a configuration (0: not said).
	Expect int
}

// probeTimeout bounds one admission handshake.
const probeTimeout = 3 * time.Second

// MaybeBootstrap forms the first quorum without a manual step, in the
// manner of Consul's bootstrap_expect. While this node has no raft state,
// each call looks at the alive voters (self included or not): once at
// least BootstrapExpect are seen, none of them is in a configuration
// already, every one of them proves it holds a consensus key (a TLS
// handshake), and the set is the same as at the previous call (so that
// voters that see the set grow do not bootstrap different ones), it
// bootstraps with all of them. It reports whether it did.
func (n *Node) MaybeBootstrap(ctx context.Context, alive []Peer) (bool, error) {
	if n.HasState() {
		return false, nil
	}
	set := map[string]string{n.cfg.ID: n.cfg.Advertise}
	for _, p := range alive {
		if p.HasState && p.ID != n.cfg.ID {
			n.bootSet = ""
			return false, nil // a quorum exists: its leader adds this node
		}
		if p.Expect != 0 && p.Expect != n.cfg.BootstrapExpect {
			// Voters given different numbers would each bootstrap a raft
			// group of their own: two groups, two writers for one cluster.
			n.bootSet = ""
			return false, fmt.Errorf("%w: voter %s was given bootstrap_expect %d, this one %d: give every voter the same",
				ErrExpectMismatch, p.ID, p.Expect, n.cfg.BootstrapExpect)
		}
		set[p.ID] = p.Addr
	}
	if len(set) < n.cfg.BootstrapExpect {
		n.bootSet = ""
		return false, nil
	}
	ids := slices.Sorted(maps.Keys(set))
	var key strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&key, "%s=%s\n", id, set[id])
	}
	if key.String() != n.bootSet {
		n.bootSet = key.String()
		return false, nil
	}
	var servers []raft.Server
	for _, id := range ids {
		if id != n.cfg.ID {
			if _, err := n.probe(ctx, id, set[id]); err != nil {
				n.bootSet = ""
				return false, fmt.Errorf("bootstrap: voter %s at %s: %w", id, set[id], err)
			}
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(set[id]), Suffrage: raft.Voter})
	}
	if err := await(ctx, n.raft.BootstrapCluster(raft.Configuration{Servers: servers})); err != nil {
		return false, fmt.Errorf("bootstrap with %d voters: %w", len(servers), err)
	}
	n.log.Info("consensus bootstrapped", "voters", ids)
	return true, nil
}

// ErrExpectMismatch: a voter seen before the bootstrap was given another
// bootstrap_expect; MaybeBootstrap waits until every voter agrees.
var ErrExpectMismatch = errors.New("voters disagree on bootstrap_expect")

// probe checks that the voter id answers at addr: it holds a consensus
// key and proves id's identity at addr.
func (n *Node) probe(ctx context.Context, id, addr string) (Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return Probe(ctx, addr, n.creds, id)
}

// maxChanges bounds the configuration changes one Reconcile makes, and
// maxProbes the admission handshakes it tries; a peer that failed one is
// not tried again for probeBackoff (a stranger advertising the voter tag
// must neither spam the log nor crowd out real voters).
const (
	maxChanges   = 4
	maxProbes    = 8
	probeBackoff = 30 * time.Second
)

// Reconcile, on the leader, brings the configuration to the gossip's
// view: an alive voter that is not in it, or has a new address, is added
// once it proves it holds a consensus key; a voter whose member left for
// good (gone: left, or force-left) is removed, in the manner of Consul's
// autopilot dead-server cleanup. A failed member stays: it may come back,
// and removing it would shrink the quorum it is counted in.
func (n *Node) Reconcile(ctx context.Context, alive []Peer, gone map[string]bool) error {
	if !n.IsLeader() {
		return nil
	}
	cur := n.Voters()
	changes, probes := 0, 0
	now := n.clock.Now()
	for _, p := range alive {
		if changes >= maxChanges || probes >= maxProbes {
			break
		}
		if addr, ok := cur[p.ID]; ok && addr == p.Addr {
			continue
		}
		if p.HasState && p.Group != "" && p.Group != n.fsm.Group() {
			// A voter of another raft group (bootstrapped apart): adding it
			// would mix two logs in its FSM. An operator wipes its raft data.
			if until, ok := n.refusedPeers[p.ID]; !ok || now.After(until) {
				n.refusedPeers[p.ID] = now.Add(probeBackoff)
				n.log.Error("consensus: not admitting a voter of another raft group: stop it, delete its consensus.data_dir and start it again to join this group",
					"node", p.ID, "addr", p.Addr, "its_group", p.Group, "group", n.fsm.Group())
			}
			continue
		}
		if until, ok := n.refusedPeers[p.ID]; ok && now.Before(until) {
			continue
		}
		probes++
		if _, err := n.probe(ctx, p.ID, p.Addr); err != nil {
			n.refusedPeers[p.ID] = now.Add(probeBackoff)
			n.log.Warn("consensus: not admitting a voter: it did not prove its identity with a consensus key (next try in 30s)", "node", p.ID, "addr", p.Addr, "error", err)
			continue
		}
		delete(n.refusedPeers, p.ID)
		changes++
		if err := n.addVoter(ctx, p); err != nil {
			return err
		}
		n.log.Info("consensus: voter added", "node", p.ID, "addr", p.Addr)
	}
	for id, until := range n.refusedPeers {
		if now.After(until.Add(probeBackoff)) {
			delete(n.refusedPeers, id) // bounded: only peers refused lately stay
		}
	}
	for _, id := range slices.Sorted(maps.Keys(cur)) {
		if !gone[id] || id == n.cfg.ID || changes >= maxChanges {
			continue
		}
		changes++
		if err := n.removeVoter(ctx, id); err != nil {
			return err
		}
		n.log.Info("consensus: voter removed: its member left", "node", id)
	}
	return nil
}

// addVoter adds p to the configuration, waiting until raft has or ctx
// ends (raft is given ctx's deadline, 5 s without one).
func (n *Node) addVoter(ctx context.Context, p Peer) error {
	d, err := raftTimeout(ctx)
	if err == nil {
		err = await(ctx, n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.Addr), 0, d))
	}
	if err != nil {
		return fmt.Errorf("add voter %s at %s: %w", p.ID, p.Addr, err)
	}
	return nil
}

// removeVoter removes the voter id from the configuration, waiting until
// raft has or ctx ends.
func (n *Node) removeVoter(ctx context.Context, id string) error {
	d, err := raftTimeout(ctx)
	if err == nil {
		err = await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, d))
	}
	if err != nil {
		return fmt.Errorf("remove voter %s: %w", id, err)
	}
	return nil
}
