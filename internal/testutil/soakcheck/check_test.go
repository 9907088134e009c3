package soakcheck

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// healthy is db1 writer, db2 and db3 readers.
func smp(obs string, sec float64, w string, r ...string) Sample {
	s := Sample{At: at(sec), Observer: obs, OK: true, Readers: r}
	if w != "" {
		s.Writers = strings.Split(w, ",")
	}
	return s
}

var dbs = []string{"db1", "db2", "db3"}

func TestTwoWriters(t *testing.T) {
	got := TwoWriters([]Sample{smp("app1", 1, "db1", "db2"), smp("hx:app1", 2, "db1,db2"), {At: at(3), Observer: "db1", Writers: []string{"a", "b"}}})
	if len(got) != 1 || got[0].Observer != "hx:app1" {
		t.Errorf("got %+v", got)
	}
}

func TestFalseRemovals(t *testing.T) {
	faults := []Fault{
		{Kind: "mysqld-kill", Target: "db2", Start: at(10), Heal: at(15), Nodes: []string{"db2"}},
		{Kind: "agent-kill", Target: "app1", Start: at(30), Heal: at(31), Observers: []string{"app1"}},
		{Kind: "partition", Start: at(50), Heal: at(55), Sides: [2][]string{{"db1", "app1"}, {"db2", "db3", "app2"}}},
		{Kind: "agent-kill", Target: "app2", Start: at(70), Heal: at(72), Observers: []string{"app2"}, OutOn: map[string][]string{"hx:app2": {"db1"}}},
	}
	allow := 2 * time.Second
	samples := []Sample{
		smp("app1", 9, "db1", "db2", "db3"),
		smp("app1", 11, "db1", "db3"),    // db2 out: explained
		smp("app1", 16.5, "db1", "db3"),  // within the allowance
		smp("app1", 18, "db1", "db3"),    // beyond: false
		{At: at(18.5), Observer: "app1"}, // no answer: neither ends nor extends
		smp("app1", 19, "db1", "db3"),    // still false, same run
		smp("app1", 20, "db1", "db2", "db3"),
		smp("app1", 30.5, "", ""),       // app1 restarting: its own view explained
		smp("app2", 30.5, "db1", "db2"), // app2 lost db3: false
		smp("hx:app1", 52, "db1"),       // app1's side: db2, db3 out explained
		smp("hx:app2", 52, "", "db2"),   // app2's side: db1 out explained, db3 out false
		smp("db2", 52, "", "db3"),       // db2's side lost db1 (explained), db2 itself out: false
		smp("hx:app2", 73, "", "db2"),   // app2's agent restarted, no term yet: the writer out explained, db3 out false
		smp("hx:app1", 73, "", "db2"),   // not app1's HAProxy: db1 and db3 out false
	}
	got := FalseRemovals(samples, dbs, faults, allow)
	// hx:app2's db3 stays out from 52 to 73 (no sample between shows it in).
	want := []string{"app1 db2 18 19 2", "app2 db3 30.5 30.5 1", "hx:app2 db3 52 1m13 2", "db2 db2 52 52 1", "hx:app1 db1 1m13 1m13 1", "hx:app1 db3 1m13 1m13 1"}
	if len(got) != len(want) {
		t.Fatalf("got %d removals, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		s := r.Observer + " " + r.Node + " " + trim(r.From) + " " + trim(r.To) + " " + string(rune('0'+r.Samples))
		if s != want[i] {
			t.Errorf("removal %d: %s, want %s", i, s, want[i])
		}
	}
}

func trim(ts time.Time) string {
	return strings.TrimSuffix(strings.TrimSuffix(ts.Sub(t0).String(), "s"), ".0")
}

func TestConverge(t *testing.T) {
	e := Expect{DBs: dbs, Primaries: []Primary{{t0, "db1"}, {at(40), "db2"}}}
	faults := []Fault{
		{Kind: "link-cut", Target: "db3", Start: at(5), Heal: at(10)},
		{Kind: "switchover", Target: "db2", Start: at(35), Heal: at(40)},
		{Kind: "mysqld-stop", Target: "db3", Start: at(60), Heal: at(62)},
	}
	var s []Sample
	for sec := 0.0; sec < 80; sec += 0.5 {
		for _, obs := range []string{"app1", "hx:app1"} {
			switch {
			case sec >= 5 && sec < 11.5, sec >= 60 && obs == "app1": // app1 never converges after the last
				s = append(s, smp(obs, sec, "db1", "db2"))
			case sec >= 35 && sec < 40.5:
				s = append(s, smp(obs, sec, "", "db1", "db3"))
			case sec >= 40.5:
				s = append(s, smp(obs, sec, "db2", "db1", "db3"))
			default:
				s = append(s, smp(obs, sec, "db1", "db2", "db3"))
			}
		}
	}
	got := Converge(s, []string{"app1", "hx:app1"}, faults, e, at(80))
	if len(got) != 3 {
		t.Fatalf("got %+v", got)
	}
	if c := got[0]; !c.Converged || c.Took != 1500*time.Millisecond {
		t.Errorf("link-cut: %+v", c)
	}
	if c := got[1]; !c.Converged || c.Took != 500*time.Millisecond {
		t.Errorf("switchover (new primary db2): %+v", c)
	}
	if c := got[2]; c.Converged || c.Last != "app1" || c.Took != 18*time.Second {
		t.Errorf("last fault: %+v", c)
	}
}

func TestCheckWrites(t *testing.T) {
	e := Expect{DBs: dbs, Primaries: []Primary{{t0, "db1"}, {at(40), "db2"}}}
	sw := []Window{{at(39), at(41)}}
	w := func(start, end float64, node, err string) Write {
		return Write{Start: at(start), End: at(end), Node: node, Err: err}
	}
	st := CheckWrites([]Write{
		w(1, 1.1, "db1", ""),
		w(39.9, 40.1, "db2", ""), // the new primary, writable during the write
		w(41, 41.1, "db1", ""),   // the old primary after the switchover: wrong
		w(39.5, 39.6, "", "Error 1290 (HY000): The MariaDB server is running with the --read-only option"),
		w(50, 50.1, "", "Error 1290 (HY000): read-only"),
		w(60, 62, "", "dial tcp: i/o timeout"),
	}, e, sw)
	if st.Total != 6 || st.OK != 3 || st.Failed != 3 || st.ReadOnly != 2 || st.ReadOnlyInSwitchover != 1 || st.ReadOnlyOutside != 1 || len(st.WrongServer) != 1 || st.WrongServer[0].Node != "db1" {
		t.Errorf("got %+v", st)
	}
}

func TestLifetimes(t *testing.T) {
	lim := Limits{Warmup: 5 * time.Minute, MaxRSSGrowth: 0.10, MaxGoroutineRise: 5, MaxFDRise: 3, MinSamples: 6}
	var rs []Resource
	for m := 0; m <= 30; m++ {
		ts := t0.Add(time.Duration(m) * time.Minute)
		rs = append(rs, Resource{At: ts, Agent: "db1", PID: 100, RSS: 20 << 20, Goroutines: 40, FDs: 12})                    // flat
		rs = append(rs, Resource{At: ts, Agent: "db2", PID: 200, RSS: int64(20+m) << 20, Goroutines: 40 + m, FDs: 12 + m/5}) // leaks
		if m < 8 {
			rs = append(rs, Resource{At: ts, Agent: "app1", PID: 300, RSS: 30 << 20, Goroutines: 50, FDs: 10}) // too short
		}
	}
	ls := Lifetimes(rs, lim)
	got := map[string]Lifetime{}
	for _, l := range ls {
		got[l.Agent] = l
	}
	if l := got["db1"]; !l.Judged || !l.OK || l.RSSGrowth != 0 {
		t.Errorf("db1: %+v", l.Why)
	}
	if l := got["db2"]; !l.Judged || l.OK || !strings.Contains(l.Why, "RSS grew") || !strings.Contains(l.Why, "goroutines") || !strings.Contains(l.Why, "fds") {
		t.Errorf("db2: judged %v ok %v why %q", l.Judged, l.OK, l.Why)
	}
	if l := got["app1"]; l.Judged || !l.OK || !strings.HasPrefix(l.Why, "not judged") {
		t.Errorf("app1: %+v", l.Why)
	}
}

func TestReport(t *testing.T) {
	r := Result{Start: t0, Duration: time.Hour, Seed: 42, Replay: "SOAK_SEED=42 make soak", Bound: 3 * time.Second, Allowance: 10 * time.Second,
		Limits:      Limits{Warmup: 5 * time.Minute, MaxRSSGrowth: 0.1, MaxGoroutineRise: 5, MaxFDRise: 3},
		Convergence: []Convergence{{Fault: Fault{Kind: "link-cut", Target: "db3", Start: at(1), Heal: at(5)}, Took: 4 * time.Second, Converged: true, Last: "app1"}},
		Lifetimes:   Lifetimes([]Resource{{At: t0, Agent: "db1", PID: 1, RSS: 1 << 20}}, Limits{}),
		Load:        []Load{{At: t0, Load1: 1.5}},
	}
	md := r.Markdown("soak/soak.svg")
	for _, want := range []string{"seed 42", "1 invariants missed", "not converged within 3s", "link-cut db3 healed at +5s: converged after 4.00 s", "![agent RSS", "1.50"} {
		if !strings.Contains(md, want) && !strings.Contains(strings.Join(r.Failures(), ";"), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(r.SVG(), "db1 RSS") {
		t.Error("SVG lacks db1's line")
	}
}

// A fault that may have fenced the writer gets fence_after more: the same
// 4 s is over the bound without it and within it with it.
func TestUnfenceWidensTheBound(t *testing.T) {
	c := Convergence{Fault: Fault{Kind: "link-cut", Target: "db1", Start: at(1), Heal: at(5)}, Took: 4 * time.Second, Converged: true}
	r := Result{Bound: 3 * time.Second, Convergence: []Convergence{c}}
	if v := r.ConvergenceViolations(); len(v) != 1 {
		t.Errorf("without Unfence: %d violations, want 1", len(v))
	}
	c.Fault.Unfence = 3 * time.Second
	r.Convergence = []Convergence{c}
	if v := r.ConvergenceViolations(); len(v) != 0 {
		t.Errorf("with Unfence 3s: %+v, want none", v)
	}
	if md := r.Markdown(""); !strings.Contains(md, "within 3s (+3s after a cut that may have fenced the writer") {
		t.Errorf("report does not state the wider bound:\n%s", md)
	}
	c.Took = 6500 * time.Millisecond
	r.Convergence = []Convergence{c}
	if v := r.ConvergenceViolations(); len(v) != 1 {
		t.Errorf("6.5s with Unfence 3s: %d violations, want 1", len(v))
	}
}

func TestProbeTimeoutsSumsLastSamplePerProcess(t *testing.T) {
	ls := []Lifetime{
		{Agent: "db1", PID: 1, Samples: []Resource{{Timeouts: 1}, {Timeouts: 3, StalledTimeouts: 2}}},
		{Agent: "db1", PID: 2, Samples: []Resource{{Timeouts: 4, StalledTimeouts: 1}}}, // restarted: counters from 0
		{Agent: "app1", PID: 3},
	}
	if to, st := ProbeTimeouts(ls); to != 7 || st != 3 {
		t.Errorf("ProbeTimeouts = %d, %d; want 7, 3", to, st)
	}
}

func TestWriterGap(t *testing.T) {
	s := []Sample{
		smp("hx:app1", 1, "db1"), smp("hx:app1", 2, ""), {At: at(2.5), Observer: "hx:app1"}, smp("hx:app1", 3, ""), smp("hx:app1", 3.5, "db1"),
		smp("hx:app2", 3, ""), // another observer
		smp("hx:app1", 10, ""), smp("hx:app1", 10.2, ""),
	}
	if g := WriterGap(s, "hx:app1", at(0), at(20)); g != 1500*time.Millisecond {
		t.Errorf("gap %s, want 1.5s", g)
	}
	if g := WriterGap(s, "hx:app1", at(9), at(20)); g != 200*time.Millisecond {
		t.Errorf("gap at the end %s, want 200ms", g)
	}
}

// Raft voters may grow by the bound of raft's connection pool; other
// agents may not.
func TestVoterResourceAllowance(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	var rs []Resource
	for i := range 12 {
		fds, gor, rss := 20, 50, int64(20<<20)
		if i >= 6 {
			fds, gor, rss = 28, 60, 23<<20 // a leader change: +8 fds, +10 goroutines, +15% RSS
		}
		for _, a := range []string{"db1", "app1"} {
			rs = append(rs, Resource{At: t0.Add(time.Duration(i) * 15 * time.Second), Agent: a, PID: 1, RSS: rss, FDs: fds, Goroutines: gor})
		}
	}
	lim := Limits{Warmup: 0, MaxRSSGrowth: 0.10, MaxGoroutineRise: 5, MaxFDRise: 3, MinSamples: 6,
		Voters: map[string]bool{"db1": true}, VoterRise: 12, VoterRSSGrowth: 0.25}
	for _, l := range Lifetimes(rs, lim) {
		switch {
		case l.Agent == "db1" && (!l.Judged || !l.OK):
			t.Errorf("voter db1: judged %v ok %v (%s), want within the voter allowance", l.Judged, l.OK, l.Why)
		case l.Agent == "app1" && (!l.Judged || l.OK):
			t.Errorf("app1: judged %v ok %v, want a failure (%s)", l.Judged, l.OK, l.Why)
		}
	}
}
