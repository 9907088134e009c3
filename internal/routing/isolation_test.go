package routing

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// fakeReach answers rounds at once from a set of members that answer.
type fakeReach struct {
	clock  *clockwork.FakeClock
	up     map[string]bool
	relay  map[string]bool // answer pings the peers relay, when a peer answered
	asked  [][]string
	latest pool.ReachRound
}

func newFakeReach(w *world) *fakeReach { return &fakeReach{clock: w.clock, up: map[string]bool{}} }

func (f *fakeReach) Probe(names []string) bool {
	f.asked = append(f.asked, slices.Clone(names))
	ans := map[string]bool{}
	peers := false
	for _, n := range names {
		ans[n] = f.up[n]
		peers = peers || f.up[n]
	}
	var relayed map[string]bool
	for _, n := range names {
		if !ans[n] && peers && f.relay != nil {
			if relayed == nil {
				relayed = map[string]bool{}
			}
			relayed[n] = f.relay[n]
		}
	}
	now := f.clock.Now()
	f.latest = pool.ReachRound{Started: now, Finished: now, Answered: ans, Relayed: relayed}
	return true
}

func (f *fakeReach) Latest() pool.ReachRound { return f.latest }

// answer sets who answers pings.
func (f *fakeReach) answer(names ...string) {
	f.up = map[string]bool{}
	for _, n := range names {
		f.up[n] = true
	}
}

// settleAt sets the world at sec and runs two recomputes: the first asks for
// a round, the second sees its result (fakeReach answers at once).
func settleAt(r *Router, w *world, sec float64, ms ...pool.Member) {
	stepAt(r, w, sec, ms...)
	r.step()
}

func isoRouter(t *testing.T, w *world) (*Router, *recorder, *fakeReach) {
	t.Helper()
	fr := newFakeReach(w)
	r, rec := newTestRouter(Config{NoDamping: true, Self: "me", Reach: fr, IsolationMax: time.Minute}, w.view, w, nil)
	return r, rec, fr
}

// Every routed pool an update carried, rendered.
func routedHistory(rec *recorder) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, u := range rec.updates {
		out = append(out, summary(u.Routed))
	}
	return out
}

func TestFailureActedOnWhenTheFleetAnswers(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0), app("x"))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	fr.answer("a", "c", "x")
	stepAt(r, w, 0, view()...)
	stepAt(r, w, 1, view("b")...)
	u := rec.last(t)
	if got := summary(u.Routed); got != "default{w[a] r[b c] o[]}" {
		t.Fatalf("before the round: routed %s, want b held while checking", got)
	}
	if d := detailOf(u.Routed, "b"); !strings.Contains(d, "checking") {
		t.Errorf("b's detail while checking = %q", d)
	}
	if len(fr.asked) != 1 || slices.Contains(fr.asked[0], "b") || !slices.Contains(fr.asked[0], "a") {
		t.Fatalf("asked %v: want one round of the alive fleet, without the fresh suspect", fr.asked)
	}
	r.step()
	u = rec.last(t)
	if got := summary(u.Routed); got != "default{w[a] r[c] o[b:agent-failed]}" || u.Isolated {
		t.Fatalf("after the round: routed %s isolated %v; want b out, not isolated", got, u.Isolated)
	}
	if u.Isolation.Reach.Reached != 4 || u.Isolation.Reach.Fleet != 5 {
		t.Errorf("reach %+v: want 4 of 5", u.Isolation.Reach)
	}
}

func TestLonePeerFailureIsNeverIsolation(t *testing.T) {
	view := fleet(app("me"), writer("a"))
	w := newWorld()
	r, rec, _ := isoRouter(t, w) // nobody answers
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a")...)
	if u := rec.last(t); u.Isolated || summary(u.Routed) != "default{w[] r[] o[a:agent-failed]}" {
		t.Fatalf("lone peer failed: isolated %v routed %s", u.Isolated, summary(u.Routed))
	}
}

// Issue 27, finding 1: the node gossip drops first is held with the rest,
// however long the pool was steady before.
func TestCutOffHoldsEveryNodeInItsRole(t *testing.T) {
	for _, first := range []string{"b", "a"} {
		t.Run("first dropped "+first, func(t *testing.T) {
			view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0), app("x"), app("y"))
			w := newWorld()
			r, rec, _ := isoRouter(t, w) // cut off: nobody answers
			stepAt(r, w, 0, view()...)
			stepAt(r, w, 60, view()...)
			settleAt(r, w, 100, view(first)...)
			u := rec.last(t)
			if !u.Isolated || summary(u.Routed) != "default{w[a] r[b c] o[]}" {
				t.Fatalf("first failure while cut off: isolated %v routed %s", u.Isolated, summary(u.Routed))
			}
			settleAt(r, w, 101, view("a", "b", "c", "x", "y")...)
			u = rec.last(t)
			if !u.Isolated || summary(u.Routed) != "default{w[a] r[b c] o[]}" {
				t.Fatalf("everything failed while cut off: isolated %v routed %s", u.Isolated, summary(u.Routed))
			}
			if d := detailOf(u.Routed, "a"); !strings.Contains(d, "cannot reach the fleet") {
				t.Errorf("a's detail = %q", d)
			}
			for i, got := range routedHistory(rec) {
				if i > 0 && got != "default{w[a] r[b c] o[]}" {
					t.Errorf("update %d routed %s: a node left its role during the cut", i, got)
				}
			}
		})
	}
}

// Issue 27, finding 2: a heal never removes a node that was healthy
// throughout, even while this agent's view still has it failed.
func TestHealKeepsWhatWasHealthy(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b", "c")...)
	if u := rec.last(t); !u.Isolated {
		t.Fatalf("cut off: not isolated: %+v", u.Isolation)
	}
	// The link is back: a and b answer, the view has them failed still; c
	// really died during the cut.
	fr.answer("a", "b")
	settleAt(r, w, 8, view("a", "b", "c")...)
	settleAt(r, w, 9, view("a", "b", "c")...)
	u := rec.last(t)
	if u.Isolated || summary(u.Routed) != "default{w[a] r[b] o[c:agent-failed]}" {
		t.Fatalf("after the heal: isolated %v routed %s; want a, b held, c verified out", u.Isolated, summary(u.Routed))
	}
	if d := detailOf(u.Routed, "a"); !strings.Contains(d, "answers") {
		t.Errorf("a's detail = %q", d)
	}
	stepAt(r, w, 10, view("c")...)
	if u := rec.last(t); summary(u.Routed) != "default{w[a] r[b] o[c:agent-failed]}" || detailOf(u.Routed, "a") != "" {
		t.Fatalf("gossip caught up: routed %s (a: %q)", summary(u.Routed), detailOf(u.Routed, "a"))
	}
	for i, got := range routedHistory(rec) {
		if !strings.HasPrefix(got, "default{w[a] r[b") {
			t.Errorf("update %d routed %s: a healthy node left its role", i, got)
		}
	}
}

func TestAnsweringButFailedIsReleasedAfterSettleMax(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b", "c")...)
	fr.answer("a", "b", "c")
	settleAt(r, w, 3, view("a", "b", "c")...)
	settleAt(r, w, 4, view("a", "b", "c")...)
	if u := rec.last(t); summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("answering: routed %s", summary(u.Routed))
	}
	settleAt(r, w, 4+pool.SettleMax.Seconds()+2, view("a", "b", "c")...)
	if u := rec.last(t); summary(u.Routed) != "default{w[] r[] o[a:agent-failed b:agent-failed c:agent-failed]}" {
		t.Fatalf("gossip never agreed for longer than SettleMax: routed %s, want the view", summary(u.Routed))
	}
}

func TestIsolationIsBounded(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec, _ := isoRouter(t, w)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b", "c")...)
	settleAt(r, w, 50, view("a", "b", "c")...)
	if u := rec.last(t); !u.Isolated || u.Isolation.Held != 3 {
		t.Fatalf("50 s cut off: isolated %v held %d", u.Isolated, u.Isolation.Held)
	}
	settleAt(r, w, 62, view("a", "b", "c")...)
	u := rec.last(t)
	if u.Isolated || !u.Isolation.Expired || summary(u.Routed) != summary(u.Pool) {
		t.Fatalf("past the 1m bound: isolated %v expired %v routed %s pool %s", u.Isolated, u.Isolation.Expired,
			summary(u.Routed), summary(u.Pool))
	}
}

// Issue 27, finding 3: losing many app agents never freezes db routing, so
// a db host that hangs afterwards goes out.
func TestScaleInNeverHoldsALaterFailure(t *testing.T) {
	apps := []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7"}
	ms := []pool.Member{app("me"), app("app2"), writer("a"), replica("b", 0), replica("c", 0)}
	for _, n := range apps {
		ms = append(ms, app(n))
	}
	view := fleet(ms...)
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	fr.answer("app2", "a", "c")
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view(apps...)...)
	if u := rec.last(t); u.Isolated {
		t.Fatalf("7 of 12 app agents lost: isolated (%+v)", u.Isolation)
	}
	settleAt(r, w, 2, view(append(slices.Clone(apps), "b")...)...)
	u := rec.last(t)
	if u.Isolated || placeOf(u.Routed, "b") != "out:agent-failed" {
		t.Fatalf("db b hung after the scale-in: isolated %v, b %s; want out (reach %+v)", u.Isolated, placeOf(u.Routed, "b"), u.Isolation.Reach)
	}
}

// Issue 38: the same, but this agent does not hear db agent c (a lossy
// path): within the window only the db agents can make it connected, and it
// reaches a and app2 directly, c through them. b goes out at once.
func TestScaleInThenHangWithADBAgentReachedThroughPeers(t *testing.T) {
	apps := []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7"}
	ms := []pool.Member{app("me"), app("app2"), writer("a"), replica("b", 0), replica("c", 0)}
	for _, n := range apps {
		ms = append(ms, app(n))
	}
	view := fleet(ms...)
	for _, tt := range []struct {
		name     string
		relay    map[string]bool
		isolated bool
		b        string
	}{
		{"c answers the peers", map[string]bool{"c": true}, false, "out:agent-failed"},
		// Nobody reaches c: a majority of db agents is not reached, and the
		// 7 still count. Held, as before.
		{"c answers nobody", map[string]bool{}, true, "reader:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			r, rec, fr := isoRouter(t, w)
			fr.answer("app2", "a")
			fr.relay = tt.relay
			stepAt(r, w, 0, view()...)
			settleAt(r, w, 1, view(apps...)...)
			settleAt(r, w, 5, view(append(slices.Clone(apps), "b")...)...)
			u := rec.last(t)
			if u.Isolated != tt.isolated || placeOf(u.Routed, "b") != tt.b {
				t.Fatalf("b hung 4 s after the scale-in: isolated %v, b %s; want %v, %s (reach %+v)", u.Isolated,
					placeOf(u.Routed, "b"), tt.isolated, tt.b, u.Isolation.Reach)
			}
		})
	}
}

// A held node that answers only a peer's relayed ping is alive: held, as
// one that answers this agent is, until gossip shows it alive.
func TestHeldNodeReachedThroughAPeerIsAlive(t *testing.T) {
	view := fleet(app("me"), app("app2"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	fr.answer() // cut off: b fails first, then every other
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("b")...)
	settleAt(r, w, 2, view("b", "a", "c", "app2")...)
	if u := rec.last(t); !u.Isolated {
		t.Fatalf("cut off: not isolated (%+v)", u.Isolation)
	}
	// The cut heals for all but b's path to this agent: b answers the
	// peers only.
	fr.answer("app2", "a", "c")
	fr.relay = map[string]bool{"b": true}
	settleAt(r, w, 4, view("b")...)
	settleAt(r, w, 5, view("b")...)
	if u := rec.last(t); u.Isolated || placeOf(u.Routed, "b") != "reader:" || !strings.Contains(detailOf(u.Routed, "b"), "answers") {
		t.Fatalf("b answers the peers: isolated %v, b %s (%s); want held as a reader", u.Isolated, placeOf(u.Routed, "b"), detailOf(u.Routed, "b"))
	}
}

// A rack of db hosts lost: most members still answer.
func TestRackLossIsNotIsolation(t *testing.T) {
	view := fleet(app("me"), app("app2"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	fr.answer("app2", "a")
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("b", "c")...)
	if u := rec.last(t); u.Isolated || summary(u.Routed) != "default{w[a] r[] o[b:agent-failed c:agent-failed]}" {
		t.Fatalf("2 of 3 db lost: isolated %v routed %s", u.Isolated, summary(u.Routed))
	}
}

// A 2|2 split: neither a majority of members nor of db agents.
func TestEvenSplitIsIsolation(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	fr.answer("c")
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b")...)
	if u := rec.last(t); !u.Isolated || summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("2|2 split: isolated %v routed %s", u.Isolated, summary(u.Routed))
	}
}

// A failure after this agent reached the fleet again is acted on.
func TestFailureAfterReconnectIsNotHeld(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0), app("x"))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b")...)
	fr.answer("a", "b", "c", "x")
	stepAt(r, w, 5, view()...)
	settleAt(r, w, 6, view()...)
	if u := rec.last(t); u.Isolated || summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("healed: isolated %v routed %s", u.Isolated, summary(u.Routed))
	}
	fr.answer("a", "b", "x")
	settleAt(r, w, 20, view("c")...)
	if u := rec.last(t); u.Isolated || placeOf(u.Routed, "c") != "out:agent-failed" {
		t.Fatalf("c failed later: isolated %v c %s", u.Isolated, placeOf(u.Routed, "c"))
	}
}

// The writer in the readers as a read fallback is not a reader role to
// hold: the replicas come back as readers, the writer as writer only.
func TestIsolationDoesNotHoldTheFallbackReader(t *testing.T) {
	w := newWorld()
	fr := newFakeReach(w)
	r, rec := newTestRouter(Config{Policy: pool.Policy{MinReaders: 1, ReadFallback: pool.ReadFallbackWriter}, Self: "me", Reach: fr}, w.view, w, nil)
	failed := func(m *pool.Member) { m.Status = pool.StatusFailed }
	stepAt(r, w, 0, app("me"), writer("a"), replica("b", 0), replica("c", 0))
	stepAt(r, w, 1, app("me"), writer("a"), replica("b", 60), replica("c", 60))
	if summary(r.Current().Routed) != "default{w[a] r[a:fallback] o[b:lag c:lag]}" {
		t.Fatalf("stale replicas: pool %s", summary(r.Current().Pool))
	}
	stepAt(r, w, 2, app("me"), writer("a"), replica("b", 0), replica("c", 0))
	settleAt(r, w, 3, app("me"), writer("a", failed), replica("b", 0, failed), replica("c", 0, failed))
	u := rec.last(t)
	if !u.Isolated || summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("isolated %v, routed %s; want isolated, default{w[a] r[b c] o[]}", u.Isolated, summary(u.Routed))
	}
}

func TestNoReachActsAtOnce(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0))
	w := newWorld()
	r, rec := newTestRouter(Config{NoDamping: true}, w.view, w, nil)
	stepAt(r, w, 0, view()...)
	stepAt(r, w, 1, view("a", "b", "c")...)
	if u := rec.last(t); u.Isolated || summary(u.Routed) != summary(u.Pool) {
		t.Fatalf("no Reach: isolated %v routed %s", u.Isolated, summary(u.Routed))
	}
}

func TestIsolationAloneIsDelivered(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), app("x"), app("y"))
	w := newWorld()
	r, rec, fr := isoRouter(t, w)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "x", "y")...)
	if u := rec.last(t); !u.Isolated {
		t.Fatal("not isolated")
	}
	n := rec.count()
	fr.answer("a", "b", "x", "y")
	stepAt(r, w, 3, view()...)
	settleAt(r, w, 4, view()...)
	if rec.count() == n || rec.last(t).Isolated {
		t.Fatalf("reconnect not delivered: %d calls (was %d), isolated %v", rec.count(), n, rec.last(t).Isolated)
	}
}

func detailOf(p *pool.Pool, node string) string {
	for _, c := range p.Clusters {
		for _, l := range [][]pool.Node{c.Writers, c.Readers, c.Out} {
			for _, n := range l {
				if n.Name == node {
					return n.Detail
				}
			}
		}
	}
	return ""
}

// refusingReach refuses probes while busy, as gossip.Reach does while a
// round runs.
type refusingReach struct {
	*fakeReach
	busy bool
}

func (f *refusingReach) Probe(names []string) bool {
	if f.busy {
		return false
	}
	return f.fakeReach.Probe(names)
}

// A probe refused because a round ran is asked again as soon as that round
// ends (it triggers the router), not a resync later.
func TestRefusedProbeIsAskedAgainAtTheRoundsEnd(t *testing.T) {
	view := fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0), app("x"))
	w := newWorld()
	fr := &refusingReach{fakeReach: newFakeReach(w), busy: true}
	fr.answer("a", "c", "x")
	r, rec := newTestRouter(Config{NoDamping: true, Self: "me", Reach: fr}, w.view, w, nil)
	stepAt(r, w, 0, view()...)
	stepAt(r, w, 1, view("b")...)
	if len(fr.asked) != 0 || placeOf(rec.last(t).Routed, "b") != "reader:" {
		t.Fatalf("busy: asked %v, b %s", fr.asked, placeOf(rec.last(t).Routed, "b"))
	}
	fr.busy = false
	w.clock.Advance(10 * time.Millisecond) // the running round ends and triggers
	r.step()
	r.step()
	if len(fr.asked) != 1 || placeOf(rec.last(t).Routed, "b") != "out:agent-failed" {
		t.Fatalf("after the round: asked %v, b %s; want asked at once and b out", fr.asked, placeOf(rec.last(t).Routed, "b"))
	}
}

// Issue 26: an isolated router holds the writer of a cluster that
// follows a writer term no longer than the writer's lease (its agent may
// be dead while its server runs on: nothing else stops writes from this
// side); its readers stay held up to IsolationMax.
func TestIsolatedRouterHoldsTheTermWriterForTheLeaseOnly(t *testing.T) {
	voter := func(m *pool.Member) { m.Tags[tags.KeyVoter] = "7950" }
	view := fleet(app("me"), writer("a", voter), replica("b", 0, voter), replica("c", 0, voter))
	w := newWorld()
	fr := newFakeReach(w) // cut off: nobody answers
	tv := pool.TermView{Terms: map[string]pool.Term{"default": {Cluster: "default", Number: 2, Writer: "a", Addr: "a:3306"}}}
	r, rec := newTestRouter(Config{NoDamping: true, Self: "me", Reach: fr, IsolationMax: time.Minute, WriterLease: 5 * time.Second,
		Terms: func() pool.TermView { return tv }}, w.view, w, nil)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b", "c")...)
	if u := rec.last(t); !u.Isolated || summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("cut off: isolated %v routed %s", u.Isolated, summary(u.Routed))
	}
	settleAt(r, w, 5.5, view("a", "b", "c")...)
	if u := rec.last(t); summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("within the lease: routed %s, want everything held", summary(u.Routed))
	}
	settleAt(r, w, 7, view("a", "b", "c")...)
	if u := rec.last(t); !u.Isolated || summary(u.Routed) != "default{w[] r[b c] o[a:agent-failed]}" {
		t.Fatalf("past the lease: isolated %v routed %s, want the writer released and the readers held", u.Isolated, summary(u.Routed))
	}
	// A cluster without voters keeps the isolation bound for its writer.
	view = fleet(app("me"), writer("a"), replica("b", 0), replica("c", 0))
	w = newWorld()
	r, rec = newTestRouter(Config{NoDamping: true, Self: "me", Reach: newFakeReach(w), IsolationMax: time.Minute, WriterLease: 5 * time.Second},
		w.view, w, nil)
	stepAt(r, w, 0, view()...)
	settleAt(r, w, 1, view("a", "b", "c")...)
	settleAt(r, w, 30, view("a", "b", "c")...)
	if u := rec.last(t); summary(u.Routed) != "default{w[a] r[b c] o[]}" {
		t.Fatalf("no voters, 29 s cut off: routed %s, want the writer held (isolation bound)", summary(u.Routed))
	}
}
