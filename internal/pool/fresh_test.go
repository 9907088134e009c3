package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// gtid sets the member's GTID position to domain 0 at seq.
func gtid(seq uint64) opt {
	return func(m *Member) {
		h, err := tags.Published(m.Tags)
		if err != nil || h == nil {
			panic("gtid: no health tag")
		}
		h.Position = tags.Position{N: 1, Domains: [tags.MaxDomains]tags.Domain{{ID: 0, Seq: seq}}}
		m.Tags[tags.KeyHealth] = tags.Encode(*h)
	}
}

// freshRun feeds a History the members at each time and computes the pool.
type freshRun struct {
	t      *testing.T
	hist   *History
	policy Policy
	start  time.Time
	prev   *Pool
}

func newFreshRun(t *testing.T, policy Policy) *freshRun {
	return &freshRun{t: t, hist: NewHistory(0), policy: policy, start: time.Unix(1_700_000_000, 0)}
}

func (r *freshRun) at(sec float64, ms ...Member) (*Pool, Lags) {
	now := r.start.Add(time.Duration(sec * float64(time.Second)))
	r.hist.Observe(now, ms)
	p, l := ComputeFresh(ms, r.policy, r.prev, Freshness{Now: now, History: r.hist}, TermView{})
	r.prev = p
	return p, l
}

// TestSilentCutIsStale: the replica reports IO running and lag 0 (a silently
// cut link), but its position stopped while the writer's moved on: it is out
// with reason stale once the writer passed its position more than max_lag
// ago, not before, and the writer serves reads instead.
func TestSilentCutIsStale(t *testing.T) {
	r := newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackWriter})
	// In step until t=10, then the replica stops at 100 while the writer
	// goes on, one transaction a second.
	for sec := 0; sec <= 10; sec++ {
		p, l := r.at(float64(sec), writer("w", gtid(uint64(90+sec))), replica("r", 0, gtid(uint64(90+sec))))
		if got := summary(p); got != "default{w[w] r[r] o[]}" {
			t.Fatalf("t=%d in step: %s", sec, got)
		}
		if lag := l.Nodes["default"]["r"]; lag.Source != LagGTID || lag.Transactions != 0 || lag.Seconds != 0 {
			t.Fatalf("t=%d in step: lag %+v", sec, lag)
		}
	}
	var lastLag Lag
	for sec := 11; sec <= 16; sec++ {
		p, l := r.at(float64(sec), writer("w", gtid(uint64(90+sec))), replica("r", 0, gtid(100)))
		lastLag = l.Nodes["default"]["r"]
		// The writer passed 100 at t=11: at t=16, 5 s is not over 5 s.
		if got := summary(p); got != "default{w[w] r[r] o[]}" {
			t.Fatalf("t=%d: %s, want r still a reader", sec, got)
		}
		if due := r.start.Add(16*time.Second + time.Millisecond); !l.Recheck.Equal(due) {
			t.Fatalf("t=%d: recheck %v, want %v", sec, l.Recheck, due)
		}
	}
	if lastLag.Transactions != 6 || lastLag.Seconds != 5 || lastLag.AtLeast {
		t.Fatalf("lag at t=16: %+v, want 6 transactions, 5 s", lastLag)
	}
	// At the recheck, with nothing new gossiped: stale.
	p, l := r.at(16.001, writer("w", gtid(106)), replica("r", 0, gtid(100)))
	if got := summary(p); got != "default{w[w] r[w:fallback] o[r:stale]}" {
		t.Fatalf("after max_lag: %s", got)
	}
	if !l.Recheck.IsZero() {
		t.Fatalf("recheck %v with no fresh replica behind", l.Recheck)
	}
	// Caught up: back in.
	p, _ = r.at(20, writer("w", gtid(110)), replica("r", 0, gtid(110)))
	if got := summary(p); got != "default{w[w] r[r] o[]}" {
		t.Fatalf("caught up: %s", got)
	}
}

// TestIdleIsNeverStale: with no writes the positions are equal however long
// it lasts, and a replica whose Seconds_Behind_Master is high but whose
// position covers the writer's is fresh.
func TestIdleIsNeverStale(t *testing.T) {
	r := newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackWriter})
	for sec := 0; sec <= 3600; sec += 60 {
		p, l := r.at(float64(sec), writer("w", gtid(42)), replica("r", 900, gtid(42)))
		if got := summary(p); got != "default{w[w] r[r] o[]}" {
			t.Fatalf("t=%d: %s", sec, got)
		}
		if !l.Recheck.IsZero() {
			t.Fatalf("t=%d: recheck %v", sec, l.Recheck)
		}
	}
	// The first write after an hour idle does not make the replica stale:
	// the writer passed 42 only now.
	p, _ := r.at(3601, writer("w", gtid(43)), replica("r", 0, gtid(42)))
	if got := summary(p); got != "default{w[w] r[r] o[]}" {
		t.Fatalf("first write after idle: %s", got)
	}
}

// TestFreshAgentLagIsALowerBound: an agent that starts while a replica is
// behind counts from the first writer position it saw, says so, and turns
// the replica stale max_lag later.
func TestFreshAgentLagIsALowerBound(t *testing.T) {
	r := newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackNone})
	_, l := r.at(0, writer("w", gtid(500)), replica("r", 0, gtid(100)))
	if lag := l.Nodes["default"]["r"]; lag.Transactions != 400 || !lag.AtLeast || lag.Seconds != 0 {
		t.Fatalf("lag %+v, want 400 transactions, at least 0 s", lag)
	}
	p, _ := r.at(6, writer("w", gtid(500)), replica("r", 0, gtid(100)))
	if got := summary(p); got != "default{w[w] r[] o[r:stale]}" {
		t.Fatalf("after max_lag: %s", got)
	}
}

// TestStaleWithoutGTIDKeepsSBMRule: without positions the replica's own
// report decides, as before.
func TestStaleWithoutGTIDKeepsSBMRule(t *testing.T) {
	r := newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 0})
	p, l := r.at(0, writer("w"), replica("r", 9))
	if got := summary(p); got != "default{w[w] r[] o[r:lag]}" {
		t.Fatalf("%s", got)
	}
	if lag := l.Nodes["default"]["r"]; lag.Source != LagSBM || !lag.Known || lag.Seconds != 9 {
		t.Fatalf("lag %+v", lag)
	}
	// The writer publishes a position, the replica does not (an older
	// agent): still the replica's own report.
	p, l = r.at(1, writer("w", gtid(5)), replica("r", 0))
	if got := summary(p); got != "default{w[w] r[r] o[]}" {
		t.Fatalf("%s", got)
	}
	if lag := l.Nodes["default"]["r"]; lag.Source != LagSBM {
		t.Fatalf("lag %+v", lag)
	}
}

// TestHistoryRestartsWhenAPositionGoesBack: a position lacking transactions
// of the previous one (a restore) starts the node's history anew, and nodes
// that left the member list are forgotten.
func TestHistoryRestartsWhenAPositionGoesBack(t *testing.T) {
	h := NewHistory(0)
	t0 := time.Unix(0, 0)
	h.Observe(t0, []Member{writer("w", gtid(10))})
	h.Observe(t0.Add(time.Second), []Member{writer("w", gtid(20))})
	h.Observe(t0.Add(2*time.Second), []Member{writer("w", gtid(5))})
	if n := len(h.nodes["w"].samples); n != 1 {
		t.Fatalf("%d samples after the position went back, want 1", n)
	}
	h.Observe(t0.Add(3*time.Second), nil)
	if len(h.nodes) != 0 {
		t.Fatalf("history keeps %d nodes that left", len(h.nodes))
	}
}

// TestHistoryIsBounded: samples older than keep go, but the newest stays,
// and no node holds more than maxSamples.
func TestHistoryIsBounded(t *testing.T) {
	h := NewHistory(time.Minute)
	t0 := time.Unix(0, 0)
	for i := range maxSamples + 100 {
		h.Observe(t0.Add(time.Duration(i)*time.Millisecond), []Member{writer("w", gtid(uint64(i)))})
	}
	if n := len(h.nodes["w"].samples); n != maxSamples {
		t.Fatalf("%d samples, want the bound %d", n, maxSamples)
	}
	h.Observe(t0.Add(time.Hour), []Member{writer("w", gtid(maxSamples+99))})
	if n := len(h.nodes["w"].samples); n != 1 {
		t.Fatalf("%d samples an hour later, want only the newest", n)
	}
}

// TestFencedHolderIsTheFreshnessReference reproduces the hour-long soak's
// stale reads (30 reads 14-18 s stale): the writer dbp, cut off from the
// quorum with one app host, took writes until it fenced itself; at the
// heal the replicas came back silently behind (IO running, lag 0) while
// dbp was still read-only. With no writer their freshness was judged by
// Seconds_Behind_Master, so they served reads that missed dbp's writes.
// The read-only term holder is the reference now: the replicas are stale
// and the holder serves reads instead, until they catch up.
func TestFencedHolderIsTheFreshnessReference(t *testing.T) {
	t3 := Term{Cluster: "default", Number: 3, Writer: "dbp", Addr: "dbp:3306"}
	tv := TermView{Terms: map[string]Term{"default": t3}}
	r := newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackWriter})
	at := func(sec float64, ms ...Member) *Pool {
		now := r.start.Add(time.Duration(sec * float64(time.Second)))
		r.hist.Observe(now, ms)
		p, _ := ComputeFresh(ms, r.policy, r.prev, Freshness{Now: now, History: r.hist}, tv)
		r.prev = p
		return p
	}
	fenced := func(seq uint64) Member {
		return dbh("dbp", tags.Health{State: tags.Passing, ReadOnly: true}, rv, gtid(seq))
	}
	rep := func(name string, seq uint64) Member { return replica(name, 0, rv, gtid(seq)) }
	// In step, then dbp alone (its side of the cut) takes writes 101-115.
	if got := summary(at(0, writer("dbp", rv, gtid(100)), rep("dbr", 100), rep("dbs", 100))); got != "default{w[dbp] r[dbr dbs] o[]}" {
		t.Fatalf("in step: %s", got)
	}
	for sec := 1; sec <= 15; sec++ {
		at(float64(sec), writer("dbp", rv, gtid(uint64(100+sec))))
	}
	// Fenced at 115; at the heal the replicas are back, 15 transactions behind.
	p := at(16, fenced(115), rep("dbr", 100), rep("dbs", 100))
	if got := summary(p); got != "default{w[] r[dbp:fallback] o[dbr:stale dbs:stale]}" {
		t.Fatalf("healed, holder fenced: %s", got)
	}
	if d := details(p.Clusters[0])["dbp"]; !strings.Contains(d, "read-only holder of term 3") {
		t.Fatalf("holder's detail %q", d)
	}
	// One caught up: it reads, the holder steps back out.
	if got := summary(at(17, fenced(115), rep("dbr", 115), rep("dbs", 104))); got != "default{w[] r[dbr] o[dbp:replication-stopped dbs:stale]}" {
		t.Fatalf("one caught up: %s", got)
	}
	// The holder is the only read-only server left: the floor keeps it.
	if got := summary(at(18, fenced(115))); got != "default{w[] r[dbp:floor] o[]}" {
		t.Fatalf("holder alone: %s", got)
	}
	// Unfenced: the writer again, the reference as before.
	if got := summary(at(19, writer("dbp", rv, gtid(116)), rep("dbr", 116), rep("dbs", 116))); got != "default{w[dbp] r[dbr dbs] o[]}" {
		t.Fatalf("unfenced: %s", got)
	}
}

// TestWriterBackFromAwayJudgesStuckReplicas reproduces the second hour-long
// soak's stale reads after a heal (seed 1795774670096188154, +17m43s): app2
// and replica dbs were cut off from the writer dbp (and dbr) for 17.6 s; a
// write dbp acknowledged as the cut began never reached dbs. This agent
// first saw dbp's newer position at the heal, so dbs looked 0 s behind and
// served reads until it caught up 9 s later. The writer was away: a replica
// that did not move meanwhile is judged from the last time the writer was
// seen. One that kept replicating (the writer's agent was killed, its
// server ran on) is judged as usual.
func TestWriterBackFromAwayJudgesStuckReplicas(t *testing.T) {
	away := func(m Member) Member { m.Status = StatusFailed; return m }
	policy := Policy{MaxLag: 10 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackWriter}
	t.Run("stuck replica", func(t *testing.T) {
		r := newFreshRun(t, policy)
		for sec := 0; sec <= 10; sec++ {
			r.at(float64(sec), writer("dbp", gtid(uint64(100+sec))), replica("dbr", 0, gtid(uint64(100+sec))), replica("dbs", 0, gtid(uint64(100+sec))))
		}
		// Cut at 10: dbs stops at 110; dbp (and dbr, with it) are failed here.
		for sec := 11; sec <= 27; sec++ {
			p, _ := r.at(float64(sec), away(writer("dbp", gtid(110))), away(replica("dbr", 0, gtid(110))), replica("dbs", 0, gtid(110)))
			if got := summary(p); got != "default{w[] r[dbs] o[dbp:agent-failed dbr:agent-failed]}" {
				t.Fatalf("t=%d cut: %s", sec, got)
			}
		}
		// Healed at 28: dbp took writes meanwhile (on to 127); dbs is 18 s behind.
		p, l := r.at(28, writer("dbp", gtid(127)), replica("dbr", 0, gtid(127)), replica("dbs", 0, gtid(110)))
		if got := summary(p); got != "default{w[dbp] r[dbr] o[dbs:stale]}" {
			t.Fatalf("healed: %s (lag %+v)", got, l.Nodes["default"]["dbs"])
		}
		if lag := l.Nodes["default"]["dbs"]; lag.Seconds != 18 {
			t.Fatalf("dbs lag %+v, want 18 s (since dbp was last seen)", lag)
		}
		// Caught up: back.
		p, _ = r.at(30, writer("dbp", gtid(129)), replica("dbr", 0, gtid(129)), replica("dbs", 0, gtid(129)))
		if got := summary(p); got != "default{w[dbp] r[dbr dbs] o[]}" {
			t.Fatalf("caught up: %s", got)
		}
	})
	t.Run("replica that kept replicating", func(t *testing.T) {
		r := newFreshRun(t, policy)
		for sec := 0; sec <= 10; sec++ {
			r.at(float64(sec), writer("dbp", gtid(uint64(100+sec))), replica("dbr", 0, gtid(uint64(100+sec))))
		}
		// dbp's agent dies at 10; its server runs on and dbr follows it.
		for sec := 11; sec <= 25; sec++ {
			r.at(float64(sec), away(writer("dbp", gtid(110))), replica("dbr", 0, gtid(uint64(100+sec))))
		}
		// Back at 26, one transaction ahead of dbr's last publish.
		p, l := r.at(26, writer("dbp", gtid(126)), replica("dbr", 0, gtid(125)))
		if got := summary(p); got != "default{w[dbp] r[dbr] o[]}" {
			t.Fatalf("back: %s (lag %+v)", got, l.Nodes["default"]["dbr"])
		}
		if lag := l.Nodes["default"]["dbr"]; lag.Seconds != 0 || lag.Transactions != 1 {
			t.Fatalf("dbr lag %+v, want 1 transaction, 0 s", lag)
		}
	})
}

// TestMissedStreamPositionIsDated: an agent that missed the writer's
// stream position 101 (reached at t=11) and got 102 at t=11.25 dates 101
// from the entry's Prev: a replica stuck at 100 is stale max_lag after
// t=11, not after t=11.25. A Prev that is not between what the agent had
// and the new position is ignored.
func TestMissedStreamPositionIsDated(t *testing.T) {
	r := newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackWriter})
	r.at(10, writer("w", gtid(100)), replica("r", 0, gtid(100)))
	w := writer("w", gtid(102))
	w.PosPrev, w.PosPrevAt = tags.Position{N: 1, Domains: [tags.MaxDomains]tags.Domain{{ID: 0, Seq: 101}}}, r.start.Add(11*time.Second)
	_, l := r.at(11.25, w, replica("r", 0, gtid(100)))
	if lag := l.Nodes["default"]["r"]; lag.Seconds != 0.25 || lag.Transactions != 2 {
		t.Fatalf("lag %+v, want 0.25 s (from t=11), 2 transactions", lag)
	}
	if p, _ := r.at(16.001, w, replica("r", 0, gtid(100))); summary(p) != "default{w[w] r[w:fallback] o[r:stale]}" {
		t.Fatalf("at t=16.001: %s, want r stale (the writer passed 100 at t=11)", summary(p))
	}

	// Prev older than the last sample: nothing is inserted.
	r = newFreshRun(t, Policy{MaxLag: 5 * time.Second, MinReaders: 1, ReadFallback: ReadFallbackWriter})
	r.at(10, writer("w", gtid(101)), replica("r", 0, gtid(101)))
	w = writer("w", gtid(102))
	w.PosPrev, w.PosPrevAt = tags.Position{N: 1, Domains: [tags.MaxDomains]tags.Domain{{ID: 0, Seq: 100}}}, r.start.Add(9*time.Second)
	if _, l := r.at(11, w, replica("r", 0, gtid(101))); l.Nodes["default"]["r"].Seconds != 0 {
		t.Fatalf("lag %+v, want 0 (the writer passed 101 at t=11)", l.Nodes["default"]["r"])
	}
}
