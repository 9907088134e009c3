package hooks

import "slices"

// queue is a handler's bounded FIFO. When it is full, push makes room by
// dropping the oldest member event; user events, queries and shoal events
// are only dropped (oldest first) when no member event can be.
type queue struct {
	items   []*item
	limit   int
	members int // member events in items
	high    int // most items ever held
}

// push appends it. When the queue is full it drops one item (possibly it)
// and returns it.
func (q *queue) push(it *item) (dropped *item) {
	if len(q.items) >= q.limit {
		switch {
		case q.members > 0:
			i := slices.IndexFunc(q.items, (*item).isMember)
			dropped = q.items[i]
			q.items = slices.Delete(q.items, i, i+1)
			q.members--
		case it.isMember():
			return it
		default:
			dropped = q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
		}
	}
	q.items = append(q.items, it)
	if it.isMember() {
		q.members++
	}
	q.high = max(q.high, len(q.items))
	return dropped
}

// pop removes and returns the oldest item, or nil.
func (q *queue) pop() *item {
	if len(q.items) == 0 {
		return nil
	}
	it := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	if it.isMember() {
		q.members--
	}
	return it
}

// drain empties the queue and returns what it held.
func (q *queue) drain() []*item {
	items := q.items
	q.items = nil
	q.members = 0
	return items
}

func (q *queue) len() int { return len(q.items) }
