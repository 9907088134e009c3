package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/fencing"
	"github.com/shoaldb/shoal/internal/history"
	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/switchover"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/term"
	"github.com/shoaldb/shoal/internal/view"
)

// consensusParts is this agent's raft voter, when it is one (a db agent
// with a consensus key, or a witness), and the writer terms it knows.
type consensusParts struct {
	node     *consensus.Node        // nil when this agent is no voter
	wake     chan struct{}          // a member changed: decide now
	port     uint16                 // the raft port the voter tag advertises
	inConfig atomic.Bool            // last published: in a raft configuration
	group    atomic.Pointer[string] // last published: the raft group's ID
	// refusedLogged is when a refused connection was last logged (unix ns).
	refusedLogged atomic.Int64
	// terms are the writer terms this agent knows (package term): every
	// agent has them, voter or not.
	terms *term.Book
	// fence is the fencing of this db agent's own server (package
	// fencing); nil when fencing is off or this is no db agent.
	fence *fencing.Fencer
	// act acts on this db agent's own server: the fencing's and the
	// switchover steps' one Actuator (one connection pool), closed at
	// Shutdown; nil when this is no db agent.
	act *fence.Actuator
	// sw is this agent's part in switchovers (package switchover).
	sw *switchover.Switcher
	// replUser and replPassword (mysql.replication_user and
	// replication_password_file) are the account a former writer
	// replicates from the new one with; "" keeps the server's own.
	replUser, replPassword string
}

// newTermBook is the book of the writer terms, wired to this agent: its
// gossip, its pool, its raft voter's FSM when it is one, and the internal
// queries the switchovers answer.
func (a *Agent) newTermBook() *term.Book {
	path := ""
	if a.cfg.Snapshot != "" {
		path = a.cfg.Snapshot + ".terms" // the terms file, next to the snapshot
	}
	return term.New(term.Config{
		Node: a.cfg.Node, File: path, Gossip: termGossip{a}, Clock: a.clock, Log: a.log,
		Pool: func() *pool.Pool {
			if a.pool.router == nil {
				return nil
			}
			return a.pool.router.Current().Pool
		},
		Voter: func() term.Voter {
			if a.cons.node == nil {
				return nil
			}
			return a.cons.node.FSM()
		},
		Changed: func() {
			if a.pool.router != nil {
				a.pool.router.Trigger()
			}
		},
		Other: a.answerInternal,
	})
}

// answerInternal answers shoal's internal queries that are not the term
// book's: the switchover's steps and the applied-term queries.
func (a *Agent) answerInternal(ctx context.Context, q *serf.Query) {
	switch q.Name {
	case consensus.SwitchQuery:
		a.cons.sw.Answer(ctx, q)
	case consensus.AppliedQuery:
		if !a.cons.sw.AnswerApplied(q) {
			a.cons.terms.Stats().Malformed.Add(1)
		}
	}
}

// termGossip is the gossip as the term book uses it: no members before
// serf exists.
type termGossip struct{ a *Agent }

func (g termGossip) Members() []serf.Member {
	if g.a.mesh.sa == nil {
		return nil
	}
	return g.a.Members()
}

func (g termGossip) UserEvent(name string, payload []byte, coalesce bool) error {
	return g.a.UserEvent(name, payload, coalesce)
}

func (g termGossip) Query(name string, payload []byte, p *serf.QueryParam) (*serf.QueryResponse, error) {
	return g.a.Query(name, payload, p)
}

// reconcileTagEvery is how often the voter tag's mark is checked.
const reconcileTagEvery = time.Second

// voterTag is the voter tag's value, "" when this agent is no voter.
func (a *Agent) voterTag() string {
	if a.cons.port == 0 {
		return ""
	}
	v := tags.VoterTag{Port: a.cons.port, InConfig: a.cons.inConfig.Load(), Expect: a.cfg.Consensus.BootstrapExpect}
	if g := a.cons.group.Load(); g != nil {
		v.Group = *g
	}
	return tags.FormatVoter(v)
}

// startConsensus sets what writer terms are verified with (the consensus
// keyring, consensus.term_key) and opens this agent's raft server when it
// is a voter; the loops run from startLoops. An agent without a consensus
// key has no raft server.
func (a *Agent) startConsensus(context.Context, *startup) error {
	cs := a.cfg.Consensus
	if w := a.cfg.NoTermWarning(); w != "" {
		a.log.Warn(w)
	}
	var kr *consensus.Keyring
	if cs.Enabled() {
		keys, warn, err := a.cfg.ConsensusKeyring()
		if err != nil {
			return config.Invalid(err)
		}
		if warn != "" {
			a.log.Warn(warn)
		}
		if kr, err = consensus.ParseKeyring(keys); err != nil {
			return config.Invalid(fmt.Errorf("consensus.keyring_file %s: %w", cs.KeyringFile, err))
		}
	}
	extra, err := cs.TermPublicKeys()
	if err != nil {
		return config.Invalid(fmt.Errorf("consensus.term_key: %w", err))
	}
	a.cons.terms.SetKeys(kr, extra, a.cons.port != 0)
	a.cons.terms.Load()
	a.startSwitcher()
	if a.cons.port == 0 {
		return nil
	}
	host := a.cfg.ConsensusHost()
	adv := a.consensusAdvertise(cs.AdvertiseAddr(host))
	n, err := consensus.Open(consensus.Config{
		ID: a.cfg.Node, Bind: cs.BindAddr(host), Advertise: adv, AltAddrs: a.consensusGossipAddr(adv),
		DataDir: cs.DataDirPath(), Keyring: kr, BootstrapExpect: cs.BootstrapExpect,
		HeartbeatTimeout: cs.HeartbeatTimeout, ElectionTimeout: cs.ElectionTimeout, LeaderLeaseTimeout: cs.LeaderLeaseTimeout,
		Log: a.logs.Logger, OnRefused: a.consensusRefused, OnApply: a.cons.terms.OnApply, // queues: no I/O on raft's apply goroutine
	})
	var dirErr *consensus.DataDirError
	if errors.As(err, &dirErr) { // another agent's data directory: exit 2, not a restart loop
		return config.Invalid(&config.FieldError{Key: "consensus.data_dir", Value: dirErr.Dir, Msg: dirErr.Msg})
	}
	if err != nil {
		return err
	}
	a.cons.node = n
	a.log.Info("consensus voter started", "raft", n.Status().Addr, "key", kr.Fingerprint(), "bootstrap_expect", cs.BootstrapExpect, "in_config", n.HasState())
	return nil
}

// consensusAdvertise is the raft address this voter gives: the other
// voters dial its gossip IP and the voter tag's port (Peers), so an
// unspecified advertise host (0.0.0.0, ::) becomes the IP gossip advertises.
func (a *Agent) consensusAdvertise(adv string) string {
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return adv
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return net.JoinHostPort(a.Serf().LocalMember().Addr.String(), port)
	}
	return adv
}

// consensusGossipAddr is the raft address the other voters see in the
// gossip (Peers: the gossip IP and the advertised port), when it differs
// from adv: this voter's certificate binds both.
func (a *Agent) consensusGossipAddr(adv string) []string {
	_, port, err := net.SplitHostPort(adv)
	if err != nil {
		return nil
	}
	if g := net.JoinHostPort(a.Serf().LocalMember().Addr.String(), port); g != adv {
		return []string{g}
	}
	return nil
}

// consensusRefused logs a refused raft connection, at most one line per
// second (a stranger can make many).
func (a *Agent) consensusRefused(remote net.Addr, reason string, err error) {
	now, last := a.clock.Now().UnixNano(), a.cons.refusedLogged.Load()
	if now-last >= int64(time.Second) && a.cons.refusedLogged.CompareAndSwap(last, now) {
		a.log.Warn("consensus: refused a raft connection", "remote", remote.String(), "reason", reason, "error", err)
	}
}

// runConsensus drives the voter until ctx ends, and keeps the voter tag's
// "in a configuration" mark current.
func (a *Agent) runConsensus(ctx context.Context) {
	if a.cons.node == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.cons.node.Run(ctx, consensusView{a}, a.cons.wake)
	}()
	defer func() { <-done }()
	t := a.clock.NewTicker(reconcileTagEvery)
	defer t.Stop()
	for {
		in, g := a.cons.node.HasState(), a.cons.node.FSM().Group()
		if old := a.cons.group.Load(); in != a.cons.inConfig.Load() || old == nil || *old != g {
			a.cons.inConfig.Store(in)
			a.cons.group.Store(&g)
			a.pub.MarkDirty()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// wakeConsensus makes the voter decide now: a member changed.
func (a *Agent) wakeConsensus() {
	select {
	case a.cons.wake <- struct{}{}:
	default:
	}
}

// consensusView is what the raft voter reads of the agent.
type consensusView struct{ a *Agent }

func (v consensusView) Members() []pool.Member { return v.a.poolMembers() }
func (v consensusView) Policy() pool.Policy    { return v.a.cfg.Pool.Policy() }
func (v consensusView) Publish(ts []pool.Term) { v.a.cons.terms.Publish(ts) }

// Peers returns the alive members whose voter tag is valid, with their
// raft address (the member's gossip IP and the tag's port), and the
// members that left. A member that breaks the gossip rules is never a
// peer.
func (v consensusView) Peers() (alive []consensus.Peer, gone map[string]bool) {
	gone = map[string]bool{}
	for _, m := range v.a.Members() {
		if gossiped.FromSerf(m).Pool().Bad != pool.ReasonNone {
			continue
		}
		switch m.Status {
		case serf.StatusLeft:
			gone[m.Name] = true
		case serf.StatusAlive:
			if vt, ok := tags.Voter(m.Tags); ok && m.Name != v.a.cfg.Node {
				alive = append(alive, consensus.Peer{ID: m.Name, Addr: net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(vt.Port))),
					HasState: vt.InConfig, Group: vt.Group, Expect: vt.Expect})
			}
		}
	}
	return alive, gone
}

// consensusInfo is the consensus part of `shoal info`.
func (a *Agent) consensusInfo() *view.Consensus {
	cs := a.cfg.Consensus
	if !cs.Enabled() && cs.TermKey == "" {
		return nil
	}
	out := &view.Consensus{BootstrapExpect: cs.BootstrapExpect, Failover: cs.Failover, Failovers: map[string]string{}}
	for c, what := range a.cons.sw.LastFailover() {
		out.Failovers[gossiped.Escape(c)] = gossiped.Escape(what)
	}
	for c, r := range a.cons.sw.Returns() {
		if out.Returned == nil {
			out.Returned = map[string]string{}
		}
		out.Returned[gossiped.Escape(c)] = gossiped.Escape(r.String())
	}
	groups := a.cons.terms.Groups()
	out.Group = groups.Own
	for _, id := range slices.Sorted(maps.Keys(groups.Voters)) {
		out.Groups = append(out.Groups, view.ConsensusGroup{ID: id, Voters: groups.Voters[id]})
	}
	for _, k := range a.cons.terms.Verify() {
		out.TermKeys = append(out.TermKeys, consensus.EncodePublicKey(k))
	}
	tv := a.cons.terms.View()
	for _, c := range slices.Sorted(maps.Keys(tv.Terms)) {
		t := tv.Terms[c]
		out.Terms = append(out.Terms, *viewTerm(&t))
	}
	if a.cons.node == nil {
		return out
	}
	s := a.cons.node.Status()
	out.Voter, out.ID, out.Addr, out.State, out.Leader, out.LeaderAddr = true, s.ID, s.Addr, s.State, s.Leader, s.LeaderAddr
	out.Bootstrapped, out.RaftTerm, out.LastIndex, out.AppliedIndex, out.LastContact = s.Bootstrapped, s.RaftTerm, s.LastIndex, s.AppliedIndex, s.LastContact
	out.Refused = s.Refused
	for _, vo := range s.Voters {
		out.Voters = append(out.Voters, view.ConsensusVoter{ID: vo.ID, Addr: vo.Addr, Leader: vo.Leader, Failing: vo.Failing, LastContact: vo.LastContact})
	}
	return out
}

// consensusPort is the raft port the voter tag advertises, 0 when this
// agent is no voter.
func consensusPort(cfg *config.Config) uint16 {
	if !cfg.Consensus.Enabled() || !cfg.ConsensusVoter() {
		return 0
	}
	_, p, err := net.SplitHostPort(cfg.Consensus.AdvertiseAddr(cfg.ConsensusHost()))
	if err != nil {
		return 0
	}
	port, _ := strconv.ParseUint(p, 10, 16)
	return uint16(port)
}

// newFencer is the fencing of the probe's server, nil when fencing is off
// (consensus off, or consensus.fence false).
func (a *Agent) newFencer(pc probe.Config) *fencing.Fencer {
	if !a.cfg.Consensus.FenceEnabled() {
		return nil
	}
	var lease time.Duration
	if a.cfg.ConsensusVoter() {
		lease = a.cfg.Consensus.LeaseDuration()
	}
	return fencing.New(fencing.Config{
		Node: a.cfg.Node, After: a.cfg.Consensus.FenceAfter, Lease: lease, Target: fence.FromProbe(pc, fence.DefaultTimeout).Addr, Actuator: a.cons.act,
		Pool: func() (*pool.Pool, bool) {
			u := a.pool.router.Current()
			return u.Pool, u.Isolated
		},
		Terms: a.cons.terms.View,
		Contact: func() (leader bool, last time.Time, ok bool) {
			if a.cons.node == nil {
				return false, time.Time{}, false
			}
			st := a.cons.node.Status()
			return st.State == "leader", st.LastContact, true
		},
		// The switcher is built after the fencer (startConsensus).
		WasDemoted: func(cluster string, term uint64) bool { return a.cons.sw.WasDemoted(cluster, term) },
		Record: func(e history.Entry) {
			if a.rep.hist != nil {
				a.rep.hist.Add(e)
			}
		},
		ReadOnly: func() {
			if a.probe != nil {
				a.probe.CheckNow() // every agent sees the server read-only at once
			}
		},
		Clock: a.clock, Log: a.log,
	})
}

// runFence runs the fencing, when it is on, until ctx ends.
func (a *Agent) runFence(ctx context.Context) {
	if a.cons.fence != nil {
		a.cons.fence.Run(ctx)
	}
}

// closeConsensus stops the raft voter and closes the server's actuator
// (Shutdown: after the loops end).
func (a *Agent) closeConsensus() {
	if a.cons.act != nil {
		if err := a.cons.act.Close(); err != nil {
			a.log.Warn("closing the mysql actuator", "error", err)
		}
	}
	if a.cons.node == nil {
		return
	}
	if err := a.cons.node.Close(); err != nil {
		a.log.Warn("consensus shutdown", "error", err)
	}
}
