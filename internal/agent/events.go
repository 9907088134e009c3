package agent

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/serf/serf"
)

// eventHub fans serf events out to subscribers without ever blocking serf's
// event loop: each subscriber has a bounded buffer, and events that do not
// fit are dropped and counted.
type eventHub struct {
	// mu guards: subs
	mu      sync.Mutex
	subs    map[*Subscription]struct{}
	dropped atomic.Uint64
	onEvent func(serf.Event) // called inline first; must not block
}

// Subscription receives serf events on C until Close.
type Subscription struct {
	C       <-chan serf.Event
	c       chan serf.Event
	hub     *eventHub
	Dropped atomic.Uint64
}

func newEventHub() *eventHub { return &eventHub{subs: map[*Subscription]struct{}{}} }

// HandleEvent implements serf's agent.EventHandler.
func (h *eventHub) HandleEvent(e serf.Event) {
	if h.onEvent != nil {
		h.onEvent(e)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.c <- e:
		default:
			s.Dropped.Add(1)
			h.dropped.Add(1)
		}
	}
}

func (h *eventHub) subscribe(buf int) *Subscription {
	c := make(chan serf.Event, buf)
	s := &Subscription{C: c, c: c, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Close stops delivery. It is safe to call more than once.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
}
