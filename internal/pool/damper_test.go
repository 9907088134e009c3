package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

var t0 = time.Date(2024, 1, 1, 3, 12, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// damperRun feeds Compute and a Damper one view at a time, like the agent.
type damperRun struct {
	t      *testing.T
	d      *Damper
	policy Policy
	prev   *Pool
}

func (r *damperRun) step(sec float64, members ...Member) *Pool {
	r.t.Helper()
	raw := Compute(members, r.policy, r.prev)
	p := r.d.Apply(at(sec), raw, r.policy)
	checkInvariants(r.t, members, r.policy, p)
	r.prev = p
	return p
}

func reasonOf(p *Pool, name string) string {
	for _, c := range p.Clusters {
		for _, l := range []struct {
			role  string
			nodes []Node
		}{{"writer", c.Writers}, {"reader", c.Readers}, {"out", c.Out}} {
			for _, n := range l.nodes {
				if n.Name == name {
					return l.role + ":" + string(n.Reason)
				}
			}
		}
	}
	return "absent"
}

func TestDamperHoldsFlappingReader(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{})}
	good := func(sec float64) *Pool { return r.step(sec, writer("a"), replica("b", 0), replica("c", 0)) }
	bad := func(sec float64) *Pool { return r.step(sec, writer("a"), replica("b", 60), replica("c", 0)) }
	steps := []struct {
		sec  float64
		good bool
		want string
	}{
		{0, true, "reader:"},
		{5, false, "out:lag"}, // removal 1: penalty 1000
		{10, true, "reader:"},
		{15, false, "out:lag"}, // removal 2: ~1891
		{20, true, "reader:"},
		{25, false, "out:lag"}, // removal 3: ~2685 > 2500, suppressed; removal is not delayed
		{30, true, "out:damped"},
		{60, true, "out:damped"},
		{110, true, "out:damped"}, // ~1006, still above reuse
		{111, true, "reader:"},    // ~995 < 1000: released
		{115, false, "out:lag"},   // removal 4: ~1950, not suppressed
		{120, true, "reader:"},
	}
	for _, s := range steps {
		var p *Pool
		if s.good {
			p = good(s.sec)
		} else {
			p = bad(s.sec)
		}
		if got := reasonOf(p, "b"); got != s.want {
			t.Fatalf("t=%gs: b is %s, want %s (penalty %.0f)", s.sec, got, s.want, r.d.Penalty("default", "b", at(s.sec)))
		}
		if got := reasonOf(p, "c"); got != "reader:" {
			t.Fatalf("t=%gs: stable reader c is %s", s.sec, got)
		}
	}
}

func TestDamperKeepsFloor(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{}), policy: Policy{MinReaders: 1}}
	for i := 0; i < 3; i++ {
		r.step(float64(10*i), writer("a"), replica("b", 0))
		r.step(float64(10*i+5), writer("a"), replica("b", -1, status(StatusFailed)))
	}
	p := r.step(30, writer("a"), replica("b", 0))
	n := p.Clusters[0].Readers
	if len(n) != 1 || n[0].Reason != ReasonFloor || !strings.HasPrefix(n[0].Detail, "damped: flapping") {
		t.Fatalf("want b kept by the floor, got %s %+v", summary(p), n)
	}
	// A second healthy reader lets the damper hold b.
	p = r.step(31, writer("a"), replica("b", 0), replica("c", 0))
	if got := reasonOf(p, "b"); got != "out:damped" {
		t.Fatalf("b is %s, want out:damped", got)
	}
}

func TestDamperNeverHoldsWriter(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{}), policy: Policy{WriterServesReads: true}}
	for i := 0; i < 20; i++ {
		p := r.step(float64(2*i), writer("a"))
		if got := reasonOf(p, "a"); got != "writer:" {
			t.Fatalf("flap %d: a is %s", i, got)
		}
		r.step(float64(2*i+1), dbh("a", tags.Health{State: tags.Critical}))
	}
}

func TestDamperToleratesSlowFlaps(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{})}
	for i := 0; i < 30; i++ { // one flap a minute: the penalty tends to 2000
		if got := reasonOf(r.step(float64(60*i), replica("b", 0), replica("c", 0)), "b"); got != "reader:" {
			t.Fatalf("minute %d: b is %s (penalty %.0f)", i, got, r.d.Penalty("default", "b", at(float64(60*i))))
		}
		r.step(float64(60*i+30), replica("b", 99), replica("c", 0))
	}
}

func TestDamperMaxHold(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{})}
	for i := 0; i < 100; i++ {
		r.step(float64(i), replica("b", 0), replica("c", 0))
		r.step(float64(i)+0.5, replica("b", 99), replica("c", 0))
	}
	last := 99.5 // the last removal
	max := DefaultReuse * 32.0
	if p := r.d.Penalty("default", "b", at(last)); p > max+1e-6 {
		t.Fatalf("penalty %.0f above the cap %.0f", p, max)
	}
	if got := reasonOf(r.step(last+299, replica("b", 0), replica("c", 0)), "b"); got != "out:damped" {
		t.Fatalf("b before MaxHold is %s", got)
	}
	if got := reasonOf(r.step(last+301, replica("b", 0), replica("c", 0)), "b"); got != "reader:" {
		t.Fatalf("b after MaxHold is %s", got)
	}
}

func TestDamperIgnoresVanishedNodes(t *testing.T) {
	// A reader that vanishes from the view (pruned, or retagged into
	// another cluster) was moved by an operator: no penalty.
	d := NewDamper(DampConfig{})
	d.Apply(at(0), Compute([]Member{replica("b", 0)}, Policy{}, nil), Policy{})
	d.Apply(at(1), Compute(nil, Policy{}, nil), Policy{})
	if p := d.Penalty("default", "b", at(1)); p != 0 {
		t.Fatalf("penalty = %v, want 0", p)
	}
	// A penalised node that is gone is forgotten once decayed.
	d.Apply(at(2), Compute([]Member{replica("b", 0), replica("c", 0)}, Policy{}, nil), Policy{})
	d.Apply(at(3), Compute([]Member{replica("b", 99), replica("c", 0)}, Policy{}, nil), Policy{})
	d.Apply(at(4), Compute(nil, Policy{}, nil), Policy{})
	if p := d.Penalty("default", "b", at(4)); p < DefaultPenalty*0.9 {
		t.Fatalf("penalty after a lag removal = %v, want about %v", p, DefaultPenalty)
	}
	d.Apply(at(3600), Compute(nil, Policy{}, nil), Policy{})
	if len(d.nodes) != 0 {
		t.Fatalf("damper still tracks %d nodes", len(d.nodes))
	}
}

// TestDamperIgnoresOperatorDrains is issue 14's case: one health removal
// (the agent stopped), then maintenance enabled and disabled twice in a few
// seconds. The drains add no penalty, so the node returns at once; health
// removals at the same pace still get it damped.
func TestDamperIgnoresOperatorDrains(t *testing.T) {
	others := []Member{writer("a"), replica("c", 0)}
	with := func(b Member) []Member { return append([]Member{b}, others...) }
	drains := []struct {
		name string
		out  Member
	}{
		{"maintenance", replica("b", 0, maint("kernel upgrade"))},
		{"leaving", replica("b", 0, status(StatusLeaving))},
		{"left", replica("b", 0, status(StatusLeft))},
	}
	for _, dr := range drains {
		t.Run(dr.name, func(t *testing.T) {
			r := &damperRun{t: t, d: NewDamper(DampConfig{})}
			r.step(0, with(replica("b", 0))...)
			r.step(1, with(replica("b", -1, status(StatusFailed)))...) // SIGSTOP: a health removal
			r.step(2, with(replica("b", 0))...)
			for i := range 2 {
				sec := 3 + 2*float64(i)
				if got := reasonOf(r.step(sec, with(dr.out)...), "b"); got != "out:"+dr.name {
					t.Fatalf("t=%gs: b is %s, want out:%s", sec, got, dr.name)
				}
				if got := reasonOf(r.step(sec+1, with(replica("b", 0))...), "b"); got != "reader:" {
					t.Fatalf("t=%gs: b is %s after the drain ended, want reader: (penalty %.0f)",
						sec+1, got, r.d.Penalty("default", "b", at(sec+1)))
				}
			}
			if p := r.d.Penalty("default", "b", at(7)); p > DefaultPenalty {
				t.Fatalf("penalty %.0f after one health removal and two drains, want at most %d", p, DefaultPenalty)
			}
		})
	}
	t.Run("health removals still count", func(t *testing.T) {
		r := &damperRun{t: t, d: NewDamper(DampConfig{})}
		r.step(0, with(replica("b", 0))...)
		r.step(1, with(replica("b", -1, status(StatusFailed)))...)
		r.step(2, with(replica("b", 0))...)
		r.step(3, with(dbh("b", tags.Health{State: tags.Critical}))...)
		r.step(4, with(replica("b", 0))...)
		r.step(5, with(replica("b", 99))...) // lag
		p := r.step(6, with(replica("b", 0))...)
		if got := reasonOf(p, "b"); got != "out:damped" {
			t.Fatalf("b is %s after three health removals, want out:damped (penalty %.0f)", got, r.d.Penalty("default", "b", at(6)))
		}
	})
}

func TestDamperReportsHoldEnd(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{})}
	for i := range 3 {
		r.step(float64(10*i), replica("b", 0), replica("c", 0))
		r.step(float64(10*i+5), replica("b", 99), replica("c", 0))
	}
	// Penalty at the third removal (t=25): 1000·(1+2^(-1/6)+2^(-2/6)) ≈ 2685;
	// it decays below 1000 after 60s·log2(2.685) ≈ 85.5 s.
	p := r.step(30, replica("b", 0), replica("c", 0))
	var until time.Time
	for _, n := range p.Clusters[0].Out {
		if n.Name == "b" && n.Reason == ReasonDamped {
			until = n.Until
		}
	}
	if until.IsZero() {
		t.Fatalf("b is not out:damped with an end time: %s", summary(p))
	}
	if lo, hi := at(110), at(111); until.Before(lo) || until.After(hi) {
		t.Fatalf("hold ends at +%v, want between +110s and +111s", until.Sub(t0))
	}
	// The end does not move while the penalty decays, and the node is back
	// at the first pool at or after it.
	if got := r.step(60, replica("b", 0), replica("c", 0)).Clusters[0].Out[0].Until; !got.Equal(until) {
		t.Fatalf("hold end moved from %v to %v", until, got)
	}
	if got := reasonOf(r.step(until.Sub(t0).Seconds(), replica("b", 0), replica("c", 0)), "b"); got != "reader:" {
		t.Fatalf("b at the announced end is %s, want reader:", got)
	}
	for _, n := range r.prev.Clusters[0].Readers {
		if !n.Until.IsZero() {
			t.Fatalf("reader %s keeps an end time %v", n.Name, n.Until)
		}
	}
}

func TestDamperDoesNotModifyInput(t *testing.T) {
	d := NewDamper(DampConfig{Suppress: 1, Reuse: 10}) // the first removal suppresses
	d.Apply(at(0), Compute([]Member{replica("b", 0), replica("c", 0)}, Policy{}, nil), Policy{})
	d.Apply(at(1), Compute([]Member{replica("b", 99), replica("c", 0)}, Policy{}, nil), Policy{})
	raw := Compute([]Member{replica("b", 0), replica("c", 0)}, Policy{}, nil)
	before := summary(raw)
	out := d.Apply(at(2), raw, Policy{})
	if summary(raw) != before {
		t.Fatalf("Apply modified its input: %s", summary(raw))
	}
	if got := summary(out); got != "default{w[] r[c] o[b:damped]}" {
		t.Fatalf("got %s", got)
	}
	if d.Apply(at(3), nil, Policy{}) == nil {
		t.Fatal("Apply(nil) returned nil")
	}
}

// Issue 26: two planned read_only switchovers a minute apart (db1 -> db2,
// then back) damped the old primary. While the replicas are re-pointed
// they are out for replication reasons for a moment; that follows the
// writer's change, not their own health, and adds no penalty. A reader
// that flaps with the writer unchanged is still damped.
func TestDamperIgnoresSwitchovers(t *testing.T) {
	r := &damperRun{t: t, d: NewDamper(DampConfig{})}
	stopped := func(name string) Member {
		return dbh(name, tags.Health{State: tags.Passing, ReadOnly: true, Replica: true, IORunning: false, SQLRunning: true})
	}
	// One switchover from `from` to `to`, the third server `other`: the old
	// writer turns read-only (no writer for a moment), the new one writable,
	// the replicas are re-pointed (replication stopped, then lagging), then
	// all is healthy.
	switchover := func(sec float64, from, to, other string) {
		r.step(sec, replica(from, 0), replica(to, 0), replica(other, 0))
		r.step(sec+0.2, stopped(from), writer(to), stopped(other))
		r.step(sec+0.5, replica(from, 30), writer(to), replica(other, 30))
		r.step(sec+1, replica(from, 0), writer(to), replica(other, 0))
		r.step(sec+1.5, stopped(from), writer(to), replica(other, 0)) // re-pointed twice
		r.step(sec+2, replica(from, 0), writer(to), replica(other, 0))
	}
	r.step(0, writer("db1"), replica("db2", 0), replica("db3", 0))
	switchover(10, "db1", "db2", "db3")
	switchover(70, "db2", "db1", "db3")
	switchover(130, "db1", "db2", "db3")
	p := r.step(135, writer("db2"), replica("db1", 0), replica("db3", 0))
	for _, n := range []string{"db1", "db3"} {
		if got := reasonOf(p, n); got != "reader:" {
			t.Errorf("%s after three switchovers: %s, want reader: (penalty %.0f)", n, got, r.d.Penalty("default", n, at(135)))
		}
		if pen := r.d.Penalty("default", n, at(135)); pen != 0 {
			t.Errorf("%s: penalty %.0f after switchovers, want 0", n, pen)
		}
	}
	// Past the grace, the same flaps with the writer unchanged are flaps.
	for k := range 4 {
		sec := 200 + float64(k)*5
		r.step(sec, writer("db2"), stopped("db1"), replica("db3", 0))
		r.step(sec+2, writer("db2"), replica("db1", 0), replica("db3", 0))
	}
	if pen := r.d.Penalty("default", "db1", at(218)); pen < DefaultSuppress {
		t.Errorf("db1 flapping with the writer unchanged: penalty %.0f, want over %d", pen, DefaultSuppress)
	}
}
