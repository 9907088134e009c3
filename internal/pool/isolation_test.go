package pool

import (
	"fmt"
	"testing"
)

// view builds a member list: self is alive, peers take the given statuses.
func view(statuses ...Status) []Member {
	ms := []Member{{Name: "self", Status: StatusAlive}}
	for i, s := range statuses {
		ms = append(ms, Member{Name: fmt.Sprintf("p%d", i), Status: s})
	}
	return ms
}

const (
	A = StatusAlive
	F = StatusFailed
	L = StatusLeft
)

func TestIsolationDetector(t *testing.T) {
	type obs struct {
		sec      float64
		members  []Member
		isolated bool
	}
	tests := []struct {
		name string
		obs  []obs
	}{
		{"most fail at once", []obs{
			{0, view(A, A, A, A), false},
			{2, view(F, A, A, A), false},
			{5, view(F, F, A, A), false},  // 2 of 4 peers: not more than half
			{8, view(F, F, F, A), true},   // 3 of 4 peers within 10s
			{60, view(F, F, F, A), true},  // stays frozen
			{61, view(A, F, F, A), false}, // 3 of 5 alive again
		}},
		{"failures spread beyond the window", []obs{
			{0, view(A, A, A, A), false},
			{0, view(F, A, A, A), false},
			{11, view(F, F, A, A), false},
			{22, view(F, F, F, A), false}, // only 1 (p2) within the window
		}},
		{"custom window counts from each failure", []obs{
			{0, view(A, A, A, A), false},
			{0, view(F, A, A, A), false},
			{9, view(F, F, A, A), false},
			{10, view(F, F, F, A), true}, // p0 at 0s is still within 10s
		}},
		{"one peer lost is never isolation", []obs{
			{0, view(A), false},
			{1, view(F), false},
		}},
		{"both peers lost is", []obs{
			{0, view(A, A), false},
			{1, view(F, F), true},
			{2, view(A, F), false},
		}},
		{"two of three peers lost is (a 2|2 split)", []obs{
			{0, view(A, A, A), false},
			{1, view(F, F, A), true},
			{2, view(A, F, A), false},
		}},
		{"leaving is not failing", []obs{
			{0, view(A, A, A, A), false},
			{1, view(L, L, L, A), false},
		}},
		{"members first seen failed never were alive", []obs{
			{0, view(F, F, F, A), false},
			{1, view(F, F, F, A), false},
		}},
		{"baseline members that leave or vanish stop counting", []obs{
			{0, view(A, A, A, A), false},
			{1, view(F, F, F, F), true},
			{2, view(L, L, F, F), true}, // 2 of the 2 peers still listed failed
			{3, []Member{{Name: "self", Status: A}, {Name: "p3", Status: F}}, false}, // one failed peer is never isolation
			{4, []Member{{Name: "self", Status: A}}, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewIsolationDetector(0)
			for _, o := range tt.obs {
				st := d.Observe(at(o.sec), o.members)
				if st.Isolated != o.isolated {
					t.Fatalf("t=%gs: isolated = %v, want %v (%+v)", o.sec, st.Isolated, o.isolated, st)
				}
				if st.Isolated && st.Since.IsZero() || !st.Isolated && !st.Since.IsZero() {
					t.Fatalf("t=%gs: since = %v with isolated = %v", o.sec, st.Since, st.Isolated)
				}
			}
		})
	}
}

func TestIsolationState(t *testing.T) {
	d := NewIsolationDetector(0)
	d.Observe(at(0), view(A, A, A, A))
	st := d.Observe(at(1), view(F, F, F, A))
	want := IsolationState{Isolated: true, Since: at(1), Failed: 3, Baseline: 5}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	st = d.Observe(at(5), view(F, F, F, A))
	if st.Since != at(1) || st.Failed != 3 || st.Baseline != 5 {
		t.Fatalf("got %+v", st)
	}
}
