package gossip

import (
	"log/slog"
	"net"
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
		s := c.Serf()
		rtt, known := time.Duration(0), false
		if me, err := s.GetCoordinate(); err == nil {
			if them, ok := s.GetCachedCoordinate(name); ok {
				rtt, known = me.DistanceTo(them), true
			}
		}
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
		Rejoin: func(m serf.Member) {
			addr := net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
			if _, err := c.Serf().Join([]string{addr}, false); err != nil {
				log.Debug("rejoin a member that answers again", "member", m.Name, "addr", addr, "err", err)
			}
		},
	})
	return g
}
