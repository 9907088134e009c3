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

var intentStart = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func sampleIntent(id string) SwitchIntent {
	return SwitchIntent{ID: id, Cluster: "main", From: 1, Old: "db1", Target: "db2", Addr: "db2:3306", By: "db3",
		Started: intentStart, Deadline: intentStart.Add(2 * time.Minute)}
}

// intentFSM is a grouped FSM whose "main" is at term 1, held by db1.
func intentFSM(t *testing.T) (*FSM, *uint64) {
	t.Helper()
	f := newGroupFSM(t, nil)
	applyGrant(t, f, pool.Grant{Term: pool.Term{Cluster: "main", Number: 1, Writer: "db1", Addr: "db1:3306"}}, 2)
	index := uint64(2)
	return f, &index
}

// apply applies an encoded entry and returns the result as an error or
// value.
func apply(t *testing.T, f *FSM, index *uint64, b []byte, err error) (any, error) {
	t.Helper()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	*index++
	r := f.Apply(&raft.Log{Index: *index, Type: raft.LogCommand, Data: b})
	if e, ok := r.(error); ok {
		return nil, e
	}
	return r, nil
}

func grantTo(writer string, expect uint64) pool.Grant {
	return pool.Grant{Expect: expect, Term: pool.Term{Cluster: "main", Number: expect + 1, Writer: writer, Addr: writer + ":3306"}}
}

func TestSwitchIntentLifecycle(t *testing.T) {
	const id, other = "0123456789abcdef", "fedcba9876543210"
	type step struct {
		name    string
		encode  func() ([]byte, error)
		wantErr error  // errors.Is; nil: success
		errText string // else a substring of the error
	}
	begin := func(id string) func() ([]byte, error) {
		return func() ([]byte, error) { return EncodeSwitchBegin(sampleIntent(id)) }
	}
	end := func(id string, rollback bool) func() ([]byte, error) {
		return func() ([]byte, error) { return EncodeSwitchEnd("main", id, "why", rollback) }
	}
	grant := func(id, writer string) func() ([]byte, error) {
		return func() ([]byte, error) { return EncodeGrantSwitch(id, grantTo(writer, 1)) }
	}
	plain := func() ([]byte, error) { return EncodeGrant(grantTo("db2", 1)) }
	for _, c := range []struct {
		name      string
		steps     []step
		wantTerm  uint64
		wantState string // "": no intent left; else "recorded" or "granted"
	}{
		{"completed", []step{{"begin", begin(id), nil, ""}, {"grant", grant(id, "db2"), nil, ""}, {"end", end(id, false), nil, ""}}, 2, ""},
		{"rolled back", []step{{"begin", begin(id), nil, ""}, {"rollback", end(id, true), nil, ""}, {"late grant", grant(id, "db2"), ErrNoSwitch, ""}}, 1, ""},
		{"rollback after the grant", []step{{"begin", begin(id), nil, ""}, {"grant", grant(id, "db2"), nil, ""}, {"rollback", end(id, true), ErrSwitchGranted, ""}}, 2, "granted"},
		{"second switchover", []step{{"begin", begin(id), nil, ""}, {"begin other", begin(other), ErrSwitchBusy, ""}}, 1, "recorded"},
		{"same intent again", []step{{"begin", begin(id), nil, ""}, {"begin again", begin(id), nil, ""}}, 1, "recorded"},
		// Applied as by a voter of an earlier release (every voter must
		// agree); the switchover's own grant then finds the term moved.
		{"grant without the switchover", []step{{"begin", begin(id), nil, ""}, {"plain grant", plain, nil, ""}, {"its grant", grant(id, "db2"), ErrStale, ""}}, 2, "recorded"},
		{"grant of another switchover", []step{{"begin", begin(id), nil, ""}, {"grant other", grant(other, "db2"), ErrNoSwitch, ""}}, 1, "recorded"},
		{"grant to another target", []step{{"begin", begin(id), nil, ""}, {"grant db3", grant(id, "db3"), nil, "does not match"}}, 1, "recorded"},
		{"end unknown", []step{{"end", end(id, false), ErrNoSwitch, ""}}, 1, ""},
		{"plain grant without intents", []step{{"plain grant", plain, nil, ""}}, 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, index := intentFSM(t)
			for _, s := range c.steps {
				b, err := s.encode()
				_, err = apply(t, f, index, b, err)
				switch {
				case s.wantErr == nil && s.errText == "" && err != nil:
					t.Fatalf("%s: %v", s.name, err)
				case s.wantErr != nil && !errors.Is(err, s.wantErr):
					t.Fatalf("%s: %v, want %v", s.name, err, s.wantErr)
				case s.errText != "" && (err == nil || !strings.Contains(err.Error(), s.errText)):
					t.Fatalf("%s: %v, want %q", s.name, err, s.errText)
				}
			}
			if tm := f.Term("main"); tm.Number != c.wantTerm {
				t.Errorf("term %d, want %d", tm.Number, c.wantTerm)
			}
			in, ok := f.Switch("main")
			state := ""
			if ok {
				state = map[bool]string{false: "recorded", true: "granted"}[in.Granted]
			}
			if state != c.wantState {
				t.Errorf("intent %q, want %q", state, c.wantState)
			}
		})
	}
}

// An intent can only start from the cluster's current term and holder.
func TestSwitchIntentStartsFromTheCurrentTerm(t *testing.T) {
	f, index := intentFSM(t)
	in := sampleIntent("0123456789abcdef")
	in.From = 2
	b, err := EncodeSwitchBegin(in)
	if _, err := apply(t, f, index, b, err); !errors.Is(err, ErrStale) {
		t.Errorf("from term 2: %v", err)
	}
	in.From, in.Old, in.Target = 1, "db3", "db2"
	b, err = EncodeSwitchBegin(in)
	if _, err := apply(t, f, index, b, err); !errors.Is(err, ErrStale) {
		t.Errorf("from a writer that holds nothing: %v", err)
	}
}

func TestSwitchIntentCheck(t *testing.T) {
	for name, mod := range map[string]func(*SwitchIntent){
		"id":       func(in *SwitchIntent) { in.ID = "xyz" },
		"cluster":  func(in *SwitchIntent) { in.Cluster = "bad cluster" },
		"from":     func(in *SwitchIntent) { in.From = 0 },
		"target":   func(in *SwitchIntent) { in.Target = in.Old },
		"deadline": func(in *SwitchIntent) { in.Deadline = in.Started },
		"by":       func(in *SwitchIntent) { in.By = "" },
		"addr":     func(in *SwitchIntent) { in.Addr = "db2" },
	} {
		in := sampleIntent("0123456789abcdef")
		mod(&in)
		if err := in.Check(); err == nil {
			t.Errorf("%s: no error for %+v", name, in)
		}
		if _, err := EncodeSwitchBegin(in); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	if _, err := EncodeSwitchEnd("main", "0123456789abcdef", strings.Repeat("x", maxOutcome+1), false); err == nil {
		t.Error("an outcome over the bound encoded")
	}
}

// A snapshot keeps the recorded intents; one that does not check is
// refused whole.
func TestSwitchIntentSnapshot(t *testing.T) {
	f, index := intentFSM(t)
	b, err := EncodeSwitchBegin(sampleIntent("0123456789abcdef"))
	if _, err := apply(t, f, index, b, err); err != nil {
		t.Fatal(err)
	}
	g, snapshot := roundTrip(t, f)
	if in, ok := g.Switch("main"); !ok || in != sampleIntent("0123456789abcdef") {
		t.Errorf("restored intent %+v %v", in, ok)
	}
	bad := strings.Replace(snapshot, `"target":"db2"`, `"target":"db1"`, 1)
	if err := NewFSM(nil).Restore(io.NopCloser(strings.NewReader(bad))); err == nil || !strings.Contains(err.Error(), "restore switchovers") {
		t.Errorf("a snapshot with a bad intent: %v", err)
	}
}

// An end step with the longest outcome still fits a serf query.
func TestSwitchEndStepFits(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	st := sampleStep(time.Now())
	st.Op, st.Rollback, st.Outcome = OpEnd, true, strings.Repeat("é", maxOutcome/2)
	if _, err := EncodeSwitchStep(kr, st); err != nil {
		t.Fatal(err)
	}
	st.Outcome += "x"
	if _, err := EncodeSwitchStep(kr, st); err == nil {
		t.Error("an outcome over the bound encoded")
	}
}

// A failover's grant leaves the cluster's failover record (the promotion
// position, the dead writer's server_id), which outlives the intent's end
// and a snapshot; a switchover's grant leaves none.
func TestFailoverRecord(t *testing.T) {
	f, index := intentFSM(t)
	in := sampleIntent("0123456789abcdef")
	in.Kind, in.Position, in.OldServerID = KindFailover, "0-1-21,1-3-4", 1
	b, err := EncodeSwitchBegin(in)
	if _, err := apply(t, f, index, b, err); err != nil {
		t.Fatal(err)
	}
	if len(f.Failovers()) != 0 {
		t.Fatalf("a record before the grant: %v", f.Failovers())
	}
	b, err = EncodeGrantSwitch(in.ID, grantTo("db2", 1))
	if _, err := apply(t, f, index, b, err); err != nil {
		t.Fatal(err)
	}
	b, err = EncodeSwitchEnd("main", in.ID, "done", false)
	if _, err := apply(t, f, index, b, err); err != nil {
		t.Fatal(err)
	}
	want := Failover{Cluster: "main", Term: 2, Old: "db1", OldServerID: 1, Target: "db2", Position: "0-1-21,1-3-4"}
	if got := f.Failovers()["main"]; got != want {
		t.Fatalf("record %+v, want %+v", got, want)
	}
	g, snapshot := roundTrip(t, f)
	if got := g.Failovers()["main"]; got != want {
		t.Errorf("restored record %+v, want %+v", got, want)
	}
	bad := strings.Replace(snapshot, `"position":"0-1-21,1-3-4"}`, `"position":"0-1-21'; DROP"}`, 1)
	if err := NewFSM(nil).Restore(io.NopCloser(strings.NewReader(bad))); err == nil || !strings.Contains(err.Error(), "restore failovers") {
		t.Errorf("a snapshot with a bad record: %v", err)
	}

	// A switchover (no kind) leaves none.
	in2 := sampleIntent("fedcba9876543210")
	in2.From, in2.Old, in2.Target, in2.Addr = 2, "db2", "db3", "db3:3306"
	b, err = EncodeSwitchBegin(in2)
	if _, err := apply(t, f, index, b, err); err != nil {
		t.Fatal(err)
	}
	b, err = EncodeGrantSwitch(in2.ID, grantTo("db3", 2))
	if _, err := apply(t, f, index, b, err); err != nil {
		t.Fatal(err)
	}
	if got := f.Failovers()["main"]; got != want {
		t.Errorf("after a switchover the record is %+v, want the failover's %+v", got, want)
	}
	in.Position = "0-1-2'"
	if _, err := EncodeSwitchBegin(in); err == nil || !strings.Contains(err.Error(), "position") {
		t.Errorf("a bad position: %v", err)
	}
}

// roundTrip persists f's snapshot and restores it into a new FSM; it
// returns that and the snapshot.
func roundTrip(t *testing.T, f *FSM) (*FSM, string) {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf memSink
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	g := NewFSM(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return g, buf.String()
}
