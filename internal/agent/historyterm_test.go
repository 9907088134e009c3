package agent

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/routing"
)

// The history records each change of the writer term a cluster's writer
// rule follows, with the new term's why; a recompute under the same term
// (or none required) records nothing.
func TestHistoryRecordsTermChanges(t *testing.T) {
	hist, err := history.Open(history.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{rep: reporters{hist: hist}}
	listen := a.poolParts([]poolPart{{"history", a.recordPool}})
	t0 := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	term := func(n uint64, writer, why string) *pool.Term {
		return &pool.Term{Cluster: "main", Number: n, Writer: writer, Addr: writer + ":3306", Why: why}
	}
	for i, p := range []*pool.Pool{
		{Clusters: []pool.Cluster{{Name: "main", Term: &pool.Term{Cluster: "main"}}, {Name: "plain"}}},
		{Clusters: []pool.Cluster{{Name: "main", Term: term(3, "dbp", "first term: the only writable server")}, {Name: "plain"}}},
		{Clusters: []pool.Cluster{{Name: "main", Term: term(3, "dbp", "first term: the only writable server")}, {Name: "plain"}}},
		{Clusters: []pool.Cluster{{Name: "main", Term: term(4, "dbr", "dbp was the writer (term 3) and is read-only")}, {Name: "plain"}}},
		{Clusters: []pool.Cluster{{Name: "main"}, {Name: "plain"}}},
	} {
		listen(routing.Update{At: t0.Add(time.Duration(i) * time.Second), Pool: p, Routed: p})
	}
	got := hist.Query(history.Filter{Kind: history.KindTerm})
	want := []history.Entry{
		{Kind: history.KindTerm, Cluster: "main", From: "not required", To: "none known"},
		{Kind: history.KindTerm, Cluster: "main", From: "none known", To: "3 (dbp)", Detail: "first term: the only writable server"},
		{Kind: history.KindTerm, Cluster: "main", From: "3 (dbp)", To: "4 (dbr)", Detail: "dbp was the writer (term 3) and is read-only"},
		{Kind: history.KindTerm, Cluster: "main", From: "4 (dbr)", To: "not required"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d term entries, want %d: %+v", len(got), len(want), got)
	}
	for i, e := range got {
		e.Seq, e.Time = 0, time.Time{}
		if e != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, e, want[i])
		}
	}
	if n := len(hist.Query(history.Filter{})); n != len(want) {
		t.Errorf("%d entries in all, want only the %d term entries", n, len(want))
	}
}
