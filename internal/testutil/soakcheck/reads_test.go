package soakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestStaleness(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Seq 2 failed (no ack): it may or may not exist.
	acks := []Ack{{1, at(100)}, {3, at(300)}, {4, at(400)}}
	for _, c := range []struct {
		name   string
		start  int
		maxSeq int64
		want   time.Duration
	}{
		{"saw everything", 500, 4, 0},
		{"saw a write not yet acknowledged", 350, 4, 0},
		{"nothing acknowledged before the read", 50, 0, 0},
		{"missed the last write", 500, 3, 100 * time.Millisecond},
		{"missed writes since the first", 1000, 0, 900 * time.Millisecond},
		{"saw the unacknowledged one, missed the next", 1000, 2, 700 * time.Millisecond},
		{"missed only a write acknowledged after the start", 350, 3, 0},
		{"acknowledged at the very start does not count", 300, 1, 0},
	} {
		if got := Staleness(acks, at(c.start), c.maxSeq); got != c.want {
			t.Errorf("%s: Staleness(start +%dms, max seq %d) = %s, want %s", c.name, c.start, c.maxSeq, got, c.want)
		}
	}
}

func TestCheckReads(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var acks []Ack
	for i := range 100 { // one write every 100 ms for 10 s
		acks = append(acks, Ack{int64(i + 1), t0.Add(time.Duration(i) * 100 * time.Millisecond)})
	}
	reads := []Read{
		{Client: "app1", Start: t0.Add(5 * time.Second), Node: "db2", MaxSeq: 50}, // fresh
		{Client: "app1", Start: t0.Add(9 * time.Second), Node: "db3", MaxSeq: 11}, // missed seq 12 (+1.1 s): 7.9 s
		{Client: "app1", Start: t0.Add(9 * time.Second), Node: "db3", MaxSeq: 1},  // missed seq 2 (+0.1 s): 8.9 s
		{Client: "app1", Start: t0.Add(9 * time.Second), Err: "i/o timeout"},      // not judged
		{Client: "app2", Start: t0.Add(9 * time.Second), Node: "db3", MaxSeq: 0},  // app2 wrote nothing
		{Client: "app1", Start: t0.Add(8 * time.Second), Node: "db2", MaxSeq: 79}, // missed seq 80 (+7.9 s): 0.1 s
	}
	// app1 was cut off from the primary at 8.95-9 s; app2 at 8-10 s.
	cut := []CutOff{{"app1", Window{t0.Add(8950 * time.Millisecond), t0.Add(9 * time.Second)}}, {"app2", Window{t0.Add(8 * time.Second), t0.Add(10 * time.Second)}}}
	st := CheckReads(reads, map[string][]Ack{"app1": acks}, 8*time.Second, nil)
	if st.Total != 6 || st.OK != 5 || st.Failed != 1 || st.Late != 3 {
		t.Errorf("counts: total %d ok %d failed %d late %d, want 6 5 1 3", st.Total, st.OK, st.Failed, st.Late)
	}
	if len(st.Stale) != 1 || st.Stale[0].MaxSeq != 1 || st.Stale[0].Stale != 8900*time.Millisecond {
		t.Errorf("stale reads: %+v, want the one that saw seq 1 only, 8.9 s stale", st.Stale)
	}
	if st.Max != 8900*time.Millisecond || st.P50 != 100*time.Millisecond {
		t.Errorf("max %s p50 %s, want 8.9s 100ms", st.Max, st.P50)
	}
	if c := CheckReads(reads, map[string][]Ack{"app1": acks}, 8*time.Second, cut); len(c.Stale) != 0 || len(c.CutOff) != 1 || c.CutOff[0].MaxSeq != 1 {
		t.Errorf("with app1 cut off at 9 s: stale %+v, cut off %+v; want the stale read counted as cut off", c.Stale, c.CutOff)
	}
	if c := CheckReads(reads, map[string][]Ack{"app1": acks}, 8*time.Second, cut[1:]); len(c.Stale) != 1 || len(c.CutOff) != 0 {
		t.Errorf("with app2 cut off: stale %+v, cut off %+v; want app1's read still stale", c.Stale, c.CutOff)
	}
	r := Result{Reads: st}
	if f := r.Failures(); len(f) != 1 || f[0] != "1 stale reads (staler than 8s)" {
		t.Errorf("Failures() = %q, want the stale read", f)
	}
	md := r.Markdown("")
	for _, want := range []string{"1 stale reads (staler than 8s)", "| 1 of 5 answered (and 0 while cut off): staleness p50 0.10 s, p99 8.90 s, max 8.90 s | **FAIL** |",
		"## Stale reads", "| db3 | 1 | 8.90 s | app1 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestEpisodes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	st := ReadStats{Stale: []Read{
		{Client: "app1", Node: "db2", Start: at(10), Stale: 11 * time.Second},
		{Client: "app2", Node: "db3", Start: at(10.5), Stale: 12 * time.Second},
		{Client: "app2", Node: "db2", Start: at(12), Stale: 13 * time.Second},
		{Client: "app1", Node: "db2", Start: at(30), Stale: 12 * time.Second}, // 18 s later: a new episode
	}}
	got := st.Episodes(5 * time.Second)
	if len(got) != 3 {
		t.Fatalf("Episodes = %+v, want 3", got)
	}
	if e := got[0]; e.Node != "db2" || e.Reads != 2 || !e.To.Equal(at(12)) || e.Max != 13*time.Second || len(e.Clients) != 2 {
		t.Errorf("first episode %+v, want db2, 2 reads to +12s, max 13s, both clients", e)
	}
	if e := got[2]; e.Node != "db2" || e.Reads != 1 || !e.From.Equal(at(30)) {
		t.Errorf("third episode %+v, want db2 from +30s, 1 read", e)
	}
}
