package history

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// openRing returns a ring-only Log whose clock starts at t0 and moves one
// second per entry.
func openRing(t *testing.T, size int) *Log {
	t.Helper()
	l, err := Open(Config{Size: size}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.clock = tickingClock{clockwork.NewFakeClockAt(t0)}
	return l
}

// tickingClock is a fake clock that moves on one second each time it is
// read.
type tickingClock struct{ *clockwork.FakeClock }

func (c tickingClock) Now() time.Time {
	c.Advance(time.Second)
	return c.FakeClock.Now()
}

func seqs(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func TestAddSetsSeqAndTime(t *testing.T) {
	l := openRing(t, 10)
	e := l.Add(Entry{Kind: KindPool, Node: "db1", From: "reader", To: "out"})
	if e.Seq != 1 || !e.Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("Add = seq %d time %v, want 1 and the clock's time", e.Seq, e.Time)
	}
	given := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	e = l.Add(Entry{Kind: KindHealth, Time: given, Seq: 99})
	if e.Seq != 2 || !e.Time.Equal(given) {
		t.Fatalf("Add = seq %d time %v, want 2 (Seq overridden) and the given time", e.Seq, e.Time)
	}
}

func TestRingEviction(t *testing.T) {
	l := openRing(t, 3)
	if got := l.Query(Filter{}); got == nil || len(got) != 0 {
		t.Fatalf("empty Query = %#v, want an empty non-nil slice", got)
	}
	for i := 1; i <= 7; i++ {
		l.Add(Entry{Kind: KindPool, Node: fmt.Sprintf("db%d", i)})
		want := min(i, 3)
		if s := l.Stats(); s.Entries != want || s.Total != uint64(i) || s.Evicted != uint64(i-want) || s.Capacity != 3 {
			t.Fatalf("after %d adds Stats = %+v", i, s)
		}
	}
	got := l.Query(Filter{})
	if fmt.Sprint(seqs(got)) != "[5 6 7]" || got[0].Node != "db5" || got[2].Node != "db7" {
		t.Fatalf("Query = %v, want seqs 5 6 7 oldest first", got)
	}
	// Results are copies.
	got[0].Node = "changed"
	if l.Query(Filter{})[0].Node != "db5" {
		t.Fatal("changing a Query result changed the ring")
	}
}

func TestRingSizeOne(t *testing.T) {
	l := openRing(t, 1)
	l.Add(Entry{Node: "a"})
	l.Add(Entry{Node: "b"})
	if got := l.Query(Filter{}); len(got) != 1 || got[0].Node != "b" || got[0].Seq != 2 {
		t.Fatalf("Query = %+v", got)
	}
}

func TestQueryFilter(t *testing.T) {
	l := openRing(t, 100)
	// Times t0+1s … t0+8s.
	for _, e := range []Entry{
		{Kind: KindPool, Cluster: "c1", Node: "db1"},      // 1
		{Kind: KindHealth, Cluster: "c1", Node: "db1"},    // 2
		{Kind: KindPool, Cluster: "c2", Node: "db2"},      // 3
		{Kind: KindPool, Cluster: "c1", Node: "db2"},      // 4
		{Kind: KindIsolation},                             // 5
		{Kind: KindConflict, Cluster: "c1"},               // 6
		{Kind: KindPool, Cluster: "c1", Node: "db1"},      // 7
		{Kind: KindHealth, Cluster: "c2", Node: "db1.c2"}, // 8
	} {
		l.Add(e)
	}
	tests := []struct {
		name string
		f    Filter
		want string
	}{
		{"none", Filter{}, "[1 2 3 4 5 6 7 8]"},
		{"node", Filter{Node: "db1"}, "[1 2 7]"},
		{"node no prefix match", Filter{Node: "db"}, "[]"},
		{"cluster", Filter{Cluster: "c2"}, "[3 8]"},
		{"kind", Filter{Kind: KindPool}, "[1 3 4 7]"},
		{"kind isolation", Filter{Kind: KindIsolation}, "[5]"},
		{"since inclusive", Filter{Since: t0.Add(6 * time.Second)}, "[6 7 8]"},
		{"since after all", Filter{Since: t0.Add(time.Hour)}, "[]"},
		{"limit", Filter{Limit: 3}, "[6 7 8]"},
		{"limit more than all", Filter{Limit: 50}, "[1 2 3 4 5 6 7 8]"},
		{"limit negative", Filter{Limit: -1}, "[1 2 3 4 5 6 7 8]"},
		{"node and kind", Filter{Node: "db1", Kind: KindPool}, "[1 7]"},
		{"cluster and kind and since", Filter{Cluster: "c1", Kind: KindPool, Since: t0.Add(2 * time.Second)}, "[4 7]"},
		{"cluster and limit", Filter{Cluster: "c1", Limit: 2}, "[6 7]"},
		{"all fields", Filter{Node: "db1", Cluster: "c1", Kind: KindPool, Since: t0.Add(2 * time.Second), Limit: 1}, "[7]"},
		{"no match", Filter{Node: "db1", Cluster: "c2"}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(seqs(l.Query(tt.f))); got != tt.want {
				t.Errorf("Query(%+v) = %s, want %s", tt.f, got, tt.want)
			}
		})
	}
}

func TestQueryAfterWrap(t *testing.T) {
	l := openRing(t, 4)
	for i := range 10 {
		l.Add(Entry{Node: fmt.Sprintf("n%d", i%2)}) // seqs 1-10; odd seqs are n0
	}
	if got := fmt.Sprint(seqs(l.Query(Filter{Node: "n0"}))); got != "[7 9]" {
		t.Fatalf("Query = %s, want [7 9]", got)
	}
	if got := fmt.Sprint(seqs(l.Query(Filter{Limit: 2}))); got != "[9 10]" {
		t.Fatalf("Query = %s, want [9 10]", got)
	}
}

func TestConcurrent(t *testing.T) {
	const adders, each = 8, 200
	l, err := Open(Config{Size: 500, File: t.TempDir() + "/h.jsonl", MaxBytes: 16 << 10, Keep: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := l.Query(Filter{Limit: 50 + i})
				for j := 1; j < len(got); j++ {
					if got[j].Seq <= got[j-1].Seq {
						t.Errorf("Query out of order: %d after %d", got[j].Seq, got[j-1].Seq)
						return
					}
				}
				_ = l.Stats()
				time.Sleep(50 * time.Microsecond)
			}
		}()
	}
	var addWG sync.WaitGroup
	for i := range adders {
		addWG.Add(1)
		go func() {
			defer addWG.Done()
			for j := range each {
				l.Add(Entry{Kind: KindHealth, Node: fmt.Sprintf("db%d", i), From: "ok", To: fmt.Sprint(j)})
			}
		}()
	}
	addWG.Wait()
	close(stop)
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := l.Stats()
	if s.Total != adders*each || s.Entries != 500 || s.Evicted != adders*each-500 || s.FileErrors != 0 || s.Rotations == 0 {
		t.Fatalf("Stats = %+v", s)
	}
	got := l.Query(Filter{})
	for i, e := range got {
		if e.Seq != uint64(adders*each-500+i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	// The current file holds lines in Seq order, ending with the last.
	lines := readLines(t, l.file.path)
	for i := 1; i < len(lines); i++ {
		if lines[i].Seq != lines[i-1].Seq+1 {
			t.Fatalf("file line %d: seq %d after %d", i, lines[i].Seq, lines[i-1].Seq)
		}
	}
	if last := lines[len(lines)-1].Seq; last != adders*each {
		t.Fatalf("last line seq %d, want %d", last, adders*each)
	}
}

func TestParseKind(t *testing.T) {
	for _, k := range []string{"", "pool", "health", "conflict", "term", "isolation", "maint"} {
		if got, err := ParseKind(k); err != nil || string(got) != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	for _, k := range []string{"bogus", "maintenance", "Pool", " pool"} {
		_, err := ParseKind(k)
		if err == nil || !strings.Contains(err.Error(), "want one of pool, health, conflict, term, isolation, maint") {
			t.Errorf("ParseKind(%q) = %v; want an error listing the kinds", k, err)
		}
	}
}
