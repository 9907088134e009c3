package consensus

import (
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// peerContact follows, on the leader, which voters answer its heartbeats:
// raft reports a failing peer with its last contact and a peer that
// answers again, through observations.
type peerContact struct {
	ch   chan raft.Observation
	done chan struct{}
	once sync.Once

	mu      sync.Mutex // guards failing and leader
	failing map[string]time.Time
	leader  string
}

func newPeerContact() *peerContact {
	return &peerContact{ch: make(chan raft.Observation, 64), done: make(chan struct{}), failing: map[string]time.Time{}}
}

func (p *peerContact) run() {
	for {
		select {
		case <-p.done:
			return
		case o := <-p.ch:
			p.observe(o)
		}
	}
}

func (p *peerContact) observe(o raft.Observation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		p.failing[string(d.PeerID)] = d.LastContact
	case raft.ResumedHeartbeatObservation:
		delete(p.failing, string(d.PeerID))
	case raft.PeerObservation:
		if d.Removed {
			delete(p.failing, string(d.Peer.ID))
		}
	case raft.LeaderObservation:
		if string(d.LeaderID) != p.leader {
			p.leader = string(d.LeaderID)
			clear(p.failing) // another leader: its heartbeats start anew
		}
	}
}

// Failing returns the peers whose heartbeats fail, with their last contact.
func (p *peerContact) Failing() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.failing)
}

func (p *peerContact) stop() { p.once.Do(func() { close(p.done) }) }
