package consensus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// View is what the loop reads of the agent: the gossip's voters and the
// members as the pool sees them.
type View interface {
	// Peers returns the alive members that advertise a raft port, and the
	// names of members gone for good (left, force-left, reaped).
	Peers() (alive []Peer, gone map[string]bool)
	// Members returns every member as the pool sees it.
	Members() []pool.Member
	// Policy is the pool policy the grants judge servers by.
	Policy() pool.Policy
	// Publish broadcasts terms to every agent (signed, as TermEvent):
	// each term this leader grants, and every term once it is elected.
	// It must not block for long.
	Publish(terms []pool.Term)
}

// Loop timings.
const (
	decideEvery    = 250 * time.Millisecond
	reconcileEvery = time.Second
	// firstReconcile is the wait before the first membership round.
	firstReconcile = decideEvery
	grantTimeout   = 2 * time.Second
)

// Run drives the node until ctx ends, in the manner of Consul's
// monitorLeadership and leaderLoop. On every node a membership loop
// bootstraps the first quorum and, on the leader, keeps the voters in
// step with the gossip (every reconcileEvery). Leadership comes from
// raft's leader channel, not from polling: on gaining it a leader loop
// starts, which applies everything committed before (a barrier), then
// publishes the FSM's terms and grants terms (pool.DecideTerms) every
// decideEvery and whenever wake fires (a member changed; wake may be
// nil); on losing it the leader loop's context is cancelled at once, so
// that it grants nothing more, and Run waits for it to end. Panics are
// recovered and logged, and the loops go on. Run is called once per
// Node: it is the only reader of raft's leader channel.
func (n *Node) Run(ctx context.Context, v View, wake <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.membershipLoop(ctx, v)
	}()
	var stopLeading func() // nil while this node does not lead
	defer func() {
		if stopLeading != nil {
			stopLeading()
		}
	}()
	leaderCh := n.raft.LeaderCh() // the latest change only: true, true means lost and regained
	for {
		select {
		case <-ctx.Done():
			return
		case leading := <-leaderCh:
			if stopLeading != nil {
				stopLeading()
				stopLeading = nil
				n.log.Info("consensus: leadership lost: no more grants from this node", "regained", leading)
			}
			if leading {
				stopLeading = n.startLeading(ctx, v, wake)
			}
		}
	}
}

// startLeading runs the leader loop in a goroutine; stop cancels it and
// waits for it to end.
func (n *Node) startLeading(ctx context.Context, v View, wake <-chan struct{}) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.safely("leader loop", func() { n.leaderLoop(ctx, v, wake) })
	}()
	return func() {
		cancel()
		<-done
	}
}

// leaderLoop runs while this node leads, until ctx is cancelled: it
// establishes the leadership, then decides every decideEvery and on wake.
func (n *Node) leaderLoop(ctx context.Context, v View, wake <-chan struct{}) {
	n.log.Info("consensus: leadership gained")
	if !n.establishLeadership(ctx, v) {
		return
	}
	tick := n.clock.NewTicker(decideEvery)
	defer tick.Stop()
	for {
		n.safely("grant", func() { n.decide(ctx, v) })
		n.rounds.decide.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		case <-wake:
		}
	}
}

// establishLeadership makes a new leader apply everything committed
// before it (a barrier, tried again every decideEvery until it passes),
// so that it decides on the terms the quorum holds, and then publish
// them again, for agents that missed a broadcast. It reports false when
// ctx ended first.
func (n *Node) establishLeadership(ctx context.Context, v View) bool {
	for {
		err := n.Barrier(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		n.log.Warn("consensus: barrier after election", "error", err)
		if !n.sleep(ctx, decideEvery) {
			return false
		}
	}
	if terms := n.fsm.Terms(); len(terms) > 0 {
		n.safely("publish", func() {
			v.Publish(slices.SortedFunc(maps.Values(terms), func(a, b pool.Term) int { return strings.Compare(a.Cluster, b.Cluster) }))
		})
	}
	return true
}

// membershipLoop runs a membership round (bootstrap, or the leader's
// reconcile) firstReconcile after it starts, then every reconcileEvery,
// until ctx ends.
func (n *Node) membershipLoop(ctx context.Context, v View) {
	t := n.clock.NewTimer(firstReconcile)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		n.safely("membership", func() { n.membership(ctx, v) })
		n.rounds.membership.Add(1)
		t.Reset(reconcileEvery)
	}
}

// sleep waits d on the node's clock; false when ctx ended first.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	t := n.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

func (n *Node) safely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("consensus: recovered from a panic", "in", what, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

func (n *Node) membership(ctx context.Context, v View) {
	alive, gone := v.Peers()
	n.setGossipPeers(alive)
	if !n.HasState() {
		if _, err := n.MaybeBootstrap(ctx, alive); err != nil {
			n.log.Warn("consensus: not bootstrapping yet", "error", err)
		}
		return
	}
	if err := n.Reconcile(ctx, alive, gone); err != nil {
		n.log.Warn("consensus: voters", "error", err)
	}
}

// decide grants what pool.DecideTerms says, once this leader's view
// knows every voter: a leader that has not yet heard of a voter (a
// partial member list, just after a start) could take a second writable
// server for the only one.
func (n *Node) decide(ctx context.Context, v View) {
	if n.fsm.Group() == "" {
		n.setGroup(ctx)
		return
	}
	members := v.Members()
	voters := map[string]bool{}
	known := map[string]bool{}
	for _, m := range members {
		known[m.Name] = true
	}
	for id := range n.Voters() {
		if !known[id] {
			n.log.Debug("consensus: not deciding terms: a voter is not in the member list yet", "voter", id)
			return
		}
		voters[id] = true
	}
	var granted []pool.Term
	defer func() {
		if len(granted) > 0 {
			v.Publish(granted)
		}
	}()
	terms := n.fsm.Terms()
	barred := map[string]string{}
	for c, fo := range n.fsm.Failovers() {
		if terms[c].Number == fo.Term {
			barred[c] = fo.Old
		}
	}
	for _, g := range pool.DecideTerms(members, v.Policy(), terms, voters, barred, n.clock.Now()) {
		if ctx.Err() != nil {
			return
		}
		if in, ok := n.fsm.Switch(g.Term.Cluster); ok {
			// The switchover (or the leader's resume) moves this term.
			n.log.Debug("consensus: no term decided during a switchover", "cluster", g.Term.Cluster, "switchover", in.ID, "target", in.Target)
			continue
		}
		if err := n.ProveWriter(ctx, g.Term); err != nil {
			n.log.Warn("consensus: writer term not granted: the writer did not prove it is the voter", "cluster", g.Term.Cluster,
				"writer", g.Term.Writer, "addr", g.Term.Addr, "error", err)
			continue
		}
		t, err := n.Grant(ctx, g)
		switch {
		case errors.Is(err, ErrStale):
			n.log.Debug("consensus: grant overtaken", "cluster", g.Term.Cluster, "error", err)
		case err != nil:
			n.log.Warn("consensus: grant failed", "cluster", g.Term.Cluster, "writer", g.Term.Writer, "term", g.Term.Number, "error", err)
		default:
			granted = append(granted, t)
			n.log.Info("consensus: writer term granted", "cluster", t.Cluster, "term", t.Number, "writer", t.Writer, "addr", t.Addr, "why", t.Why)
		}
	}
}

// writerProveTimeout bounds the handshake by which a writer proves it is
// the voter, before a grant; writerRetry is how long a writer that failed
// waits before it is tried again (a dead agent's address is not dialled
// four times a second).
const (
	writerProveTimeout = time.Second
	writerRetry        = 2 * time.Second
)

// ProveWriter checks, before a term is granted, that the writer's own
// voter answers now: the leader itself, or a voter of the configuration
// that proves its identity at its configured raft address (a handshake),
// on the host of the term's address. The gossip says who is writable, but
// any holder of the gossip key can take a dead agent's name: only the
// voter's own handshake shows that the agent of that name is alive, and
// that the address routers will be given is its. The loop and a
// switchover's grant step call it. The handshake takes at most
// writerProveTimeout, less if ctx ends first; a writer that failed it is
// not tried again for writerRetry (on the node's clock), unless it failed
// because ctx ended.
func (n *Node) ProveWriter(ctx context.Context, t pool.Term) error {
	host, _, err := net.SplitHostPort(t.Addr)
	if err != nil {
		return fmt.Errorf("term address %q: %w", t.Addr, err)
	}
	if t.Writer == n.cfg.ID {
		if !n.Identity().HasHost(host) {
			return fmt.Errorf("its address %s is not on this voter's host (%s)", t.Addr, n.Identity())
		}
		return nil
	}
	addr, ok := n.Voters()[t.Writer]
	if !ok {
		return fmt.Errorf("%q is no voter", t.Writer)
	}
	n.proveMu.Lock()
	defer n.proveMu.Unlock()
	now := n.clock.Now()
	for w, until := range n.unprovenWriters {
		if now.After(until) {
			delete(n.unprovenWriters, w) // bounded: only writers that failed lately stay
		}
	}
	if until, ok := n.unprovenWriters[t.Writer]; ok && now.Before(until) {
		return fmt.Errorf("it failed to prove itself lately (next try in %s)", until.Sub(now).Round(time.Millisecond))
	}
	pctx, cancel := context.WithTimeout(ctx, writerProveTimeout)
	defer cancel()
	id, err := Probe(pctx, addr, n.creds, t.Writer)
	if err == nil && !id.HasHost(host) {
		err = fmt.Errorf("its address %s is not on the voter's host (%s)", t.Addr, id)
	}
	if err != nil {
		if ctx.Err() == nil { // the writer's failure, not the caller's end
			n.unprovenWriters[t.Writer] = n.clock.Now().Add(writerRetry)
		}
		return err
	}
	delete(n.unprovenWriters, t.Writer)
	return nil
}

// setGroup gives the raft group its ID, once, before the first grant: a
// random GroupLen hex digits. Every term names it, so that agents follow
// only the terms of their own fleet's group (a copied consensus key makes
// another fleet's signatures valid here too).
func (n *Node) setGroup(ctx context.Context) {
	var raw [tags.GroupLen / 2]byte
	if _, err := rand.Read(raw[:]); err != nil {
		n.log.Error("consensus: raft group ID", "error", err)
		return
	}
	b, err := EncodeGroup(hex.EncodeToString(raw[:]))
	if err != nil {
		n.log.Error("consensus: raft group ID", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, grantTimeout)
	defer cancel()
	r, err := n.apply(ctx, b)
	if err != nil {
		n.log.Warn("consensus: raft group ID not applied", "error", err)
		return
	}
	n.log.Info("consensus: raft group ID set", "group", r)
}
