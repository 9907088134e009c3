package gossip

import (
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// SerfGateConfig is what a gate on a live serf needs besides serf itself.
type SerfGateConfig struct {
	// Serf returns the serf instance. It is called only from the gate's
	// checks, which start with the first event, so after serf runs.
	Serf       func() *serf.Serf
	Transport  *Transport         // own pings, watches and last-heard times; required
	Memberlist *memberlist.Config // probe interval and timeout, keyring and label
	Emit       func(serf.Event)   // downstream, as GateConfig.Emit
	Log        *slog.Logger
}

// NewSerfGate returns the failure gate of an agent: its pings are own pings
// from the transport's socket (ownping.go; at most pingsInFlight
// outstanding), answered only by acks with their sequence numbers; waits
// follow serf's network coordinates (confirmWait), a member that answers
// again after its failure was confirmed is rejoined through serf, and the
// transport says when a member was last heard from (a hint for the second
// check and the revival watch, never an answer).
func NewSerfGate(c SerfGateConfig) *Gate {
	tr, probeTimeout := c.Transport, c.Memberlist.ProbeTimeout
	var (
		pgOnce sync.Once
		pg     *pinger
		g      *Gate // set before the first check
	)
	getPinger := func() *pinger {
		pgOnce.Do(func() {
			pg = newSerfPinger(c.Serf, tr, c.Memberlist, pingsInFlight)
			pg.sent = func(confirm bool) {
				if confirm {
					g.ConfirmPings.Add(1)
				} else {
					g.RevivePings.Add(1)
				}
			}
		})
		return pg
	}
	waitFor := func(name string) time.Duration {
		rtt, known := rttTo(c.Serf(), name)
		return confirmWait(rtt, known, probeTimeout)
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g = NewGate(GateConfig{
		Ping: func(m serf.Member) bool {
			return getPinger().ping(m, confirmPingsFor(c.Serf().NumNodes()), waitFor(m.Name), true)
		},
		Emit:  c.Emit,
		Retry: c.Memberlist.ProbeInterval, MaxHold: confirmMaxHold, Log: log,
		PingCareful: func(m serf.Member) bool {
			return getPinger().ping(m, confirmPingsFor(c.Serf().NumNodes()), max(waitFor(m.Name), carefulWait), true)
		},
		Heard: func(m serf.Member) (<-chan struct{}, func()) {
			ap, ok := memberAddr(m)
			if !ok {
				return nil, func() {}
			}
			return tr.Watch(ap)
		},
		HeardSince: func(m serf.Member) (time.Duration, bool) {
			ap, ok := memberAddr(m)
			if !ok {
				return 0, false
			}
			return tr.HeardSince(ap)
		},
		RevivePing: func(m serf.Member) bool {
			return getPinger().ping(m, 1, waitFor(m.Name), false)
		},
		Size:        func() int { return c.Serf().NumNodes() },
		Health:      func() int { return c.Serf().Memberlist().GetHealthScore() },
		ReviveEvery: func() time.Duration { return reviveInterval(c.Serf().Memberlist().NumMembers()) },
		Sync: func(back serf.Member) {
			s := c.Serf()
			self := s.LocalMember().Name
			var addrs []string
			var backAddr string
			for _, m := range s.Members() {
				addr := net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
				switch {
				case m.Status != serf.StatusAlive || m.Name == self:
				case m.Name == back.Name:
					backAddr = addr
				default:
					addrs = append(addrs, addr)
				}
			}
			rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
			if len(addrs) > syncPeers {
				addrs = addrs[:syncPeers]
			}
			if backAddr != "" {
				// It holds its own newest incarnation.
				addrs = append([]string{backAddr}, addrs...)
			}
			if len(addrs) == 0 {
				return
			}
			// A join to members already known is a full state exchange
			// with each (memberlist's push/pull), nothing more.
			if _, err := s.Join(addrs, true); err != nil {
				log.Debug("state exchange after a member came back", "peers", addrs, "err", err)
			}
		},
		Rejoin: func(m serf.Member) {
			addr := net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
			if _, err := c.Serf().Join([]string{addr}, false); err != nil {
				log.Debug("rejoin a member that answers again", "member", m.Name, "addr", addr, "err", err)
			}
		},
	})
	return g
}

// rttSamples bounds the members rttTo looks at when name has no coordinate.
const rttSamples = 16

// rttTo is the round trip to name by serf's network coordinates. serf
// caches a member's coordinate only from this agent's own probes of it, so
// a member it has not probed yet (just joined, or just restarted) has none;
// then the median round trip to up to rttSamples members that have one
// stands for it (on one network they are alike), rather than the whole
// probe timeout: measured, a survivor without the dead member's coordinate
// acted on a crash about 0.44 s after the others at `lan` (its wait was the
// 500 ms probe timeout instead of 60 ms). false when nothing is known.
func rttTo(s *serf.Serf, name string) (time.Duration, bool) {
	me, err := s.GetCoordinate()
	if err != nil {
		return 0, false
	}
	if them, ok := s.GetCachedCoordinate(name); ok {
		return me.DistanceTo(them), true
	}
	var rtts []time.Duration
	for _, m := range s.Members() {
		if len(rtts) == rttSamples {
			break
		}
		if m.Name == name || m.Status != serf.StatusAlive {
			continue
		}
		if them, ok := s.GetCachedCoordinate(m.Name); ok && m.Name != s.LocalMember().Name {
			rtts = append(rtts, me.DistanceTo(them))
		}
	}
	if len(rtts) == 0 {
		return 0, false
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], true
}
