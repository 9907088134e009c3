package hooks

import (
	"container/list"
	"slices"

	"github.com/hashicorp/serf/serf"
)

// Event classes, as in HandlerStats.DroppedByClass and the class label of
// shoal_hook_dropped_total.
const (
	ClassMember = "member" // member-join, -leave, -failed, -update, -reap
	ClassShoal  = "shoal"  // pool-change, health-change
	ClassUser   = "user"   // user events
	ClassQuery  = "query"  // queries
)

// Classes returns the event classes, state classes first.
func Classes() []string { return []string{ClassMember, ClassShoal, ClassUser, ClassQuery} }

// queue is a handler's bounded queue, in two parts of limit events each:
//
//   - state: member, pool-change and health-change events, which describe
//     the cluster's state. They always run first, in arrival order.
//   - bulk: user events and queries, which anyone holding the gossip key
//     can send at will. They run, in arrival order, only when no state
//     event waits; when the part is full its oldest event is dropped.
//
// A full state part first makes room by coalescing: an incoming event
// supersedes the queued state of the same member (member events) or the
// queued event of the same type (pool-change, health-change), so that the
// newest state of each wins. Only when that frees nothing is the oldest
// state event dropped. A flood of user events or queries can therefore
// neither drop nor delay a member event.
type queue struct {
	limit int // of each part

	state *list.List                 // of *item, oldest first
	keys  map[string][]*list.Element // stateKey → elements holding it, oldest first
	bulk  []*item                    // oldest first

	high int // most events ever held by one part
}

// drop is an event that left the queue without running.
type drop struct {
	it     *item
	reason string // DropQueueFull or DropSuperseded
}

// pushResult is what push removed to make room.
type pushResult struct {
	drops []drop
	// coalesced counts member entries removed from queued events that
	// stayed queued for their other members.
	coalesced int
}

func newQueue(limit int) *queue {
	return &queue{limit: limit, state: list.New(), keys: map[string][]*list.Element{}}
}

// push appends it to its part, making room as the type documents.
func (q *queue) push(it *item) (res pushResult) {
	if !it.isState() {
		if len(q.bulk) >= q.limit {
			res.drops = append(res.drops, drop{q.bulk[0], DropQueueFull})
			q.bulk[0] = nil
			q.bulk = q.bulk[1:]
		}
		q.bulk = append(q.bulk, it)
		q.high = max(q.high, len(q.bulk))
		return res
	}
	if q.state.Len() >= q.limit {
		q.supersede(it, &res)
	}
	if q.state.Len() >= q.limit {
		e := q.state.Front()
		q.remove(e)
		res.drops = append(res.drops, drop{e.Value.(*item), DropQueueFull})
	}
	e := q.state.PushBack(it)
	for _, k := range stateKeys(it) {
		q.keys[k] = append(q.keys[k], e)
	}
	q.high = max(q.high, q.state.Len())
	return res
}

// supersede removes the queued state that it replaces: the entries of its
// members (member events) or the events of its type (shoal events).
func (q *queue) supersede(it *item, res *pushResult) {
	if it.shoal != nil {
		for _, e := range slices.Clone(q.keys[stateKey(it, "")]) {
			q.remove(e)
			res.drops = append(res.drops, drop{e.Value.(*item), DropSuperseded})
		}
		return
	}
	for _, m := range it.member.Members {
		k := stateKey(it, m.Name)
		for _, e := range slices.Clone(q.keys[k]) {
			old := e.Value.(*item)
			rest := withoutMember(old.member, m.Name)
			if len(rest.Members) == 0 {
				q.remove(e)
				res.drops = append(res.drops, drop{old, DropSuperseded})
				continue
			}
			// Items are shared between handlers: replace, never modify.
			e.Value = &item{typ: old.typ, member: rest}
			res.coalesced += len(old.member.Members) - len(rest.Members)
		}
		delete(q.keys, k)
	}
}

// remove takes e out of the state part and its index.
func (q *queue) remove(e *list.Element) {
	for _, k := range stateKeys(e.Value.(*item)) {
		es := q.keys[k]
		if i := slices.Index(es, e); i >= 0 {
			es = slices.Delete(es, i, i+1)
		}
		if len(es) == 0 {
			delete(q.keys, k)
		} else {
			q.keys[k] = es
		}
	}
	q.state.Remove(e)
}

// pop removes and returns the next event to run: the oldest state event,
// else the oldest user event or query, else nil.
func (q *queue) pop() *item {
	if e := q.state.Front(); e != nil {
		q.remove(e)
		return e.Value.(*item)
	}
	if len(q.bulk) == 0 {
		return nil
	}
	it := q.bulk[0]
	q.bulk[0] = nil
	q.bulk = q.bulk[1:]
	return it
}

// drain empties the queue and returns what it held, in run order.
func (q *queue) drain() []*item {
	items := make([]*item, 0, q.len())
	for e := q.state.Front(); e != nil; e = e.Next() {
		items = append(items, e.Value.(*item))
	}
	items = append(items, q.bulk...)
	q.state.Init()
	clear(q.keys)
	q.bulk = nil
	return items
}

func (q *queue) len() int { return q.state.Len() + len(q.bulk) }

// stateKey identifies what a state event describes: one member's state, or
// the pool or the local health.
func stateKey(it *item, member string) string {
	if it.shoal != nil {
		return "s:" + it.typ
	}
	return "m:" + member
}

// stateKeys returns the distinct keys of a state event.
func stateKeys(it *item) []string {
	if it.shoal != nil {
		return []string{stateKey(it, "")}
	}
	keys := make([]string, 0, len(it.member.Members))
	seen := make(map[string]bool, len(it.member.Members))
	for _, m := range it.member.Members {
		if k := stateKey(it, m.Name); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// withoutMember returns a copy of e without the member named name.
func withoutMember(e *serf.MemberEvent, name string) *serf.MemberEvent {
	out := &serf.MemberEvent{Type: e.Type, Members: make([]serf.Member, 0, len(e.Members))}
	for _, m := range e.Members {
		if m.Name != name {
			out.Members = append(out.Members, m)
		}
	}
	return out
}
