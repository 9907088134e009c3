package pool

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

func fm(name string, db, failed bool) FleetMember {
	return FleetMember{Name: name, DB: db, Failed: failed}
}

func TestJudgeReach(t *testing.T) {
	round := func(answered map[string]bool) ReachRound { return ReachRound{Answered: answered} }
	tests := []struct {
		name      string
		fleet     Fleet
		answered  map[string]bool
		want      Reach
		connected bool
	}{
		{"app cut off from 3 db", Fleet{fm("me", false, false), fm("a", true, true), fm("b", true, false), fm("c", true, false)},
			map[string]bool{"b": false, "c": false}, Reach{Reached: 1, Fleet: 4, ReachedDB: 0, FleetDB: 3, Unreached: 3}, false},
		{"one db failed", Fleet{fm("me", false, false), fm("a", true, true), fm("b", true, false), fm("c", true, false)},
			map[string]bool{"b": true, "c": true}, Reach{Reached: 3, Fleet: 4, ReachedDB: 2, FleetDB: 3, Unreached: 1}, true},
		{"lone peer", Fleet{fm("me", false, false), fm("a", true, true)},
			map[string]bool{}, Reach{Reached: 1, Fleet: 2, FleetDB: 1, Unreached: 1}, true},
		{"2|2 split", Fleet{fm("me", false, false), fm("a", true, true), fm("b", true, false), fm("c", true, false)},
			map[string]bool{"b": false, "c": true}, Reach{Reached: 2, Fleet: 4, ReachedDB: 1, FleetDB: 3, Unreached: 2}, false},
		{"db agent counts itself", Fleet{fm("me", true, false), fm("a", true, true), fm("b", true, false), fm("x", false, true)},
			map[string]bool{"b": true}, Reach{Reached: 2, Fleet: 4, ReachedDB: 2, FleetDB: 3, Unreached: 2}, true},
		{"a sample of the others stands for them", Fleet{fm("me", false, false), fm("d", true, false),
			fm("x1", false, false), fm("x2", false, false), fm("x3", false, false), fm("x4", false, false)},
			map[string]bool{"d": false, "x1": true, "x2": false}, Reach{Reached: 3, Fleet: 6, ReachedDB: 0, FleetDB: 1, Unreached: 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := JudgeReach(tt.fleet, "me", round(tt.answered))
			if got != tt.want || got.Connected() != tt.connected {
				t.Fatalf("JudgeReach = %+v connected %v; want %+v connected %v", got, got.Connected(), tt.want, tt.connected)
			}
		})
	}
}

// Issue 38: 7 app agents failed within the window, then db2; this agent
// (an app) reaches db1 and app2 but not db3, which answers the pings db1
// and app2 relay for it.
func TestJudgeReachCountsRelayed(t *testing.T) {
	f := Fleet{fm("me", false, false), fm("app2", false, false), fm("db1", true, false), fm("db2", true, true), fm("db3", true, false)}
	for i := range 7 {
		f = append(f, fm(fmt.Sprintf("x%d", i), false, true))
	}
	answered := map[string]bool{"app2": true, "db1": true, "db3": false}
	tests := []struct {
		name      string
		relayed   map[string]bool
		want      Reach
		connected bool
	}{
		{"db3 answers a peer", map[string]bool{"db3": true}, Reach{Reached: 4, Fleet: 12, ReachedDB: 2, FleetDB: 3, Unreached: 8}, true},
		{"db3 answers nobody", map[string]bool{"db3": false}, Reach{Reached: 3, Fleet: 12, ReachedDB: 1, FleetDB: 3, Unreached: 9}, false},
		{"no relay", nil, Reach{Reached: 3, Fleet: 12, ReachedDB: 1, FleetDB: 3, Unreached: 9}, false},
		// A member the round did not ask counts only as not asked, whatever
		// the relays say.
		{"relayed but not asked", map[string]bool{"db2": true}, Reach{Reached: 3, Fleet: 12, ReachedDB: 1, FleetDB: 3, Unreached: 9}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			round := ReachRound{Answered: answered, Relayed: tt.relayed}
			got := JudgeReach(f, "me", round)
			if got != tt.want || got.Connected() != tt.connected {
				t.Fatalf("JudgeReach = %+v connected %v; want %+v connected %v", got, got.Connected(), tt.want, tt.connected)
			}
		})
	}
	// A 2|2 split: the peer this agent reaches (db3) is on its side, so the
	// pings it relays to db1 and db2 go unanswered: isolated still.
	split := Fleet{fm("me", false, false), fm("db1", true, true), fm("db2", true, true), fm("db3", true, false)}
	round := ReachRound{Answered: map[string]bool{"db1": false, "db2": false, "db3": true}, Relayed: map[string]bool{"db1": false, "db2": false}}
	if got := JudgeReach(split, "me", round); got.Connected() {
		t.Fatalf("2|2 split with relays through the own side: %+v connected", got)
	}
}

func TestSample(t *testing.T) {
	f := Fleet{fm("me", false, false), fm("a", true, false), fm("b", true, true), fm("x", false, false), fm("y", false, false), fm("z", false, true)}
	first := func(int) int { return 0 }
	if got := Sample(f, "me", nil, 16, false, first); !slices.Equal(got, []string{"a", "x", "y"}) {
		t.Errorf("alive only: %v", got)
	}
	if got := Sample(f, "me", []string{"b", "me"}, 16, false, first); !slices.Equal(got, []string{"a", "b", "x", "y"}) {
		t.Errorf("with an extra: %v", got)
	}
	if got := Sample(f, "me", nil, 16, true, first); !slices.Equal(got, []string{"a", "b", "x", "y", "z"}) {
		t.Errorf("with the failed: %v", got)
	}
	if got := Sample(f, "me", nil, 1, false, first); !slices.Equal(got, []string{"a", "y"}) {
		t.Errorf("at most 1 of each: %v", got)
	}
}

func TestFleetTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := func(name string, st Status, role string) Member {
		return Member{Name: name, Status: st, Tags: map[string]string{tags.KeyRole: role}}
	}
	ft := NewFleetTracker(10 * time.Second)
	names := func(f Fleet) []string { return f.Names() }
	f := ft.Observe(t0, []Member{m("me", StatusAlive, "app"), m("a", StatusAlive, "db"), m("b", StatusLeft, "db"), m("x", StatusFailed, "app")})
	if !slices.Equal(names(f), []string{"a", "me", "x"}) || !f[0].DB || f[1].DB || !f[2].Failed {
		t.Fatalf("fleet %+v: want a (db), me, x (failed); b left", f)
	}
	f = ft.Observe(t0.Add(11*time.Second), []Member{m("me", StatusAlive, "app"), m("a", StatusFailed, "db"), m("x", StatusFailed, "app")})
	if !slices.Equal(names(f), []string{"a", "me"}) {
		t.Fatalf("after the window: %v, want x (failed 11 s ago) gone, a (just failed) in", names(f))
	}
	frozen := Fleet{fm("a", true, false), fm("me", false, false), fm("x", false, false), fm("gone", false, false)}
	still := ft.Still(frozen)
	if !slices.Equal(names(still), []string{"a", "me", "x"}) || !still[0].Failed || still[1].Failed {
		t.Fatalf("Still = %+v: want a (failed), me, x; gone dropped", still)
	}
}
