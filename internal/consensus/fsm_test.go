package consensus

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/shoaldb/shoal/internal/pool"
)

func grantOf(cluster, writer string, n uint64) pool.Grant {
	return pool.Grant{Expect: n - 1, Term: pool.Term{Cluster: cluster, Number: n, Writer: writer, Addr: writer + ":3306",
		Granted: time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC), Why: "test"}}
}

// newGroupFSM is an FSM whose group has its ID, as after a first leader.
func newGroupFSM(t *testing.T, onApply func(pool.Term)) *FSM {
	t.Helper()
	f := NewFSM(onApply)
	applyGroup(t, f, "0a1b2c3d", 1)
	return f
}

func applyGroup(t *testing.T, f *FSM, g string, index uint64) any {
	t.Helper()
	b, err := EncodeGroup(g)
	if err != nil {
		t.Fatalf("EncodeGroup: %v", err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
}

func applyGrant(t *testing.T, f *FSM, g pool.Grant, index uint64) any {
	t.Helper()
	b, err := EncodeGrant(g)
	if err != nil {
		t.Fatalf("EncodeGrant: %v", err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
}

func TestFSMGrantIsCompareAndSet(t *testing.T) {
	var applied []pool.Term
	f := NewFSM(func(t pool.Term) { applied = append(applied, t) })
	// No grant before the group has its ID.
	if r := applyGrant(t, f, grantOf("c", "dbp", 1), 1); !errors.Is(r.(error), ErrNoGroup) {
		t.Fatalf("grant before the group ID = %v, want ErrNoGroup", r)
	}
	applyGroup(t, f, "0a1b2c3d", 1)
	// The ID is set once: a second entry changes nothing.
	if r := applyGroup(t, f, "99999999", 1); r != "0a1b2c3d" || f.Group() != "0a1b2c3d" {
		t.Fatalf("second group entry = %v, group %q", r, f.Group())
	}
	if r := applyGrant(t, f, grantOf("c", "dbp", 1), 1); r.(pool.Term).Writer != "dbp" || r.(pool.Term).Group != "0a1b2c3d" {
		t.Fatalf("first grant: %v", r)
	}
	// Two leaders' decisions on the same old term: only the first applies.
	if r := applyGrant(t, f, grantOf("c", "dbr", 2), 2); r.(pool.Term).Writer != "dbr" {
		t.Fatalf("second grant: %v", r)
	}
	r := applyGrant(t, f, grantOf("c", "dbq", 2), 3)
	if err, ok := r.(error); !ok || !errors.Is(err, ErrStale) {
		t.Fatalf("grant on an old term = %v, want ErrStale", r)
	}
	if got := f.Term("c"); got.Number != 2 || got.Writer != "dbr" {
		t.Fatalf("term = %+v, want 2 dbr", got)
	}
	if len(applied) != 2 {
		t.Fatalf("onApply called %d times, want 2", len(applied))
	}
	if got := f.Term("other"); got.Number != 0 {
		t.Fatalf("unknown cluster's term = %+v", got)
	}
}

func TestFSMRefusesBadEntries(t *testing.T) {
	f := NewFSM(nil)
	bad := map[string][]byte{
		"not json":       []byte("\x00\x01garbage"),
		"unknown op":     []byte(`{"v":1,"op":"promote"}`),
		"newer version":  []byte(`{"v":2,"op":"grant","grant":{}}`),
		"no grant":       []byte(`{"v":1,"op":"grant"}`),
		"empty writer":   []byte(`{"v":1,"op":"grant","grant":{"expect":0,"term":{"cluster":"c","term":1,"writer":"","addr":"a:1"}}}`),
		"skips a number": []byte(`{"v":1,"op":"grant","grant":{"expect":0,"term":{"cluster":"c","term":5,"writer":"w","addr":"a:1"}}}`),
		"too large":      bytes.Repeat([]byte(" "), maxCommand+1),
		"bad group":      []byte(`{"v":1,"op":"group","group":"ZZ"}`),
	}
	for name, data := range bad {
		r := f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: data})
		if err, ok := r.(error); !ok || !strings.Contains(err.Error(), "log entry 7") {
			t.Errorf("%s: Apply = %v, want an error naming the entry", name, r)
		}
	}
	if len(f.Terms()) != 0 {
		t.Fatalf("a bad entry changed the terms: %+v", f.Terms())
	}
	if _, err := EncodeGrant(pool.Grant{Expect: 1, Term: pool.Term{Cluster: "c", Number: 3, Writer: "w", Addr: "a:1"}}); err == nil {
		t.Fatal("EncodeGrant of a term that does not follow its expected one: no error")
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestFSMSnapshotRestore(t *testing.T) {
	f := newGroupFSM(t, nil)
	applyGrant(t, f, grantOf("a", "a1", 1), 1)
	applyGrant(t, f, grantOf("b", "b1", 1), 2)
	applyGrant(t, f, grantOf("b", "b2", 2), 3)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := NewFSM(nil)
	applyGroup(t, g, "99999999", 1)               // replaced by the restore
	applyGrant(t, g, grantOf("stale", "x", 1), 1) // replaced by the restore
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := g.Terms(); len(got) != 2 || got["b"].Number != 2 || got["b"].Writer != "b2" || got["a"].Writer != "a1" || got["a"].Group != "0a1b2c3d" {
		t.Fatalf("restored terms = %+v", got)
	}
	if g.Group() != "0a1b2c3d" {
		t.Fatalf("restored group = %q", g.Group())
	}
	// A snapshot with a bad term is refused whole; the terms stay.
	badSnap := `{"v":1,"terms":[{"cluster":"a","term":1,"writer":"a1","addr":"a1:1"},{"cluster":"b","term":0,"writer":"","addr":""}]}`
	if err := g.Restore(io.NopCloser(strings.NewReader(badSnap))); err == nil {
		t.Fatal("Restore of a bad snapshot: no error")
	}
	if got := g.Terms(); len(got) != 2 {
		t.Fatalf("a refused snapshot changed the terms: %+v", got)
	}
}
