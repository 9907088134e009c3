package pool

import (
	"reflect"
	"testing"

	"github.com/shoaldb/shoal/internal/tags"
)

func TestDiff(t *testing.T) {
	policy := Policy{WriterServesReads: true}
	old := Compute([]Member{
		writer("a"), replica("b", 0), replica("c", 20), replica("d", 0), replica("e", 30),
		replica("m", 0, cluster("s1")), member("app", tags.RoleApp),
	}, policy, nil)
	next := Compute([]Member{
		writer("a", status(StatusFailed)), writer("b"), replica("c", 25),
		dbh("e", tags.Health{State: tags.Critical, ReadOnly: true, Reason: "conn-refused"}),
		replica("m", 0, cluster("s2")), replica("n", 0), member("app", tags.RoleApp),
	}, policy, old)
	got := Diff(old, next)
	want := []Change{
		{Cluster: "default", Node: "a", Addr: "a:3306", From: RoleWriterReader, To: RoleOut, Reason: ReasonAgentFailed, Detail: "serf status failed"},
		{Cluster: "default", Node: "b", Addr: "b:3306", From: RoleReader, To: RoleWriterReader},
		// c stays out for lag: only its detail changed, so no change.
		{Cluster: "default", Node: "d", Addr: "d:3306", From: RoleReader, To: RoleNone},
		{Cluster: "default", Node: "e", Addr: "e:3306", From: RoleOut, To: RoleOut, Reason: ReasonCritical, Detail: "conn-refused"},
		{Cluster: "default", Node: "n", Addr: "n:3306", From: RoleNone, To: RoleReader},
		{Cluster: "s1", Node: "m", Addr: "m:3306", From: RoleReader, To: RoleNone},
		{Cluster: "s2", Node: "m", Addr: "m:3306", From: RoleNone, To: RoleReader},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got %+v\nwant %+v", got, want)
	}
	if d := Diff(next, next); d != nil {
		t.Fatalf("Diff of a pool with itself = %+v", d)
	}
	// The writer reading in place of stale readers says why.
	fb := Policy{MinReaders: 1, ReadFallback: ReadFallbackWriter}
	healthy := Compute([]Member{writer("a"), replica("b", 0)}, fb, nil)
	stale := Compute([]Member{writer("a"), replica("b", 50)}, fb, healthy)
	wantFB := []Change{
		{Cluster: "default", Node: "a", Addr: "a:3306", From: RoleWriter, To: RoleWriterReader, Reason: ReasonFallback,
			Detail: "the writer serves reads instead of stale readers: b (lag)"},
		{Cluster: "default", Node: "b", Addr: "b:3306", From: RoleReader, To: RoleOut, Reason: ReasonLag, Detail: "lag 50s > max 10s"},
	}
	if got := Diff(healthy, stale); !reflect.DeepEqual(got, wantFB) {
		t.Fatalf("fallback:\n got %+v\nwant %+v", got, wantFB)
	}
	if got := Diff(stale, healthy); len(got) != 2 || got[0].To != RoleWriter || got[0].Reason != ReasonNone {
		t.Fatalf("fallback ends: %+v", got)
	}
	if d := Diff(nil, nil); d != nil {
		t.Fatalf("Diff(nil, nil) = %+v", d)
	}
	if d := Diff(nil, Compute([]Member{writer("a")}, Policy{}, nil)); len(d) != 1 || d[0].From != RoleNone || d[0].To != RoleWriter {
		t.Fatalf("Diff from nil = %+v", d)
	}
}
