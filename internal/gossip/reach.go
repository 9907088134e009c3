package gossip

import (
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
)

// Reach answers the question isolation asks (pool/isolation.go): can this
// agent still reach the fleet? A round pings the members it is given, all
// at once, with this agent's own pings, and records which answered. Then,
// when some answered and some did not, it asks up to relayVia of those that
// answered to ping the others for it (memberlist's indirect ping, which
// every agent answers), and records which answered them. One round runs at
// a time; a Probe while one runs is dropped (the router asks again). It
// implements routing.Reacher.
type Reach struct {
	members func() []serf.Member
	ping    func(serf.Member) bool
	relay   func(via, target serf.Member) bool
	pick    func(n int) int
	done    func()
	log     *slog.Logger
	clock   clockwork.Clock

	mu      sync.Mutex
	running bool
	latest  pool.ReachRound
	closed  bool

	// Rounds counts the rounds run, Pings the members pinged, Relays the
	// pings asked of a peer, Dropped the probes asked while a round ran.
	Rounds, Pings, Relays, Dropped atomic.Uint64
}

// relayVia is how many of the members that answered a round are asked to
// ping, for this agent, the members that did not.
const relayVia = 3

// ReachConfig is what a Reach needs; Members and Ping are required.
type ReachConfig struct {
	Members func() []serf.Member   // the members, to find each name's address
	Ping    func(serf.Member) bool // one check of a member: true when it answered
	// Relay, when set, asks via to check target for this agent: true when
	// target answered via.
	Relay func(via, target serf.Member) bool
	Pick  func(n int) int // picks the peers asked to relay; nil: at random
	Done  func()          // called after each round (the router's Trigger)
	Log   *slog.Logger
	Clock clockwork.Clock // nil: the real clock
}

// NewReach returns a Reach.
func NewReach(c ReachConfig) *Reach {
	r := &Reach{members: c.Members, ping: c.Ping, relay: c.Relay, pick: c.Pick, done: c.Done, log: c.Log, clock: c.Clock}
	if r.pick == nil {
		r.pick = rand.IntN
	}
	if r.clock == nil {
		r.clock = clockwork.NewRealClock()
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.done == nil {
		r.done = func() {}
	}
	return r
}

// Probe starts a round that pings the named members (unknown names are
// reported as not answering) and reports true, unless a round is running
// or the Reach is closed. It never blocks.
func (r *Reach) Probe(names []string) bool {
	r.mu.Lock()
	if r.running || r.closed {
		r.mu.Unlock()
		r.Dropped.Add(1)
		return false
	}
	r.running = true
	r.mu.Unlock()
	go r.round(names)
	return true
}

// Latest returns the latest finished round.
func (r *Reach) Latest() pool.ReachRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

// Close stops new rounds; a running one finishes on its own (its pings are
// bounded by their waits).
func (r *Reach) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func (r *Reach) round(names []string) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("reachability round panicked", "panic", p)
			r.mu.Lock()
			r.running = false
			r.mu.Unlock()
		}
	}()
	started := r.clock.Now()
	byName := map[string]serf.Member{}
	for _, m := range r.members() {
		byName[m.Name] = m
	}
	answered := make(map[string]bool, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		m, ok := byName[n]
		if !ok {
			mu.Lock()
			answered[n] = false
			mu.Unlock()
			continue
		}
		wg.Add(1)
		r.Pings.Add(1)
		go func() {
			defer wg.Done()
			ok := r.ping(m)
			mu.Lock()
			answered[m.Name] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	relayed := r.relayRound(byName, answered)
	r.Rounds.Add(1)
	r.mu.Lock()
	r.latest = pool.ReachRound{Started: started, Finished: r.clock.Now(), Answered: answered, Relayed: relayed}
	r.running = false
	r.mu.Unlock()
	r.done()
}

// relayRound asks up to relayVia of the members that answered to ping, for
// this agent, those that did not, all at once, and returns which answered
// one of them (nil when nothing was asked).
func (r *Reach) relayRound(byName map[string]serf.Member, answered map[string]bool) map[string]bool {
	if r.relay == nil {
		return nil
	}
	var vias, targets []serf.Member
	for _, n := range slices.Sorted(maps.Keys(answered)) {
		m, known := byName[n]
		switch {
		case !known:
		case answered[n]:
			vias = append(vias, m)
		default:
			targets = append(targets, m)
		}
	}
	for len(vias) > relayVia {
		i := r.pick(len(vias))
		vias = append(vias[:i], vias[i+1:]...)
	}
	if len(vias) == 0 || len(targets) == 0 {
		return nil
	}
	relayed := make(map[string]bool, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		for _, v := range vias {
			wg.Add(1)
			r.Relays.Add(1)
			go func() {
				defer wg.Done()
				ok := r.relay(v, t)
				mu.Lock()
				relayed[t.Name] = relayed[t.Name] || ok
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return relayed
}

// SerfReachConfig is what a Reach on a live serf needs.
type SerfReachConfig struct {
	Serf       func() *serf.Serf // called only from rounds, which start after serf runs
	Transport  func() *Transport // own pings; called only from rounds, like Serf
	Memberlist *memberlist.Config
	Done       func()
	Log        *slog.Logger
}

// reachPings is how many pings a round sends each member at once: one lost
// packet must not make a member look unreachable.
const reachPings = 2

// NewSerfReach returns the Reach of an agent: own pings (ownping.go) from
// its gossip transport, each waiting as the failure gate's first check does
// (confirmWait: a few round trips by serf's coordinates, at least 60 ms). A
// round ends as soon as every member answered, so when the fleet is there it
// takes one round trip; only members that do not answer cost the wait.
func NewSerfReach(c SerfReachConfig) *Reach {
	var (
		once sync.Once
		pg   *pinger
	)
	probeTimeout := c.Memberlist.ProbeTimeout
	pinger := func() *pinger {
		once.Do(func() { pg = newSerfPinger(c.Serf, c.Transport(), c.Memberlist, pingsInFlight) })
		return pg
	}
	return NewReach(ReachConfig{
		Members: func() []serf.Member { return c.Serf().Members() },
		Ping: func(m serf.Member) bool {
			rtt, known := rttTo(c.Serf(), m.Name)
			return pinger().ping(m, reachPings, confirmWait(rtt, known, probeTimeout), true)
		},
		Relay: func(via, target serf.Member) bool {
			// via pings target as its own probes do, and nacks after its
			// probe timeout; target's answer comes back through via.
			rtt, known := rttTo(c.Serf(), via.Name)
			return pinger().pingVia(via, target, reachPings, confirmWait(rtt, known, probeTimeout)+probeTimeout, true)
		},
		Done: c.Done,
		Log:  c.Log,
	})
}
