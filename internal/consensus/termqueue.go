package consensus

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/shoaldb/shoal/internal/pool"
)

// TermQueue hands the terms raft applies (Config.OnApply, NewFSM's
// onApply) from raft's apply goroutine to a worker of the caller's, which
// may block and do I/O: Put never blocks, and keeps only the newest term
// of each cluster until the worker takes it (a term that a newer one
// replaced before it was taken is never delivered: the newer one says
// more). It holds at most one term per cluster, and at most maxClusters
// clusters, as the FSM. Safe for concurrent use.
//
//	q := consensus.NewTermQueue()
//	cfg.OnApply = q.Put
//	go func() {
//		for {
//			select {
//			case <-ctx.Done():
//				return
//			case <-q.Ready():
//				for _, t := range q.Take() {
//					save(t)
//				}
//			}
//		}
//	}()
type TermQueue struct {
	mu      sync.Mutex // guards pending
	pending map[string]pool.Term
	ready   chan struct{} // holds a signal while pending is not empty
}

// NewTermQueue returns an empty queue.
func NewTermQueue() *TermQueue {
	return &TermQueue{pending: map[string]pool.Term{}, ready: make(chan struct{}, 1)}
}

// Put queues t, unless a newer term of its cluster is queued already; it
// never blocks.
func (q *TermQueue) Put(t pool.Term) {
	q.mu.Lock()
	cur, ok := q.pending[t.Cluster]
	switch {
	case ok && cur.Number > t.Number:
	case !ok && len(q.pending) >= maxClusters: // the FSM holds no more
	default:
		q.pending[t.Cluster] = t
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default: // a signal is pending already
	}
}

// Ready fires when terms may be queued; Take them then.
func (q *TermQueue) Ready() <-chan struct{} { return q.ready }

// Take returns the queued terms, by cluster, and empties the queue.
func (q *TermQueue) Take() []pool.Term {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil
	}
	out := slices.SortedFunc(maps.Values(q.pending), func(a, b pool.Term) int { return strings.Compare(a.Cluster, b.Cluster) })
	clear(q.pending)
	return out
}

// Len is the number of terms queued.
func (q *TermQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}
