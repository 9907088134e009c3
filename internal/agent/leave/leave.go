// Package leave is the agent's graceful leave of the cluster, and the
// resolution of a force-leave's node name. A Leaver makes the one leave an
// agent makes; every call gets its outcome.
//
// serf's Leave (serf v0.11.0, serf/serf.go) marks the local member leaving,
// queues the leave intent, waits until that broadcast has been handed to
// peers retransmit-limit times (at most BroadcastTimeout, 5 s), does the
// same for memberlist's own leave message, then sleeps LeavePropagateDelay
// (1 s) and returns nil, whether or not its waits timed out. Broadcasts go
// out only piggybacked on gossip to peers memberlist counts as alive or
// suspect. Two consequences:
//
//   - When every agent stops at once (a whole cluster stopped with one
//     command), the peers turn "left" within a few gossip rounds, nobody is
//     left to gossip to, and serf waits its whole BroadcastTimeout for a
//     broadcast that can never go out: the leave ran into leave_timeout
//     although every peer had seen it.
//   - serf counts a broadcast as sent once it is written to UDP sockets, so
//     against peers that are stopped or cut off it reports success.
//
// So shoal decides itself when the leave is complete, bounded by
// leave_timeout: once every peer that was alive when the leave began is
// itself leaving or left (nobody is left to confirm) and our intent went out
// to whoever could still receive it, or once serf's Leave
// returned with its broadcasts sent and an alive peer answered a ping sent
// after that (it has the leave, and gossips it on). Otherwise the leave is
// not confirmed and Leave says which peers did not answer. Before it
// returns through the first way, it also sends its intent straight to the
// peers that are leaving or left (tellLeaving): memberlist gossips to
// neither, yet they may be waiting for word of it. A peer that fails during
// the leave (stopped, cut off, or gone without a word) is not settled: if no
// peer answers, the leave ends at leave_timeout as not confirmed.
package leave

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/gossip"
)

// Config is what a Leaver needs.
type Config struct {
	Node  string          // this agent's member name
	Clock clockwork.Clock // nil: the real clock
	Log   *slog.Logger    // required
	// Stopping is closed when the agent shuts down: LeaveForRPC stops
	// waiting for the leave then.
	Stopping <-chan struct{}
}

// Target is what leaves: serf's agent (*agent.Agent of serf's
// cmd/serf/command/agent).
type Target interface {
	Serf() *serf.Serf
	Leave() error
}

// Leaver makes the one leave of an agent and keeps its outcome. It has no
// mutex: once starts the leave, and err is written before done is closed.
type Leaver struct {
	cfg      Config
	once     sync.Once
	done     chan struct{} // closed when err is set
	err      error
	timedOut atomic.Bool // serf logged a timeout of its leave broadcasts
	// completed: the leave is complete (err nil); serf's own Leave may
	// still run (see gossip.SerfLogLevel).
	completed atomic.Bool
}

// New returns a Leaver; nothing runs until Leave.
func New(cfg Config) *Leaver {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &Leaver{cfg: cfg}
}

// ObserveLog watches serf's log lines for the timeout of its leave
// broadcasts.
func (l *Leaver) ObserveLog(component, msg string) {
	if gossip.IsLeaveTimeout(component, msg) {
		l.timedOut.Store(true)
	}
}

// Completed reports whether the leave is complete (and succeeded).
func (l *Leaver) Completed() bool { return l.completed.Load() }

// Leave leaves the cluster gracefully, bounded by timeout (leave_timeout).
// Only the first call leaves; every call returns its outcome. A nil t (serf
// never created) has nothing to leave.
func (l *Leaver) Leave(t Target, timeout time.Duration) error {
	<-l.start(t, timeout)
	return l.err
}

// LeaveForRPC is Leave for the Serf RPC: it returns early, with an error,
// if the agent shuts down meanwhile (a second signal).
func (l *Leaver) LeaveForRPC(t Target, timeout time.Duration) error {
	l.cfg.Log.Info("leave requested through the serf rpc")
	done := l.start(t, timeout)
	select {
	case <-done:
		return l.err
	case <-l.cfg.Stopping:
		return errors.New("leave: the agent shut down before the leave completed")
	}
}

func (l *Leaver) start(t Target, timeout time.Duration) <-chan struct{} {
	l.once.Do(func() {
		l.done = make(chan struct{})
		go func() {
			l.err = nil
			if t != nil {
				l.err = l.leave(t, timeout)
			}
			l.completed.Store(l.err == nil)
			close(l.done)
		}()
	})
	return l.done
}

// leavePoll is how often Leave looks at the peers' states.
const leavePoll = 25 * time.Millisecond

// maxLeavePeersListed bounds the peers an unconfirmed leave names.
const maxLeavePeersListed = 5

func (l *Leaver) leave(t Target, timeout time.Duration) error {
	s := t.Serf()
	deadline := l.cfg.Clock.After(timeout)
	peers := alivePeers(s)

	serfDone := make(chan error, 1)
	go func() {
		// memberlist panics on a Leave after its Shutdown: that happens
		// when shoal decided the leave (nobody left to confirm) and shut
		// down while serf still waited for its broadcast.
		defer func() {
			if v := recover(); v != nil {
				serfDone <- fmt.Errorf("serf leave stopped by the shutdown: %v", v)
			}
		}()
		serfDone <- t.Leave()
	}()

	tick := l.cfg.Clock.NewTicker(leavePoll)
	defer tick.Stop()
	var serfReturned bool
	var pingDone chan bool // a round of pings in flight
	for {
		if s.LocalMember().Status != serf.StatusAlive && allSettled(s, peers) && intentOut(s) {
			l.tellLeaving(s)
			if len(peers) == 0 {
				l.cfg.Log.Info("left the cluster", "peers", 0)
			} else {
				l.cfg.Log.Info("left the cluster: every peer is leaving or left too", "peers", len(peers))
			}
			return nil
		}
		select {
		case err := <-serfDone:
			if err != nil {
				return fmt.Errorf("leave: %w", err)
			}
			serfReturned = true
		case ok := <-pingDone:
			pingDone = nil
			if ok {
				l.cfg.Log.Info("left the cluster")
				return nil
			}
		case <-tick.Chan():
		case <-deadline:
			return unconfirmed(s.Members(), peers, l.timedOut.Load(), timeout)
		}
		if serfReturned && pingDone == nil && !l.timedOut.Load() {
			pingDone = make(chan bool, 1)
			go func(ch chan<- bool) { ch <- pingAny(s, peers) }(pingDone)
		}
	}
}

// unconfirmed is the error of a leave that ran into leave_timeout: it names
// the peers of ms among peers that are not leaving or left; timedOut: serf
// logged that its leave broadcast timed out.
func unconfirmed(ms []serf.Member, peers []string, timedOut bool, timeout time.Duration) error {
	var open []string
	for _, m := range ms {
		if slices.Contains(peers, m.Name) && !settled(m.Status) {
			open = append(open, fmt.Sprintf("%s (%s)", m.Name, m.Status))
		}
	}
	slices.Sort(open)
	more := ""
	if len(open) > maxLeavePeersListed {
		more = fmt.Sprintf(" and %d more", len(open)-maxLeavePeersListed)
		open = open[:maxLeavePeersListed]
	}
	why := "no peer answered after the leave was sent"
	if timedOut {
		why = "serf could not send the leave broadcast"
	}
	return fmt.Errorf("leave: not confirmed within leave_timeout %s: %s: %s%s (the leave may still reach them)",
		timeout, why, strings.Join(open, ", "), more)
}

// pingAny pings the peers of the leave that are still alive, at once, and
// reports whether one answered (within memberlist's probe timeout).
func pingAny(s *serf.Serf, peers []string) bool {
	ml := s.Memberlist()
	var targets []serf.Member
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive && slices.Contains(peers, m.Name) {
			targets = append(targets, m)
		}
	}
	if len(targets) == 0 {
		return false
	}
	answers := make(chan bool, len(targets))
	for _, m := range targets {
		go func() {
			_, err := ml.Ping(m.Name, &net.UDPAddr{IP: m.Addr, Port: int(m.Port)})
			answers <- err == nil
		}()
	}
	for range targets {
		if <-answers {
			return true
		}
	}
	return false
}

// maxTellLeaving bounds the peers tellLeaving writes to.
const maxTellLeaving = 256

// tellLeaving sends our leave intent straight to the peers that are leaving
// or left in our view. memberlist gossips to neither, yet they may still
// run (serf's Leave stays up LeavePropagateDelay, and shoal's waits for
// word of its alive peers): when every agent stops at once, an agent that
// heard all the others leave before its own signal came would go without a
// word while they wait for news of it, and then see it fail. Best effort:
// one UDP message each, twice, to at most maxTellLeaving peers (a left
// member stays listed for serf's tombstone timeout; long-gone ones just
// drop the packet).
func (l *Leaver) tellLeaving(s *serf.Serf) {
	lt, err := strconv.ParseUint(s.Stats()["member_time"], 10, 64)
	if err != nil {
		l.cfg.Log.Debug("leave: no lamport time to tell the leaving peers", "err", err)
		return
	}
	intent, err := gossip.LeaveIntent(lt, l.cfg.Node) // serf's wire format: see package gossip
	if err != nil {
		l.cfg.Log.Debug("leave: encode the leave intent", "err", err)
		return
	}
	ml := s.Memberlist()
	var targets []serf.Member
	for _, m := range s.Members() {
		if m.Name != l.cfg.Node && settled(m.Status) {
			targets = append(targets, m)
		}
	}
	// Leaving ones first: they are the likeliest to be waiting.
	slices.SortStableFunc(targets, func(x, y serf.Member) int {
		return cmp.Compare(x.Status, y.Status)
	})
	for _, m := range targets[:min(len(targets), maxTellLeaving)] {
		node := &memberlist.Node{Name: m.Name, Addr: m.Addr, Port: m.Port}
		for range 2 {
			if err := ml.SendBestEffort(node, intent); err != nil {
				l.cfg.Log.Debug("leave: tell a leaving peer", "member", m.Name, "err", err)
			}
		}
	}
}

// alivePeers are the other members alive in serf's view.
func alivePeers(s *serf.Serf) []string {
	self := s.LocalMember().Name
	var out []string
	for _, m := range s.Members() {
		if m.Name != self && m.Status == serf.StatusAlive {
			out = append(out, m.Name)
		}
	}
	return out
}

// intentOut: our leave intent has gone out, as far as anyone can still
// receive it: serf moved on to memberlist's leave (which marks the local
// node left, so memberlist no longer lists it), or memberlist has no peer
// left to gossip it to.
func intentOut(s *serf.Serf) bool {
	ml := s.Memberlist()
	self := ml.LocalNode().Name
	nodes := ml.Members() // alive and suspect nodes only
	if !slices.ContainsFunc(nodes, func(n *memberlist.Node) bool { return n.Name == self }) {
		return true
	}
	return len(nodes) == 1
}

// allSettled: every one of peers is leaving or left (or gone from the
// member list), so none of them needs our leave.
func allSettled(s *serf.Serf, peers []string) bool {
	for _, m := range s.Members() {
		if slices.Contains(peers, m.Name) && !settled(m.Status) {
			return false
		}
	}
	return true
}

func settled(st serf.MemberStatus) bool {
	return st == serf.StatusLeaving || st == serf.StatusLeft
}
