package gossip

import (
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"
)

// Failure confirmation: the Gate.
//
// memberlist declares a member dead when its suspicion timer runs out, or at
// once when a "dead" message arrives from any other member. With fast timers
// that is wrong in one case no timer setting fixes: a host that was cut off
// suspected everyone, and when its link comes back its stale suspicions and
// dead messages reach the others, who mark healthy members failed (measured:
// dozens of false failures after an 8 s cut at N = 15; see
// docs/benchmarks.md). The failed member refutes within a second, but by then
// every agent has already acted on the failure.
//
// So shoal does not act on a member-failed until it has checked for itself:
// the event is withheld from everything downstream (pool, hooks, members
// view, metrics, peers file) while this agent sends the member direct
// memberlist pings. If none is answered within a few round trips (see
// confirmWait), the failure is confirmed and passed on; a crashed or
// cut-off host costs that wait more (about 60 ms on a LAN). If one is
// answered, the member is up and reachable from here: the failure stays
// withheld, and when the member refutes (serf
// reports it alive again) both events are dropped, so nothing flaps. A
// member that keeps answering but that gossip keeps calling failed is
// passed on as failed after maxHold: gossip has the last word. A confirmed
// member is then watched until it answers again (watchRevival).
type Gate struct {
	ping func(m serf.Member) bool // true when the member answered
	// rejoin, when set, is called when a confirmed-failed member answers
	// pings again (see watchRevival); revivePing checks once whether it
	// does (false when the agent is too busy to ask), reviveEvery says how
	// often each agent asks.
	rejoin      func(m serf.Member)
	revivePing  func(m serf.Member) bool
	reviveEvery func() time.Duration
	// pingCareful, when set, is a second, longer check for a member that
	// misses the first but was heard from just before (heardSince, the
	// transport's last packet from it); heard, when set, reports the next
	// packet from a member (the transport's Watch).
	pingCareful func(m serf.Member) bool
	heardSince  func(m serf.Member) (time.Duration, bool)
	heard       func(m serf.Member) (<-chan struct{}, func())
	// size, when set, is the number of members known, failed or not (see
	// rejoining).
	size func() int
	// health, when set, is memberlist's awareness score of this agent (0
	// healthy; see degraded).
	health  func() int
	emit    func(serf.Event) // downstream; called with mu held, in order
	retry   time.Duration    // re-check interval while the member answers
	maxHold time.Duration
	log     *slog.Logger
	clock   clockwork.Clock

	mu        sync.Mutex
	pending   map[string]*pendingFailure
	confirmed map[string]uint64 // failed in serf and passed downstream: name → generation
	gen       uint64
	cutUntil  time.Time // see rejoining
	// unrest (see unsettled): when each member's last failure arrived,
	// when a member last came back from a failure, and when each
	// confirmed-failed member was confirmed.
	failedAt    map[string]time.Time
	cameBack    time.Time
	confirmedAt map[string]time.Time
	closed      bool
	stop        chan struct{}

	Confirmed, Refuted, Expired, Careful atomic.Uint64
	// sync, when set, exchanges full state with a few alive members other
	// than back (see scheduleSync); syncAt is when the next one is due.
	sync   func(back serf.Member)
	syncAt time.Time
	// Syncs counts the state exchanges scheduleSync ran.
	Syncs atomic.Uint64
	// ConfirmPings and RevivePings count the direct pings sent to check
	// failures and to watch confirmed-failed members (NewSerfGate counts
	// them; a Gate on other pings leaves them at zero).
	ConfirmPings, RevivePings atomic.Uint64
}

type pendingFailure struct {
	member serf.Member
	since  time.Time
	done   chan struct{} // closed when resolved by a later event
}

// GateConfig is what a Gate needs. Ping and Emit are required; the
// rest has defaults.
type GateConfig struct {
	Ping    func(serf.Member) bool // direct pings; true when the member answered
	Emit    func(serf.Event)       // downstream; called with the gate's lock held, in order
	Retry   time.Duration          // re-check interval while the member answers
	MaxHold time.Duration          // how long an answering member is kept against gossip
	Log     *slog.Logger
	Clock   clockwork.Clock // nil: the real clock

	// Revival (see watchRevival): Rejoin nil turns it off; RevivePing
	// defaults to Ping, ReviveEvery to reviveEvery.
	Rejoin      func(serf.Member)
	RevivePing  func(serf.Member) bool
	ReviveEvery func() time.Duration
	// The second check (see recentlyHeard and heardFromFailed); each nil
	// turns its part off.
	PingCareful func(serf.Member) bool
	HeardSince  func(serf.Member) (time.Duration, bool)
	Heard       func(serf.Member) (<-chan struct{}, func())
	Size        func() int
	// Health is memberlist's awareness score of this agent
	// (GetHealthScore; see degraded); nil turns that trigger off.
	Health func() int
	// Sync, when set, exchanges full state with a few alive members other
	// than the one given (see scheduleSync).
	Sync func(back serf.Member)
}

func NewGate(c GateConfig) *Gate {
	g := &Gate{ping: c.Ping, emit: c.Emit, retry: c.Retry, maxHold: c.MaxHold, log: c.Log, clock: c.Clock,
		rejoin: c.Rejoin, revivePing: c.RevivePing, reviveEvery: c.ReviveEvery,
		pingCareful: c.PingCareful, heardSince: c.HeardSince, heard: c.Heard, size: c.Size, health: c.Health, sync: c.Sync,
		pending: map[string]*pendingFailure{}, confirmed: map[string]uint64{}, stop: make(chan struct{}),
		failedAt: map[string]time.Time{}, confirmedAt: map[string]time.Time{}}
	if g.clock == nil {
		g.clock = clockwork.NewRealClock()
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.revivePing == nil {
		g.revivePing = g.ping
	}
	if g.reviveEvery == nil {
		g.reviveEvery = func() time.Duration { return reviveEvery }
	}
	return g
}

// HandleEvent implements serf's agent.EventHandler. It runs in serf's event
// loop and never blocks on the network.
func (g *Gate) HandleEvent(e serf.Event) {
	me, ok := e.(serf.MemberEvent)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !ok {
		g.emit(e)
		return
	}
	var pass []serf.Member
	now := g.clock.Now()
	for _, m := range me.Members {
		p := g.pending[m.Name]
		switch me.Type {
		case serf.EventMemberFailed:
			g.noteFailure(m.Name, now)
			if g.closed {
				pass = append(pass, m)
				continue
			}
			if p != nil {
				continue
			}
			p = &pendingFailure{member: m, since: g.clock.Now(), done: make(chan struct{})}
			g.pending[m.Name] = p
			go g.check(p)
		case serf.EventMemberJoin:
			if _, ok := g.confirmed[m.Name]; ok || p != nil {
				g.cameBack = now
				g.scheduleSync(m, now)
			}
			if p != nil {
				// Refuted: downstream never saw it fail, so it must not see
				// it join either.
				g.resolve(m.Name, p)
				g.Refuted.Add(1)
				g.log.Info("member reported failed by gossip was answering pings and is alive again; failure not acted on", "member", m.Name, "withheld", g.clock.Since(p.since).Round(time.Millisecond).String())
				continue
			}
			g.forget(m.Name)
			pass = append(pass, m)
		case serf.EventMemberLeave, serf.EventMemberReap:
			if p != nil {
				g.resolve(m.Name, p)
			}
			g.forget(m.Name)
			pass = append(pass, m)
		default:
			pass = append(pass, m)
		}
	}
	if len(pass) > 0 {
		g.emit(serf.MemberEvent{Type: me.Type, Members: pass})
	}
}

// forget drops name from the confirmed-failed members; mu is held.
func (g *Gate) forget(name string) {
	delete(g.confirmed, name)
	delete(g.confirmedAt, name)
}

// noteFailure records when a failure of name arrived, for unsettled, and
// forgets arrivals too old to matter; mu is held.
func (g *Gate) noteFailure(name string, now time.Time) {
	for n, at := range g.failedAt {
		if now.Sub(at) > unrestWindow {
			delete(g.failedAt, n)
		}
	}
	g.failedAt[name] = now
}

// resolve ends a pending failure; mu is held.
func (g *Gate) resolve(name string, p *pendingFailure) {
	delete(g.pending, name)
	close(p.done)
}

// check pings the member until it is confirmed failed, resolved by a later
// event, or held for maxHold.
func (g *Gate) check(p *pendingFailure) {
	name := p.member.Name
	warned := false
	for {
		answered := g.ping(p.member)
		if !answered && g.pingCareful != nil && g.askAgain(p) {
			g.Careful.Add(1)
			answered = g.pingCareful(p.member)
		}
		g.mu.Lock()
		if g.pending[name] != p {
			g.mu.Unlock()
			return
		}
		expired := answered && g.clock.Since(p.since) >= g.maxHold
		if !answered || expired || g.closed {
			delete(g.pending, name)
			g.gen++
			g.confirmed[name] = g.gen
			g.confirmedAt[name] = g.clock.Now()
			if g.rejoin != nil && !g.closed {
				go g.watchRevival(p.member, g.gen)
			}
			if expired {
				g.Expired.Add(1)
				g.log.Warn("member answers direct pings but gossip still reports it failed; acting on the failure", "member", name, "held", g.maxHold.String())
			} else {
				g.Confirmed.Add(1)
			}
			g.emit(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{p.member}})
			g.mu.Unlock()
			return
		}
		if !warned {
			warned = true
			g.log.Info("gossip reports a member failed but it answers direct pings; withholding the failure", "member", name)
		}
		g.mu.Unlock()
		select {
		case <-p.done:
			return
		case <-g.stop:
			return
		case <-g.clock.After(g.retry):
		}
	}
}

// watchRevival pings a confirmed-failed member until it is back, gone, or
// the gate closes. When it answers while gossip still has it failed (a cut
// link came back; gossip only notices when serf's reconnect happens to pick
// it, on average after several reconnect intervals), the member is rejoined
// at once: the push/pull tells it it was declared dead, it refutes, and
// every agent sees it alive within a gossip round or two. A random pause
// before the rejoin lets one agent's rejoin make the others' unnecessary.
func (g *Gate) watchRevival(m serf.Member, gen uint64) {
	started := g.clock.Now()
	// The first packet from the member is the first sign that it (or the
	// link to it) is back: it is asked right away, not at the next tick.
	var heard <-chan struct{}
	stopWatch := func() {}
	watch := func() {
		if g.heard != nil && heard == nil {
			heard, stopWatch = g.heard(m)
		}
	}
	defer func() { stopWatch() }()
	watch()
	// Start at a random phase so that the agents' pings spread out.
	first := true
	// At most one ping per interval, whatever wakes the loop: packets from
	// the member (or replayed with its address) only bring the next ping
	// forward, to no earlier than one interval after the last.
	var lastPing time.Time
	for {
		every := g.reviveEvery()
		if g.clock.Since(started) > reviveFastFor {
			every = max(every, reviveSlowEvery)
		}
		wait := every
		if first {
			wait, first = time.Duration(rand.Int64N(int64(every)))+time.Millisecond, false
		}
		select {
		case <-g.stop:
			return
		case <-heard:
			heard = nil
			g.heardFromFailed()
		case <-g.clock.After(wait):
		}
		if !g.stillConfirmed(m.Name, gen) {
			return
		}
		if !lastPing.IsZero() {
			if early := every - g.clock.Since(lastPing); early > 0 {
				select {
				case <-g.stop:
					return
				case <-g.clock.After(early):
				}
				if !g.stillConfirmed(m.Name, gen) {
					return
				}
			}
		}
		watch()
		lastPing = g.clock.Now()
		if !g.revivePing(m) {
			continue
		}
		select {
		case <-g.stop:
			return
		case <-g.clock.After(time.Duration(rand.Int64N(int64(reviveJitter)))):
		}
		if !g.stillConfirmed(m.Name, gen) {
			return
		}
		g.log.Info("a member gossip has failed answers pings again: rejoining it", "member", m.Name)
		g.rejoin(m)
	}
}

// askAgain reports whether a member that missed the first check gets the
// second, longer one (pingCareful). A single crash or cut pays nothing: its
// failure arrives alone, long after the member was last heard from, on an
// agent that is itself healthy. The second check is for everything else:
//   - the member was heard from just before (recentlyHeard);
//   - this agent was cut off itself and is rejoining (rejoining);
//   - other failures arrived, or failed members came back, within
//     unrestWindow, or another member was confirmed failed less than
//     unrestConfirmed ago and still is (unsettled): failures that come
//     together mean a link healed or a partition, whose stale suspicions
//     reach every agent at once, more than independent crashes;
//   - memberlist's awareness of this agent is poor (degraded): its own
//     probes are failing, so its first checks may be what is slow.
//
// In a large cluster two agents rarely exchange packets (each probes one
// member per interval), so recentlyHeard alone misses most healthy but
// accused members: at 50 agents, after a 1.5 s cut healed, members were
// confirmed failed that answered moments later.
func (g *Gate) askAgain(p *pendingFailure) bool {
	return g.recentlyHeard(p) || g.rejoining() || g.unsettled(p) || g.degraded()
}

// unsettled reports whether failures are not arriving alone (see
// askAgain).
func (g *Gate) unsettled(p *pendingFailure) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	from := p.since.Add(-unrestWindow)
	if g.cameBack.After(from) {
		return true
	}
	for name, at := range g.failedAt {
		if name != p.member.Name && at.After(from) {
			return true
		}
	}
	for name, at := range g.confirmedAt {
		if name != p.member.Name && now.Sub(at) < unrestConfirmed {
			return true
		}
	}
	return false
}

// degraded reports whether memberlist's awareness score of this agent is
// at least degradedHealth (its own probes have been failing).
func (g *Gate) degraded() bool {
	return g.health != nil && g.health() >= degradedHealth
}

// recentlyHeard reports whether a packet came from the member in the
// carefulRecent before its failure arrived here, or since. A member that
// crashed or was cut off has been silent for at least the detection time
// (a probe and a suspicion timeout) when its failure arrives; one that is
// healthy but accused (stale suspicions from a host whose link just came
// back, or lost packets on a loaded network) was usually heard from
// moments ago. Such a member gets a second, longer check before it is
// called failed, and a real failure pays nothing for it.
func (g *Gate) recentlyHeard(p *pendingFailure) bool {
	if g.heardSince == nil {
		return false
	}
	ago, ok := g.heardSince(p.member)
	return ok && g.clock.Now().Add(-ago).After(p.since.Add(-carefulRecent))
}

// heardFromFailed notes a packet from a confirmed-failed member. When this
// agent has at least half of the other members confirmed failed, it was
// most likely the one cut off, and the packet says its link is back: for
// carefulFor, every failure it still has to check (its suspicions from
// while it was cut off, which expire now) gets the second check.
func (g *Gate) heardFromFailed() {
	if g.size == nil {
		return
	}
	n := g.size()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > 1 && 2*len(g.confirmed) >= n-1 {
		g.cutUntil = g.clock.Now().Add(carefulFor)
	}
}

// rejoining reports whether this agent is rejoining after it was cut off
// (see heardFromFailed).
func (g *Gate) rejoining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.clock.Now().Before(g.cutUntil)
}

func (g *Gate) stillConfirmed(name string, gen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.closed && g.confirmed[name] == gen
}

// Overlay rewrites serf's member list to what shoal acts on: a member serf
// reports failed whose failure is not confirmed is shown alive.
func (g *Gate) Overlay(ms []serf.Member) []serf.Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range ms {
		if _, ok := g.confirmed[ms[i].Name]; ms[i].Status == serf.StatusFailed && !ok {
			ms[i].Status = serf.StatusAlive
		}
	}
	return ms
}

// Pending is the number of withheld failures.
func (g *Gate) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// Close stops the checks; later failures pass through unconfirmed.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		close(g.stop)
	}
}

// memberAddr is m's gossip address as the transport keys it (IPv4
// unmapped).
func memberAddr(m serf.Member) (netip.AddrPort, bool) {
	ip, ok := netip.AddrFromSlice(m.Addr)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip.Unmap(), m.Port), true
}

// reviveInterval is how often one agent checks a confirmed-failed member:
// reviveEvery in small clusters; in larger ones each agent asks less often,
// so that the whole cluster sends about reviveFanout pings per reviveEvery
// to a dead member, whatever its size.
func reviveInterval(members int) time.Duration {
	return reviveEvery * time.Duration(max(1, members/reviveFanout))
}

// confirmPingsFor is how many direct pings one check sends in a cluster of
// n members: confirmPings in small clusters, fewer in larger ones, so that
// the burst a whole cluster sends toward one accused member, about
// n × confirmPingsFor(n) within the time a failure takes to spread, stays
// near confirmBurst instead of 3n (at least one ping per agent: at 1,000
// members 1,000 pings rather than 3,000). The burst matters when the
// member is alive (accused by stale suspicions after a heal): its socket
// buffer holds a few hundred packets, and a ping it drops is a check that
// fails. A member that is really down loses nothing: one unanswered ping
// after several round trips says as much as three. Only an ack carrying
// one of this agent's own sequence numbers answers (ownping.go): no other
// packet from the member, replayed or not, is a sign of life.
func confirmPingsFor(n int) int {
	return max(1, min(confirmPings, (confirmBurst+n-2)/max(1, n-1)))
}

// confirmWait is how long a confirmation waits for an answer: a multiple
// of the round trip to the member that serf's network coordinates estimate,
// within [confirmMinWait, max(probe timeout, confirmMaxWait)]. On a quiet
// LAN that is a few tens of milliseconds instead of the whole probe
// timeout; on a slow or loaded network the coordinates grow and the wait
// grows with them, past the probe timeout when the round trip nears it (the
// transport sees answers that memberlist's Ping gave up on). This is the
// per-member, RTT-adapted timeout memberlist's probes lack.
func confirmWait(rtt time.Duration, known bool, probeTimeout time.Duration) time.Duration {
	if !known {
		return probeTimeout
	}
	return min(max(confirmRTTMult*rtt+confirmMinWait/2, confirmMinWait), max(probeTimeout, confirmMaxWait))
}

// confirmPings direct pings are sent per check; confirmMaxHold bounds how
// long a member that answers is kept alive against gossip's verdict.
const (
	confirmPings   = 3
	confirmBurst   = 96
	confirmMaxHold = 10 * time.Second
	confirmRTTMult = 5
	confirmMinWait = 60 * time.Millisecond
	confirmMaxWait = time.Second

	// A member heard from within carefulRecent before its failure arrived
	// that misses the first check gets a second one of at least
	// carefulWait (see recentlyHeard).
	carefulRecent = 500 * time.Millisecond
	carefulWait   = 250 * time.Millisecond
	carefulFor    = 5 * time.Second

	// The second check is also given when another failure arrived or a
	// failed member came back within unrestWindow, when another member
	// was confirmed failed less than unrestConfirmed ago and still is, and
	// when memberlist's health score of this agent is at least
	// degradedHealth (see askAgain).
	unrestWindow    = time.Second
	unrestConfirmed = 30 * time.Second
	degradedHealth  = 4

	// A confirmed-failed member is pinged once every reviveInterval for
	// reviveFastFor, then at most every reviveSlowEvery, until it is back
	// or gone.
	reviveEvery     = 500 * time.Millisecond
	reviveFanout    = 16
	reviveFastFor   = 2 * time.Minute
	reviveSlowEvery = 5 * time.Second
	reviveJitter    = 300 * time.Millisecond

	// A member that comes back from a failure is followed, syncDelay
	// later, by one full state exchange with it and syncPeers other alive
	// members, and by one more syncLate after the comeback (see
	// scheduleSync).
	syncDelay = 2 * time.Second
	syncLate  = 10 * time.Second
	syncPeers = 2

	// pingsInFlight bounds the direct pings one agent has outstanding.
	pingsInFlight = 64
)

// scheduleSync runs one full state exchange (sync) syncDelay after a member
// this agent had failed comes back, at most one per syncDelay however many
// come back; mu is held.
//
// Why: a heal sets off a burst of refutations (the healed host's stale
// suspicions reach the others, who refute them with new incarnation
// numbers), each spread by gossip with a few transmissions only. A member
// that misses one keeps an older incarnation number for that member, and
// when that member fails later, its suspicions and its "dead" message carry
// the old number and the others ignore them: measured, with `lan` at 4
// hosts, in 3 of 20 link cuts right after a heal one or two survivors
// learned of the failure 8-11 s after the first, at their own maximum
// suspicion timeout (issue 27, finding 5). memberlist's own push/pull
// repairs that only every 30 s at `lan`; an exchange with the member that
// came back (it holds its own newest incarnation) and a couple of others
// once the burst is over repairs it at once, and a second one syncLate
// after the comeback catches the refutations that came later (seen in CI:
// one 9 s after the heal, and a survivor 8.5 s late at the next failure).
func (g *Gate) scheduleSync(back serf.Member, now time.Time) {
	if g.sync == nil || g.closed || now.Before(g.syncAt) {
		return
	}
	g.syncAt = now.Add(syncDelay)
	go func() {
		for _, wait := range []time.Duration{syncDelay, syncLate - syncDelay} {
			select {
			case <-g.stop:
				return
			case <-g.clock.After(wait):
			}
			g.Syncs.Add(1)
			g.sync(back)
		}
	}()
}
