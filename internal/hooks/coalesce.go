package hooks

import (
	"slices"
	"strings"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"
)

// coalescer merges member events like Serf's memberEventCoalescer: for each
// member only its latest event is kept, and on flush a member whose latest
// event repeats the one last delivered for it is left out, unless it is an
// update. The handler owns the timers (coalesce and quiescent periods).
type coalescer struct {
	latest map[string]coalesced      // member name → latest event
	last   map[string]serf.EventType // member name → last delivered event
	gen    uint64                    // bumped on every flush; stale timers check it

	quantum, quiescent clockwork.Timer // coalesce and quiescent periods
}

type coalesced struct {
	typ    serf.EventType
	member serf.Member
}

func newCoalescer() *coalescer {
	return &coalescer{latest: map[string]coalesced{}, last: map[string]serf.EventType{}}
}

// add records e and returns how many earlier entries it replaced.
func (c *coalescer) add(e *serf.MemberEvent) (replaced int) {
	for _, m := range e.Members {
		if _, ok := c.latest[m.Name]; ok {
			replaced++
		}
		c.latest[m.Name] = coalesced{typ: e.Type, member: m}
	}
	return replaced
}

// stopTimers stops and forgets both timers.
func (c *coalescer) stopTimers() {
	for _, t := range []clockwork.Timer{c.quantum, c.quiescent} {
		if t != nil {
			t.Stop()
		}
	}
	c.quantum, c.quiescent = nil, nil
}

// pending reports whether anything waits for a flush.
func (c *coalescer) pending() bool { return len(c.latest) > 0 }

// flush returns the merged events, one per event type in type order with
// members sorted by name, and how many members were left out as repeats.
func (c *coalescer) flush() (events []serf.MemberEvent, repeats int) {
	c.stopTimers()
	c.gen++

	byType := map[serf.EventType]*serf.MemberEvent{}
	for name, ce := range c.latest {
		if prev, ok := c.last[name]; ok && prev == ce.typ && ce.typ != serf.EventMemberUpdate {
			repeats++
			continue
		}
		c.last[name] = ce.typ
		e := byType[ce.typ]
		if e == nil {
			e = &serf.MemberEvent{Type: ce.typ}
			byType[ce.typ] = e
		}
		e.Members = append(e.Members, ce.member)
	}
	clear(c.latest)
	for _, t := range []serf.EventType{serf.EventMemberJoin, serf.EventMemberLeave, serf.EventMemberFailed, serf.EventMemberUpdate, serf.EventMemberReap} {
		if e := byType[t]; e != nil {
			slices.SortFunc(e.Members, func(a, b serf.Member) int { return strings.Compare(a.Name, b.Name) })
			events = append(events, *e)
		}
	}
	return events, repeats
}
