package fencing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// fenceMember is a db member of cluster "default" that votes; writable
// or a read-only replica, in state st.
func fenceMember(name string, writable bool, st tags.State) pool.Member {
	h := tags.Health{State: st}
	if !writable {
		h.ReadOnly, h.Replica, h.IORunning, h.SQLRunning, h.LagKnown = true, true, true, true, true
	}
	m := pool.Member{Name: name, Addr: name + ":3306", Status: pool.StatusAlive, Tags: map[string]string{
		tags.KeyRole: tags.RoleDB, tags.KeyHealth: tags.Encode(h), tags.KeyVoter: "7950",
	}}
	m.Health, _ = tags.Published(m.Tags)
	return m
}

// TestFenceConflict: the pool computed by the agent's own router decides
// whether it fences its own server, "db2": only when a known term's
// holder is another node, the writer in this pool, and db2 is out with
// reason conflict; never for the holder, without a term, without voters
// (no term required), or when isolated.
func TestFenceConflict(t *testing.T) {
	term := func(n uint64, w string) pool.TermView {
		return pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: n, Writer: w, Addr: w + ":3306"}}}
	}
	pass, warn := tags.Passing, tags.Warning
	noVoter := func(m pool.Member) pool.Member { delete(m.Tags, tags.KeyVoter); return m }
	for _, tc := range []struct {
		name     string
		members  []pool.Member
		tv       pool.TermView
		isolated bool
		want     bool
	}{
		{"db2 writable, term on db1: fence", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, pass), fenceMember("db3", false, pass)},
			term(3, "db1"), false, true},
		{"holder in warning, still the writer (floor): fence", []pool.Member{fenceMember("db1", true, warn), fenceMember("db2", true, pass)},
			term(3, "db1"), false, true},
		{"db2 in warning and writable: fence", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, warn)},
			term(3, "db1"), false, true},
		{"isolated: never", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, pass)},
			term(3, "db1"), true, false},
		{"db2 holds the term: never", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, pass)},
			term(4, "db2"), false, false},
		{"no term known: never", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, pass)},
			pool.TermView{}, false, false},
		{"terms unverifiable: never", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, pass)},
			pool.TermView{Terms: term(3, "db1").Terms, Unverifiable: "no key"}, false, false},
		{"holder read-only, db2 writable (an outside promotion): never", []pool.Member{fenceMember("db1", false, pass), fenceMember("db2", true, pass)},
			term(3, "db1"), false, false},
		{"holder gone: never", []pool.Member{fenceMember("db2", true, pass), fenceMember("db3", false, pass)},
			term(3, "db1"), false, false},
		{"holder critical: never", []pool.Member{fenceMember("db1", true, tags.Critical), fenceMember("db2", true, pass)},
			term(3, "db1"), false, false},
		{"db2 read-only: never", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", false, pass)},
			term(3, "db1"), false, false},
		{"no voters (no term required): never", []pool.Member{noVoter(fenceMember("db1", true, pass)), noVoter(fenceMember("db2", true, pass))},
			term(3, "db1"), false, false},
		{"term granted to db1 at another address: never", []pool.Member{fenceMember("db1", true, pass), fenceMember("db2", true, pass)},
			pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: 3, Writer: "db1", Addr: "10.9.9.9:3306"}}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := pool.ComputeFresh(tc.members, pool.Policy{}, nil, pool.Freshness{}, tc.tv)
			cluster, why, got := Conflict(p, "db2", tc.isolated)
			if got != tc.want {
				t.Fatalf("Conflict = %v (%q), want %v; pool %+v", got, why, tc.want, p.Clusters)
			}
			if got && (cluster != "default" || !strings.Contains(why, "term 3 belongs to db1")) {
				t.Errorf("cluster %q, why %q", cluster, why)
			}
		})
	}
	if _, _, ok := Conflict(nil, "db2", false); ok {
		t.Error("fences on no pool")
	}
}

// TestFenceEpisode: a conflict must last fence_after without a break;
// fencing happens once per episode; a failure is retried with backoff; the
// end of the conflict starts a new episode.
func TestFenceEpisode(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	after := 3 * time.Second
	type look struct {
		ms       int
		conflict bool
		want     bool
		fail     bool // the fence it starts fails
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"fences after 3s, once", []look{{0, true, false, false}, {2750, true, false, false}, {3000, true, true, false}, {3250, true, false, false}, {60000, true, false, false}}},
		{"a break restarts the wait (promotion in the wrong order)", []look{{0, true, false, false}, {2000, false, false, false}, {2250, true, false, false}, {5000, true, false, false}, {5250, true, true, false}}},
		{"a new episode fences again", []look{{0, true, false, false}, {3000, true, true, false}, {3500, false, false, false}, {4000, true, false, false}, {7000, true, true, false}}},
		{"failures retried with backoff 1s, 2s, 4s", []look{{0, true, false, false}, {3000, true, true, true}, {3750, true, false, false}, {4000, true, true, true},
			{5750, true, false, false}, {6000, true, true, true}, {9750, true, false, false}, {10000, true, true, false}, {11000, true, false, false}}},
		{"no conflict, no fence", []look{{0, false, false, false}, {10000, false, false, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ep episode
			for _, l := range tc.looks {
				var now bool
				ep, now = ep.step(l.conflict, at(l.ms), after)
				if now != l.want {
					t.Fatalf("at %dms (conflict %v): fence %v, want %v (episode %+v)", l.ms, l.conflict, now, l.want, ep)
				}
				if now {
					var err error
					if l.fail {
						err = errors.New("access denied")
					}
					ep.record(err, at(l.ms))
				}
			}
		})
	}
}

// TestPublishFence: an attempt shows in the history, the metrics' counts
// and the health view, with the SQL error when it failed.
func TestPublishFence(t *testing.T) {
	hist, err := history.Open(history.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClock()
	calls := 0
	act := &fakeActuator{fence: func() (fence.Result, error) {
		calls++
		if calls == 1 {
			return fence.Result{Flavor: "mariadb"}, errors.New("SET GLOBAL read_only=ON: Error 1227: Access denied; you need (at least one of) the READ_ONLY ADMIN privilege(s)")
		}
		return fence.Result{Flavor: "mariadb", ReadOnly: true, Killed: 2}, nil
	}}
	f := New(Config{Node: "db2", After: time.Second, Actuator: act, Record: func(e history.Entry) { hist.Add(e) }, Clock: clk})
	if err := f.fenceSafely(context.Background(), "default", "writable, but term 3 belongs to db1 (db1:3306)", 1); err == nil {
		t.Fatal("first attempt: no error")
	}
	f.setRetry(clk.Now().Add(time.Second))
	st := f.Status()
	if st == nil || st.Result != "error" || !strings.Contains(st.Error, "READ_ONLY ADMIN") || st.Retry.IsZero() || st.Attempt != 1 {
		t.Fatalf("status after a failure: %+v", st)
	}
	if err := f.fenceSafely(context.Background(), "default", "writable, but term 3 belongs to db1 (db1:3306)", 2); err != nil {
		t.Fatal(err)
	}
	f.setRetry(time.Time{})
	if st := f.Status(); st.Result != "ok" || st.Killed != 2 || !st.Retry.IsZero() || st.Attempt != 2 {
		t.Fatalf("status after success: %+v", st)
	}
	if f.ok.Load() != 1 || f.failed.Load() != 1 || f.killed.Load() != 2 {
		t.Errorf("counts ok %d error %d killed %d", f.ok.Load(), f.failed.Load(), f.killed.Load())
	}
	es := hist.Query(history.Filter{Kind: history.KindFence})
	if len(es) != 2 || es[0].Reason != "error" || es[0].To != "writable" || es[1].Reason != "ok" || es[1].To != "read-only" ||
		es[1].Node != "db2" || !strings.Contains(es[1].Detail, "2 client connections killed") {
		t.Errorf("history: %+v", es)
	}
	panicky := New(Config{Actuator: &fakeActuator{fence: func() (fence.Result, error) { panic("boom") }}, Clock: clk})
	if err := panicky.fenceSafely(context.Background(), "default", "x", 1); err == nil || panicky.failed.Load() != 1 {
		t.Errorf("a panic: err %v, failed %d", err, panicky.failed.Load())
	}
}

// TestLeaseWatch: a voter holding a term loses its lease after lease
// without contact with a raft leader; leading counts as contact (raft
// steps a leader down without a quorum); a voter holding no term never
// loses one; contact again ends it.
func TestLeaseWatch(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lease := 2 * time.Second
	held := []pool.Term{{Cluster: "main", Number: 4, Writer: "db1", Addr: "db1:3306"}}
	type look struct {
		ms      int
		leader  bool
		contact int // raft's last contact (ms); -1: none
		held    []pool.Term
		lost    bool
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"follower in contact", []look{{0, false, 0, held, false}, {1900, false, 1800, held, false}, {3700, false, 3600, held, false}}},
		{"follower cut off", []look{{0, false, 0, held, false}, {1750, false, 0, held, false}, {2000, false, 0, held, true}, {5000, false, 0, held, true}}},
		{"contact again ends it", []look{{0, false, 0, held, false}, {2500, false, 0, held, true}, {2750, false, 2700, held, false}}},
		{"leader counts as contact", []look{{0, true, -1, held, false}, {1900, true, -1, held, false}, {3800, true, -1, held, false}}},
		{"leader steps down, then cut off", []look{{0, true, -1, held, false}, {500, true, -1, held, false}, {750, false, -1, held, false}, {2400, false, -1, held, false}, {2500, false, -1, held, true}}},
		{"holds no term", []look{{0, false, 0, nil, false}, {10000, false, 0, nil, false}}},
		{"raft's old contact does not go back", []look{{0, true, -1, held, false}, {1000, false, -5000, held, false}, {2999, false, -5000, held, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := leaseWatch{contact: t0}
			for _, l := range tc.looks {
				var lc time.Time
				if l.contact != -1 {
					lc = at(l.contact)
				}
				w.observe(l.leader, lc, at(l.ms))
				why, lost := w.lost(l.held, at(l.ms), lease)
				if lost != l.lost {
					t.Fatalf("at %dms: lost %v (%q), want %v", l.ms, lost, why, l.lost)
				}
				if lost && !strings.Contains(why, "term 4 of main") {
					t.Errorf("why %q", why)
				}
			}
		})
	}
}

// TestHeldTerms: the terms this node holds, by cluster, from what it
// knows.
func TestHeldTerms(t *testing.T) {
	tv := pool.TermView{Terms: map[string]pool.Term{
		"b": {Cluster: "b", Number: 2, Writer: "db1"}, "a": {Cluster: "a", Number: 7, Writer: "db1"},
		"c": {Cluster: "c", Number: 3, Writer: "db2"}, "d": {Cluster: "d", Writer: "db1"},
	}}
	got := heldTerms(tv, "db1")
	if len(got) != 2 || got[0].Cluster != "a" || got[1].Cluster != "b" {
		t.Errorf("heldTerms = %+v", got)
	}
	if got := heldTerms(tv, "db9"); got != nil {
		t.Errorf("heldTerms of a non-holder = %+v", got)
	}
}

// After a lease fence, contact back: the fence is undone once the
// contact has lasted fence_after and this node still holds the same
// terms; never when a term moved meanwhile; a failure is retried.
func TestLeaseFenceUndone(t *testing.T) {
	hist, err := history.Open(history.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClock()
	unfenced := 0
	fail := true
	act := &fakeActuator{unfence: func() error {
		if fail {
			return errors.New("Error 1227: Access denied; you need (at least one of) the READ_ONLY ADMIN privilege(s)")
		}
		unfenced++
		return nil
	}}
	f := New(Config{Node: "db1", After: 3 * time.Second, Actuator: act, Record: func(e history.Entry) { hist.Add(e) }, Clock: clk})
	t1 := pool.Term{Cluster: "main", Number: 4, Writer: "db1", Addr: "db1:3306"}
	mine := pool.TermView{Terms: map[string]pool.Term{"main": t1}}
	moved := pool.TermView{Terms: map[string]pool.Term{"main": {Cluster: "main", Number: 5, Writer: "db2", Addr: "db2:3306"}}}

	b := leaseReturn{fenced: []pool.Term{t1}}
	if b.step(clk.Now(), f.cfg.After) {
		t.Fatal("undone the moment contact came back")
	}
	clk.Advance(3 * time.Second)
	if !b.step(clk.Now(), f.cfg.After) {
		t.Fatal("not due after fence_after of contact")
	}
	f.unfenceIf(context.Background(), &b, mine, true)
	if b.fenced == nil || unfenced != 0 {
		t.Fatal("undone while isolated")
	}
	f.unfenceIf(context.Background(), &b, mine, false) // fails
	if b.fenced == nil || b.step(clk.Now(), f.cfg.After) {
		t.Fatalf("after a failure: fenced %v, due at once %v", b.fenced, b.step(clk.Now(), f.cfg.After))
	}
	clk.Advance(time.Minute)
	fail = false
	if !b.step(clk.Now(), f.cfg.After) {
		t.Fatal("not retried")
	}
	f.unfenceIf(context.Background(), &b, mine, false)
	if b.fenced != nil || unfenced != 1 {
		t.Fatalf("still holding term 4: fenced %v, unfenced %d; want undone once", b.fenced, unfenced)
	}

	b = leaseReturn{fenced: []pool.Term{t1}}
	f.unfenceIf(context.Background(), &b, moved, false)
	if b.fenced != nil || unfenced != 1 {
		t.Fatalf("term moved to db2: fenced %v, unfenced %d; want it to stay read-only and the episode closed", b.fenced, unfenced)
	}
	es := hist.Query(history.Filter{Kind: history.KindFence})
	var got []string
	for _, e := range es {
		got = append(got, e.To+"/"+e.Reason)
	}
	if strings.Join(got, ",") != "read-only/error,writable/ok,read-only/kept" {
		t.Fatalf("history: %v", got)
	}
}

// The start grace counts only until the first contact: a cut soon after
// the start fences a lease after the last contact, not a lease after the
// grace (found by TestTermMinorityWriter: fenced 8.3 s after a cut with a
// 5 s lease).
func TestLeaseGraceEndsAtFirstContact(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lease := 5 * time.Second
	held := []pool.Term{{Cluster: "main", Number: 1, Writer: "db1", Addr: "db1:3306"}}
	w := leaseWatch{grace: at(5000)} // started at t0
	w.observe(false, time.Time{}, at(4000))
	if _, lost := w.lost(held, at(9000), lease); lost {
		t.Fatal("lost within the grace, before any contact")
	}
	w.observe(false, at(2000), at(2100)) // the first contact, 2 s after the start; then the cut
	if _, lost := w.lost(held, at(6900), lease); lost {
		t.Fatal("lost 4.9 s after the last contact")
	}
	if why, lost := w.lost(held, at(7100), lease); !lost || !strings.Contains(why, "5.1s") {
		t.Fatalf("5.1 s after the last contact: lost %v (%q), want lost", lost, why)
	}
	// With no contact at all, the grace then the lease.
	w = leaseWatch{grace: at(5000)}
	if _, lost := w.lost(held, at(9900), lease); lost {
		t.Fatal("no contact: lost before grace + lease")
	}
	if _, lost := w.lost(held, at(10100), lease); !lost {
		t.Fatal("no contact: not lost after grace + lease")
	}
}
