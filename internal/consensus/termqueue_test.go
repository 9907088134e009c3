package consensus

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

func TestTermQueueCoalesces(t *testing.T) {
	q := NewTermQueue()
	if got := q.Take(); got != nil {
		t.Fatalf("empty queue: Take = %v", got)
	}
	// Put never blocks, without a worker.
	for n := uint64(1); n <= 1000; n++ {
		q.Put(pool.Term{Cluster: "b", Number: n, Writer: fmt.Sprint("db", n)})
	}
	q.Put(pool.Term{Cluster: "a", Number: 7})
	q.Put(pool.Term{Cluster: "b", Number: 3}) // older than the queued one: dropped
	select {
	case <-q.Ready():
	default:
		t.Fatal("Ready did not fire with terms queued")
	}
	got := q.Take()
	if len(got) != 2 || got[0].Cluster != "a" || got[0].Number != 7 || got[1].Cluster != "b" || got[1].Number != 1000 || got[1].Writer != "db1000" {
		t.Fatalf("Take = %+v, want a's term 7 and b's 1000", got)
	}
	if q.Len() != 0 || q.Take() != nil {
		t.Fatalf("queue not emptied by Take: %d left", q.Len())
	}
	// A term put after a Take is delivered, with a new signal.
	q.Put(pool.Term{Cluster: "b", Number: 1001})
	select {
	case <-q.Ready():
	case <-time.After(time.Second):
		t.Fatal("Ready did not fire for a term put after a Take")
	}
	if got := q.Take(); len(got) != 1 || got[0].Number != 1001 {
		t.Fatalf("Take = %+v, want b's term 1001", got)
	}
}

func TestTermQueueBounded(t *testing.T) {
	q := NewTermQueue()
	for i := range maxClusters + 10 {
		q.Put(pool.Term{Cluster: fmt.Sprint("c", i), Number: 1})
	}
	if q.Len() != maxClusters {
		t.Fatalf("Len = %d, want at most %d", q.Len(), maxClusters)
	}
	q.Put(pool.Term{Cluster: "c0", Number: 2}) // a queued cluster still moves on
	for _, tm := range q.Take() {
		if tm.Cluster == "c0" && tm.Number != 2 {
			t.Fatalf("c0 = %d, want 2", tm.Number)
		}
	}
}
