package soakcheck

import (
	"strings"
	"testing"
	"time"
)

func vs(voter string, sec float64, term uint64, writer string) TermSample {
	return TermSample{At: at(sec), Voter: voter, OK: true, Term: term, Writer: writer}
}

func rt(obs string, sec float64, w string, term uint64, holder string, out ...string) Route {
	r := Route{At: at(sec), Observer: obs, OK: true, Term: term, Holder: holder, Out: map[string]string{}}
	if w != "" {
		r.Writers = strings.Split(w, ",")
	}
	for i := 0; i+1 < len(out); i += 2 {
		r.Out[out[i]] = out[i+1]
	}
	return r
}

// voters1to2: term 1 to db1 from the start, term 2 to db2 seen at 40 s.
func voters1to2() []TermSample {
	var out []TermSample
	for sec := 0.0; sec < 80; sec += 0.5 {
		for _, v := range dbs {
			if sec < 40 {
				out = append(out, vs(v, sec, 1, "db1"))
			} else {
				out = append(out, vs(v, sec, 2, "db2"))
			}
		}
	}
	return out
}

func TestGrants(t *testing.T) {
	gs := Grants(append(voters1to2(), TermSample{At: at(1), Voter: "db3"}, vs("db2", 0.2, 0, "")))
	if len(gs) != 2 || gs[0].Term != 1 || gs[0].Writer != "db1" || !gs[0].Seen.Equal(at(0)) || gs[1].Term != 2 || gs[1].Writer != "db2" || !gs[1].Seen.Equal(at(40)) {
		t.Errorf("got %+v", gs)
	}
	if g, ok := grantAt(gs, at(39.9)); !ok || g.Term != 1 {
		t.Errorf("grantAt 39.9: %+v %v", g, ok)
	}
	if g, _ := grantAt(gs, at(40)); g.Term != 2 {
		t.Errorf("grantAt 40: %+v", g)
	}
}

func TestCheckTerms(t *testing.T) {
	lim := TermLimits{Grace: 2 * time.Second, Skew: 500 * time.Millisecond}
	cases := []struct {
		name    string
		voters  []TermSample
		routes  []Route
		hx      []Sample
		check   func(TermStats) bool
		failing bool
	}{
		{"healthy, with a switchover", voters1to2(),
			[]Route{rt("app1", 10, "db1", 1, "db1"), rt("app1", 39, "", 1, "db1"), rt("app1", 40.3, "db2", 2, "db2"), rt("app2", 5, "", 0, "")},
			[]Sample{smp("hx:app1", 41, "db2")},
			func(st TermStats) bool {
				return st.MaxLag == 1*time.Second && st.LagObserver == "hx:app1" || st.MaxLag == 0
			}, false},
		{"agent ahead of the voter poll, within the skew", voters1to2(), []Route{rt("app1", 39.7, "db2", 2, "db2")}, nil,
			func(st TermStats) bool { return len(st.Stale) == 0 }, false},
		{"agent behind a new term, within the grace", voters1to2(), []Route{rt("app1", 41.5, "db1", 1, "db1")}, nil,
			func(st TermStats) bool { return st.MaxLag == 1500*time.Millisecond }, false},
		{"agent behind a new term, past the grace", voters1to2(), []Route{rt("app1", 43, "db1", 1, "db1")}, nil,
			func(st TermStats) bool { return len(st.Stale) == 1 && len(st.Unowned) == 0 }, true},
		{"HAProxy routes to the old holder past the grace", voters1to2(), nil, []Sample{smp("hx:app2", 45, "db1")},
			func(st TermStats) bool { return len(st.Stale) == 1 && st.Stale[0].Observer == "hx:app2" }, true},
		{"writer without a term", voters1to2(), []Route{rt("app1", 10, "db1", 0, "")}, nil,
			func(st TermStats) bool {
				return len(st.Unowned) == 1 && strings.Contains(st.Unowned[0].What, "no term")
			}, true},
		{"writer not its term's holder", voters1to2(), []Route{rt("app1", 10, "db3", 1, "db1")}, nil,
			func(st TermStats) bool { return len(st.Unowned) == 1 && len(st.Stale) == 1 }, true},
		{"term no voter showed", voters1to2(), []Route{rt("app1", 50, "db2", 7, "db2")}, nil,
			func(st TermStats) bool {
				return len(st.Unowned) == 1 && strings.Contains(st.Unowned[0].What, "no voter showed")
			}, true},
		{"a voter's term goes down", append(voters1to2(), vs("db3", 60.1, 1, "db1")), nil, nil,
			func(st TermStats) bool { return len(st.Back) == 1 && st.Back[0].Observer == "db3" }, true},
		{"a restarted voter knows no term yet: not backwards", append(voters1to2(), vs("db3", 60.1, 0, "")), nil, nil,
			func(st TermStats) bool { return len(st.Back) == 0 }, false},
		{"an agent's term goes down", voters1to2(), []Route{rt("app1", 50, "db2", 2, "db2"), rt("app1", 51, "", 1, "db1")}, nil,
			func(st TermStats) bool { return len(st.Back) == 1 }, true},
		{"a restarted agent may first learn an older term", voters1to2(), []Route{rt("app1", 50, "db2", 2, "db2"), {At: at(51), Observer: "app1"}, rt("app1", 52, "", 0, ""), rt("app1", 52.1, "", 1, "db1"), rt("app1", 52.2, "db2", 2, "db2")}, nil,
			func(st TermStats) bool { return len(st.Back) == 0 }, false},
		{"a term number with two writers", append(voters1to2(), vs("db3", 60.1, 2, "db3")), []Route{rt("app2", 61, "", 2, "db3")}, nil,
			func(st TermStats) bool { return len(st.Forks) == 2 }, true},
		{"no voter ever showed a term", []TermSample{{At: at(1), Voter: "db1", OK: true}}, nil, nil,
			func(st TermStats) bool { return len(st.Grants) == 0 }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := CheckTerms(c.voters, c.routes, c.hx, lim)
			if !c.check(st) {
				t.Errorf("stats: %+v", st)
			}
			if got := len(st.Failures()) > 0; got != c.failing {
				t.Errorf("failures %v, want failing %v", st.Failures(), c.failing)
			}
		})
	}
}

func TestCheckTermFaults(t *testing.T) {
	voters := voters1to2()
	sw := Fault{Kind: KindSwitchover, Target: "db1 → db2", Start: at(38), Heal: at(41), Holder: "db1", Other: "db2"}
	swWrong := Fault{Kind: KindSwitchover, Target: "db1 → db3", Start: at(38), Heal: at(41), Holder: "db1", Other: "db3"}
	swNone := Fault{Kind: KindSwitchover, Target: "db2 → db3", Start: at(60), Heal: at(62), Holder: "db2", Other: "db3"}
	sec := Fault{Kind: KindSecondWritable, Target: "db3", Start: at(50), Heal: at(60), Nodes: []string{"db3"}, Holder: "db2", Other: "db3"}
	kill := Fault{Kind: KindWriterAgent, Target: "db2's agent", Start: at(50), Heal: at(60), Nodes: []string{"db2"}, Observers: []string{"db2"}, Holder: "db2"}
	other := Fault{Kind: "link-cut", Start: at(10), Heal: at(12)}

	// A run of samples per agent: fn gives the route of obs at sec.
	routes := func(fn func(obs string, sec float64) Route) []Route {
		var out []Route
		for sec := 45.0; sec < 75; sec += 0.5 {
			for _, obs := range []string{"app1", "db1", "db2"} {
				out = append(out, fn(obs, sec))
			}
		}
		return out
	}
	good2nd := func(obs string, sec float64) Route {
		if sec >= 51 && sec < 60.5 {
			return rt(obs, sec, "db2", 2, "db2", "db3", "conflict")
		}
		return rt(obs, sec, "db2", 2, "db2")
	}
	goodKill := func(obs string, sec float64) Route {
		switch {
		case obs == "db2" && sec >= 50 && sec < 61:
			return Route{At: at(sec), Observer: obs} // killed, not answering
		case sec >= 51.5 && sec < 60.5:
			return rt(obs, sec, "", 2, "db2", "db2", "failed")
		}
		return rt(obs, sec, "db2", 2, "db2")
	}
	cases := []struct {
		name   string
		fault  Fault
		voters []TermSample
		routes []Route
		hx     []Sample
		issue  string // "" for none
	}{
		{"switchover moves the term by one", sw, voters, nil, nil, ""},
		{"switchover to another server", swWrong, voters, nil, nil, "term 2 to db2 after term 1 to db1 (want term 2 to db3)"},
		{"switchover without a new term", swNone, voters, nil, nil, "0 new terms"},
		{"second-writable held", sec, voters, routes(good2nd), []Sample{smp("hx:app1", 55, "db2")}, ""},
		{"second-writable: an agent's writer changes", sec, voters, routes(func(obs string, s float64) Route {
			if obs == "app1" && s == 55 {
				return rt(obs, s, "", 2, "db2", "db2", "conflict", "db3", "conflict")
			}
			return good2nd(obs, s)
		}), nil, "app1 not routing writes to db2 alone: 1 samples"},
		{"second-writable: HAProxy routes to the writable replica", sec, voters, routes(good2nd), []Sample{smp("hx:app1", 55, "db3")}, "hx:app1 not routing writes to db2 alone"},
		{"second-writable: conflict never shown", sec, voters, routes(func(obs string, s float64) Route {
			if obs == "db1" {
				return rt(obs, s, "db2", 2, "db2", "db3", "stale")
			}
			return good2nd(obs, s)
		}), nil, "db1 never showed db3 out with reason conflict"},
		{"second-writable: the term moves", sec, append(voters, vs("db1", 55, 3, "db3")), routes(good2nd), nil, "the term changed"},
		{"writer-agent-kill held", kill, voters, routes(goodKill), []Sample{smp("hx:app1", 55, ""), smp("hx:app1", 62, "db2")}, ""},
		{"writer-agent-kill: an agent keeps the writer", kill, voters, routes(func(obs string, s float64) Route {
			if obs == "app1" && s <= 60 {
				return rt(obs, s, "db2", 2, "db2")
			}
			return goodKill(obs, s)
		}), nil, "app1 kept a writer until the restart"},
		{"writer-agent-kill: a writer again while failed", kill, voters, routes(func(obs string, s float64) Route {
			if obs == "db1" && s == 55 {
				return rt(obs, s, "db2", 2, "db2")
			}
			return goodKill(obs, s)
		}), nil, "db1 had a writer again before the restart"},
		{"writer-agent-kill: another writer", kill, voters, routes(func(obs string, s float64) Route {
			if obs == "app1" && s == 55 {
				return rt(obs, s, "db1", 2, "db2")
			}
			return goodKill(obs, s)
		}), nil, "app1 routing writes elsewhere than db2: 1 samples, the first writer db1"},
		{"writer-agent-kill: not back after the restart", kill, voters, routes(func(obs string, s float64) Route {
			if obs == "app1" && s >= 60 {
				return rt(obs, s, "", 2, "db2")
			}
			return goodKill(obs, s)
		}), nil, `app1 after the restart: writer "" under term 2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckTermFaults([]Fault{other, c.fault}, c.voters, c.routes, c.hx, 8*time.Second)
			if len(got) != 1 {
				t.Fatalf("%d judged, want 1 (the link-cut is not judged)", len(got))
			}
			is := strings.Join(got[0].Issues, "; ")
			if c.issue == "" && is != "" || c.issue != "" && !strings.Contains(is, c.issue) {
				t.Errorf("issues %q, want %q", is, c.issue)
			}
		})
	}
}

func TestCheckTermWrites(t *testing.T) {
	st := CheckTerms(voters1to2(), nil, nil, TermLimits{Grace: 2 * time.Second, Skew: 500 * time.Millisecond})
	w := func(start, end float64, node, err string) Write {
		return Write{Client: "app1", Start: at(start), End: at(end), Node: node, Err: err}
	}
	st.CheckTermWrites([]Write{
		w(1, 1.1, "db1", ""),
		w(39.9, 40.1, "db1", ""), // the old holder until 40
		w(40.3, 40.4, "db1", ""), // within the skew of the new term
		w(39.8, 39.9, "db2", ""), // the new holder, within the skew
		w(41, 41.1, "db1", ""),   // the old holder after its term: wrong
		w(10, 10.1, "db3", ""),   // never a holder: wrong
		w(12, 12.1, "", "dial tcp: i/o timeout"),
	})
	if st.Writes != 6 || len(st.Outside) != 2 || st.Outside[0].Node != "db1" || st.Outside[1].Node != "db3" {
		t.Errorf("writes %d, outside %+v", st.Writes, st.Outside)
	}
}

func TestUnexplainedGrants(t *testing.T) {
	gs := []Grant{{1, "db1", at(0)}, {2, "db2", at(40)}, {3, "db3", at(70)}}
	sw := Fault{Kind: KindSwitchover, Start: at(38), Heal: at(39)}
	got := UnexplainedGrants(gs, []Fault{sw, {Kind: "partition", Start: at(65), Heal: at(75)}}, 8*time.Second)
	if len(got) != 1 || got[0].Term != 3 {
		t.Errorf("got %+v", got)
	}
}

func TestReportTerms(t *testing.T) {
	r := Result{Start: t0, Duration: time.Hour, Consensus: true,
		Terms:      CheckTerms(voters1to2(), []Route{rt("app1", 43, "db1", 1, "db1")}, nil, TermLimits{Grace: 2 * time.Second}),
		TermFaults: []TermFault{{Fault: Fault{Kind: KindWriterAgent, Start: at(50)}, Issues: []string{"app1 kept a writer"}}},
	}
	md := r.Markdown("")
	for _, want := range []string{"## Writer terms", "term 1 to db1 (first seen +0s), term 2 to db2 (first seen +40s)", "writer not the current holder at +43s on app1", "**FAIL**: app1 kept a writer"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if f := strings.Join(r.Failures(), ";"); !strings.Contains(f, "1 agent or HAProxy samples") || !strings.Contains(f, "1 of 1 switchover") {
		t.Errorf("failures: %s", f)
	}
	if md := (Result{}).Markdown(""); !strings.Contains(md, "SOAK_CONSENSUS=0") {
		t.Errorf("a run without consensus does not say so:\n%s", md)
	}
}
