package gossip

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"
)

type gateRecorder struct {
	mu     sync.Mutex
	events []serf.MemberEvent
}

func (r *gateRecorder) emit(e serf.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if me, ok := e.(serf.MemberEvent); ok {
		r.events = append(r.events, me)
	}
}

func (r *gateRecorder) get() []serf.MemberEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]serf.MemberEvent(nil), r.events...)
}

func member(name string, st serf.MemberStatus) serf.Member {
	return serf.Member{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Status: st}
}

// fakeGate is a gate on a fake clock: time moves only when a test
// advances it, so no assertion depends on how fast the machine is.
func fakeGate(ping func(serf.Member) bool, emit func(serf.Event), retry, maxHold time.Duration, more ...func(*GateConfig)) (*Gate, *clockwork.FakeClock) {
	clk := clockwork.NewFakeClock()
	c := GateConfig{Ping: ping, Emit: emit, Retry: retry, MaxHold: maxHold, Clock: clk}
	for _, f := range more {
		f(&c)
	}
	return NewGate(c), clk
}

// advanceUntil moves the fake clock by step until cond holds. The real-time
// bound only decides when to give up: a goroutine may not be waiting on the
// clock yet when it is advanced, so the loop tries again.
func advanceUntil(t *testing.T, clk *clockwork.FakeClock, step time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	var moved time.Duration
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if cond() {
			return moved
		}
		clk.Advance(step)
		moved += step
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s: not after advancing the clock by %s", what, moved)
	return 0
}

// blockUntil waits until n goroutines wait on the fake clock.
func blockUntil(t *testing.T, clk *clockwork.FakeClock, n int) {
	t.Helper()
	if !blockUntilOr(clk, n, func() bool { return false }) {
		t.Fatalf("%d goroutines never waited on the clock", n)
	}
}

// blockUntilOr waits until n goroutines wait on the fake clock (true) or
// done holds (false), for at most 10 s of real time (false).
func blockUntilOr(clk *clockwork.FakeClock, n int, done func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		err := clk.BlockUntilContext(ctx, n)
		cancel()
		if err == nil {
			return true
		}
		if done() {
			return false
		}
	}
	return false
}

func waitEvents(t *testing.T, r *gateRecorder, n int) []serf.MemberEvent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ev := r.get(); len(ev) >= n {
			return ev
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("want %d events, got %v", n, r.get())
	return nil
}

func TestFailureGateConfirmsUnansweredMember(t *testing.T) {
	r := &gateRecorder{}
	g, _ := fakeGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute)
	defer g.Close()
	// Until confirmed, the member is shown alive.
	if got := g.Overlay([]serf.Member{member("db2", serf.StatusFailed)}); got[0].Status != serf.StatusAlive {
		t.Fatalf("unconfirmed failure shown as %s", got[0].Status)
	}
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	ev := waitEvents(t, r, 1)
	if ev[0].Type != serf.EventMemberFailed || ev[0].Members[0].Name != "db2" {
		t.Fatalf("want member-failed db2, got %v", ev)
	}
	if got := g.Overlay([]serf.Member{member("db2", serf.StatusFailed)}); got[0].Status != serf.StatusFailed {
		t.Fatalf("confirmed failure shown as %s", got[0].Status)
	}
	// It comes back: the join passes, and a later failure is checked anew.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("db2", serf.StatusAlive)}})
	if ev := waitEvents(t, r, 2); ev[1].Type != serf.EventMemberJoin {
		t.Fatalf("want member-join, got %v", ev)
	}
	if got := g.Overlay([]serf.Member{member("db2", serf.StatusFailed)}); got[0].Status != serf.StatusAlive {
		t.Fatalf("after the join a new failure must be checked first, shown as %s", got[0].Status)
	}
	if g.Confirmed.Load() != 1 || g.Refuted.Load() != 0 {
		t.Fatalf("counters: confirmed %d refuted %d", g.Confirmed.Load(), g.Refuted.Load())
	}
}

func TestFailureGateDropsRefutedFailure(t *testing.T) {
	r := &gateRecorder{}
	var pings atomic.Int32
	g, clk := fakeGate(func(serf.Member) bool { pings.Add(1); return true }, r.emit, 10*time.Millisecond, time.Minute)
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("app1", serf.StatusFailed)}})
	// A second failed for the same member while pending starts no second check.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("app1", serf.StatusFailed)}})
	// One ping per retry interval, from one check.
	for want := int32(1); want <= 3; want++ {
		blockUntil(t, clk, 1)
		if got := pings.Load(); got != want {
			t.Fatalf("%d pings after %d retry intervals, want %d", got, want-1, want)
		}
		clk.Advance(10 * time.Millisecond)
	}
	blockUntil(t, clk, 1)
	if g.Pending() != 1 {
		t.Fatalf("pending %d, want 1", g.Pending())
	}
	// Other events flow while the failure is withheld.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberUpdate, Members: []serf.Member{member("db1", serf.StatusAlive)}})
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("app1", serf.StatusAlive), member("db3", serf.StatusAlive)}})
	// HandleEvent emits synchronously: nothing else can arrive later, as
	// the check ended with the refutation.
	ev := r.get()
	if len(ev) != 2 || ev[0].Type != serf.EventMemberUpdate || ev[1].Type != serf.EventMemberJoin ||
		len(ev[1].Members) != 1 || ev[1].Members[0].Name != "db3" {
		t.Fatalf("want the update and the join of db3 only (app1 never failed downstream), got %v", ev)
	}
	if g.Pending() != 0 || g.Refuted.Load() != 1 || g.Confirmed.Load() != 0 {
		t.Fatalf("pending %d refuted %d confirmed %d", g.Pending(), g.Refuted.Load(), g.Confirmed.Load())
	}
}

func TestFailureGateHoldIsBounded(t *testing.T) {
	r := &gateRecorder{}
	g, clk := fakeGate(func(serf.Member) bool { return true }, r.emit, 10*time.Millisecond, 100*time.Millisecond)
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	// Advance one retry interval at a time, each once the check waits.
	var held time.Duration
	emitted := func() bool { return len(r.get()) > 0 }
	for blockUntilOr(clk, 1, emitted) && !emitted() {
		if held > time.Second {
			t.Fatalf("no member-failed after holding %s (bound 100ms)", held)
		}
		clk.Advance(10 * time.Millisecond)
		held += 10 * time.Millisecond
	}
	ev := waitEvents(t, r, 1)
	if ev[0].Type != serf.EventMemberFailed || held < 100*time.Millisecond || held > 110*time.Millisecond {
		t.Fatalf("want member-failed after the 100ms hold, got %v after %s", ev, held)
	}
	if g.Expired.Load() != 1 {
		t.Fatalf("expired %d", g.Expired.Load())
	}
}

func TestFailureGateLeaveEndsCheck(t *testing.T) {
	r := &gateRecorder{}
	g, clk := fakeGate(func(serf.Member) bool { return true }, r.emit, 10*time.Millisecond, time.Minute)
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	blockUntil(t, clk, 1) // the check answered once and waits to ask again
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberLeave, Members: []serf.Member{member("db2", serf.StatusLeft)}})
	ev := waitEvents(t, r, 1)
	clk.Advance(time.Hour) // past every retry and the hold: the check has ended
	if len(r.get()) != 1 || ev[0].Type != serf.EventMemberLeave || g.Pending() != 0 {
		t.Fatalf("want only the leave, got %v (pending %d)", r.get(), g.Pending())
	}
}

func TestFailureGateRejoinsMemberThatAnswersAgain(t *testing.T) {
	r := &gateRecorder{}
	var up atomic.Bool
	var asked atomic.Int32
	rejoined := make(chan string, 10)
	g, clk := fakeGate(func(serf.Member) bool { asked.Add(1); return up.Load() }, r.emit, 10*time.Millisecond, time.Minute,
		func(c *GateConfig) { c.Rejoin = func(m serf.Member) { rejoined <- m.Name } })
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	waitEvents(t, r, 1)
	// It is asked every reviveEvery while it does not answer, and not rejoined.
	before := asked.Load()
	advanceUntil(t, clk, reviveEvery, "three revival pings", func() bool { return asked.Load() >= before+3 })
	if len(rejoined) != 0 {
		t.Fatalf("rejoined %s while it does not answer", <-rejoined)
	}
	up.Store(true)
	advanceUntil(t, clk, reviveJitter, "rejoin once it answers", func() bool { return len(rejoined) > 0 })
	if n := <-rejoined; n != "db2" {
		t.Fatalf("rejoined %s", n)
	}
	// Once it is alive again the watcher stops.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("db2", serf.StatusAlive)}})
	for len(rejoined) > 0 {
		<-rejoined
	}
	asked.Store(0)
	for range 20 {
		clk.Advance(reviveEvery)
		time.Sleep(time.Millisecond)
	}
	if len(rejoined) != 0 || asked.Load() > 1 {
		t.Fatalf("revival went on after the member was alive again: %d rejoins, %d pings", len(rejoined), asked.Load())
	}
}

func TestConfirmWait(t *testing.T) {
	pt := 100 * time.Millisecond
	for _, c := range []struct {
		rtt   time.Duration
		known bool
		want  time.Duration
	}{
		{0, false, pt}, // no estimate: the probe timeout
		{300 * time.Microsecond, true, confirmMinWait},         // quiet LAN: the floor
		{10 * time.Millisecond, true, 80 * time.Millisecond},   // 5 x RTT + 30ms
		{100 * time.Millisecond, true, 530 * time.Millisecond}, // slow network: past the probe timeout
		{time.Second, true, confirmMaxWait},                    // capped
	} {
		if got := confirmWait(c.rtt, c.known, pt); got != c.want {
			t.Errorf("confirmWait(%s, %v) = %s, want %s", c.rtt, c.known, got, c.want)
		}
	}
}

func TestReviveIntervalSpreadsWithSize(t *testing.T) {
	if reviveInterval(15) != reviveEvery || reviveInterval(1000) != reviveEvery*62 {
		t.Fatalf("reviveInterval(15)=%s reviveInterval(1000)=%s", reviveInterval(15), reviveInterval(1000))
	}
}

// A member that misses the first check gets a second, longer one only if
// it was heard from just before its failure arrived; a member silent since
// long ago (crashed, cut off) is confirmed after the first.
func TestFailureGateAsksAgainWhenRecentlyHeard(t *testing.T) {
	r := &gateRecorder{}
	var careful atomic.Int32
	g, clk := fakeGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, func(c *GateConfig) {
		c.PingCareful = func(serf.Member) bool { careful.Add(1); return true }
		c.HeardSince = func(m serf.Member) (time.Duration, bool) {
			switch m.Name {
			case "silent":
				return 2 * time.Second, true
			case "chatty":
				return 50 * time.Millisecond, true
			}
			return 0, false
		}
	})
	defer g.Close()
	// Each failure alone (apart by more than the unrest windows, see
	// TestFailureGateAsksAgainInUnrest), as a single crash arrives.
	for i, name := range []string{"silent", "never"} {
		g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member(name, serf.StatusFailed)}})
		if ev := waitEvents(t, r, i+1); ev[i].Type != serf.EventMemberFailed || ev[i].Members[0].Name != name {
			t.Fatalf("got %v", ev)
		}
		clk.Advance(unrestConfirmed + unrestWindow)
	}
	if careful.Load() != 0 || g.Careful.Load() != 0 {
		t.Fatal("second check for a member silent for long")
	}
	// Heard 50ms ago: the second check, which it answers: withheld, and
	// the check waits to ask again.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("chatty", serf.StatusFailed)}})
	blockUntil(t, clk, 1)
	if careful.Load() != 1 {
		t.Fatalf("%d second checks for a member heard from just before, want 1", careful.Load())
	}
	if ev := r.get(); len(ev) != 2 || g.Pending() != 1 {
		t.Fatalf("chatty not withheld while answering the second check: events %v, pending %d", ev, g.Pending())
	}
}

// The first packet from a confirmed-failed member gets it asked at once,
// not at the next revival tick.
func TestFailureGateAsksOnFirstPacket(t *testing.T) {
	r := &gateRecorder{}
	packet := make(chan struct{})
	var up atomic.Bool
	var asked atomic.Int32
	rejoined := make(chan struct{}, 1)
	g, clk := fakeGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, func(c *GateConfig) {
		var watches atomic.Int32
		c.Heard = func(serf.Member) (<-chan struct{}, func()) {
			if watches.Add(1) == 1 {
				return packet, func() {}
			}
			return make(chan struct{}), func() {} // like the transport: a new watch per packet
		}
		c.RevivePing = func(serf.Member) bool { asked.Add(1); return up.Load() }
		c.Rejoin = func(serf.Member) {
			select {
			case rejoined <- struct{}{}:
			default:
			}
		}
		c.ReviveEvery = func() time.Duration { return time.Hour }
	})
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	waitEvents(t, r, 1)
	blockUntil(t, clk, 1) // the watcher waits for its tick (up to an hour) or a packet
	up.Store(true)
	close(packet)
	// Asked at once, without the clock moving; then rejoined after the
	// random pause of at most reviveJitter (never the hour).
	for deadline := time.Now().Add(10 * time.Second); asked.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a packet from a failed member did not get it asked")
		}
	}
	moved := advanceUntil(t, clk, reviveJitter/10, "rejoin after the packet", func() bool { return len(rejoined) > 0 })
	if moved > 2*reviveJitter {
		t.Fatalf("rejoined only after %s of clock time (pause at most %s)", moved, reviveJitter)
	}
}

// An agent with most members confirmed failed was the one cut off: when one
// of them is heard from again, its remaining checks get the second round
// for a while. An agent with a few failed members does not.
func TestFailureGateCarefulAfterItsOwnIsolation(t *testing.T) {
	for _, c := range []struct {
		size      int
		careful   bool
		failedNum int
	}{{size: 4, careful: true, failedNum: 2}, {size: 15, careful: false, failedNum: 2}} {
		r := &gateRecorder{}
		packets := map[string]chan struct{}{}
		var mu sync.Mutex
		var heardFrom atomic.Int32
		g, clk := fakeGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, func(gc *GateConfig) {
			gc.Heard = func(m serf.Member) (<-chan struct{}, func()) {
				mu.Lock()
				defer mu.Unlock()
				ch := packets[m.Name]
				if ch != nil {
					select {
					case <-ch: // it reported its packet: watch for the next one
						ch = nil
					default:
					}
				}
				if ch == nil {
					ch = make(chan struct{})
					packets[m.Name] = ch
				}
				return ch, func() {}
			}
			gc.Size = func() int { return c.size }
			gc.Rejoin = func(serf.Member) {}
			gc.RevivePing = func(serf.Member) bool { heardFrom.Add(1); return false }
			gc.ReviveEvery = func() time.Duration { return time.Hour }
		})
		for i := 0; i < c.failedNum; i++ {
			g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member(fmt.Sprintf("db%d", i), serf.StatusFailed)}})
		}
		waitEvents(t, r, c.failedNum)
		blockUntil(t, clk, c.failedNum) // every watcher waits, its packet channel made
		if g.rejoining() {
			t.Fatal("careful before any packet")
		}
		mu.Lock()
		close(packets["db0"])
		mu.Unlock()
		// The watcher notes the packet (heardFromFailed), then asks.
		for deadline := time.Now().Add(10 * time.Second); heardFrom.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the packet was not seen")
			}
		}
		if g.rejoining() != c.careful {
			t.Errorf("size %d, %d failed: rejoining = %v, want %v", c.size, c.failedNum, g.rejoining(), c.careful)
		}
		if c.careful {
			clk.Advance(carefulFor)
			if g.rejoining() {
				t.Errorf("still careful %s after the packet", carefulFor)
			}
		}
		g.Close()
	}
}

// Failures that do not arrive alone get the second check whether or not
// the member was heard from: another failure within unrestWindow (before
// or during the first check), a failed member that came back within
// unrestWindow, another member confirmed failed less than unrestConfirmed
// ago, and a degraded agent (memberlist health score >= degradedHealth). A
// lone failure on a healthy agent pays nothing.
func TestFailureGateAsksAgainInUnrest(t *testing.T) {
	type gateRun struct {
		g       *Gate
		clk     *clockwork.FakeClock
		r       *gateRecorder
		careful *sync.Map // member name → struct{}: got the second check
	}
	newRun := func(health int, release <-chan struct{}) *gateRun {
		run := &gateRun{r: &gateRecorder{}, careful: &sync.Map{}}
		ping := func(serf.Member) bool {
			if release != nil {
				<-release
			}
			return false
		}
		run.g, run.clk = fakeGate(ping, run.r.emit, 10*time.Millisecond, time.Minute, func(c *GateConfig) {
			c.PingCareful = func(m serf.Member) bool { run.careful.Store(m.Name, struct{}{}); return false }
			c.HeardSince = func(serf.Member) (time.Duration, bool) { return time.Hour, true }
			c.Health = func() int { return health }
		})
		return run
	}
	fail := func(run *gateRun, names ...string) {
		for _, n := range names {
			run.g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member(n, serf.StatusFailed)}})
		}
	}
	asked := func(run *gateRun, name string) bool { _, ok := run.careful.Load(name); return ok }
	// confirm fails name alone and waits until it is confirmed.
	confirm := func(t *testing.T, run *gateRun, name string) {
		t.Helper()
		n := len(run.r.get())
		fail(run, name)
		if ev := waitEvents(t, run.r, n+1); ev[n].Type != serf.EventMemberFailed || ev[n].Members[0].Name != name {
			t.Fatalf("want %s confirmed, got %v", name, ev)
		}
	}

	t.Run("alone", func(t *testing.T) {
		run := newRun(degradedHealth-1, nil)
		defer run.g.Close()
		confirm(t, run, "db1")
		if asked(run, "db1") || run.g.Careful.Load() != 0 {
			t.Fatal("a lone failure on a healthy agent got the second check")
		}
	})
	t.Run("together", func(t *testing.T) {
		// db1's first check is still out when db2's failure arrives: both
		// get the second check.
		release := make(chan struct{})
		run := newRun(0, release)
		defer run.g.Close()
		fail(run, "db1", "db2")
		close(release)
		waitEvents(t, run.r, 2)
		if !asked(run, "db1") || !asked(run, "db2") {
			t.Fatalf("failures arriving together: second check db1 %v db2 %v, want both", asked(run, "db1"), asked(run, "db2"))
		}
	})
	t.Run("came back", func(t *testing.T) {
		run := newRun(0, nil)
		defer run.g.Close()
		confirm(t, run, "db1")
		run.clk.Advance(unrestConfirmed + unrestWindow)
		run.g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("db1", serf.StatusAlive)}})
		run.clk.Advance(unrestWindow / 2)
		confirm(t, run, "db2")
		if asked(run, "db1") || !asked(run, "db2") {
			t.Fatalf("second check db1 %v (alone, want false) db2 %v (a member came back just before, want true)", asked(run, "db1"), asked(run, "db2"))
		}
		// Once the window has passed (and db2's confirmation is old), a
		// failure is alone again.
		run.clk.Advance(unrestConfirmed + unrestWindow)
		run.g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("db2", serf.StatusAlive)}})
		run.clk.Advance(unrestWindow + time.Millisecond)
		confirm(t, run, "db3")
		if asked(run, "db3") {
			t.Fatal("second check for a failure more than the unrest window after a member came back")
		}
	})
	t.Run("recently confirmed", func(t *testing.T) {
		run := newRun(0, nil)
		defer run.g.Close()
		confirm(t, run, "db1")
		run.clk.Advance(unrestConfirmed / 3) // past unrestWindow, db1 still failed
		confirm(t, run, "db2")
		if !asked(run, "db2") {
			t.Fatal("no second check while another member was confirmed failed moments ago")
		}
		run.clk.Advance(unrestConfirmed) // both confirmations are old now
		confirm(t, run, "db3")
		if asked(run, "db3") {
			t.Fatalf("second check %s after the last confirmation", unrestConfirmed)
		}
	})
	t.Run("degraded", func(t *testing.T) {
		run := newRun(degradedHealth, nil)
		defer run.g.Close()
		confirm(t, run, "db1")
		if !asked(run, "db1") || run.g.Careful.Load() != 1 {
			t.Fatalf("health score %d: second check %v (counter %d), want it", degradedHealth, asked(run, "db1"), run.g.Careful.Load())
		}
	})
}

// The pings per check shrink with the cluster so that the cluster-wide
// burst toward one member stays near confirmBurst (at least one each).
func TestConfirmPingsShrinkWithSize(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 3}, {2, 3}, {15, 3}, {48, 3}, {49, 2}, {50, 2}, {96, 2}, {97, 1}, {100, 1}, {1000, 1}, {5000, 1}} {
		if got := confirmPingsFor(c.n); got != c.want {
			t.Errorf("confirmPingsFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// A member that comes back from a confirmed failure is followed, syncDelay
// later, by one state exchange and syncLate later by a second; several
// coming back together cause one of each.
func TestFailureGateSyncsAfterAComeback(t *testing.T) {
	r := &gateRecorder{}
	synced := make(chan string, 4)
	g, clk := fakeGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute,
		func(c *GateConfig) { c.Sync = func(back serf.Member) { synced <- back.Name } })
	defer g.Close()
	for _, n := range []string{"db2", "db3"} {
		g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member(n, serf.StatusFailed)}})
	}
	waitEvents(t, r, 2)
	// A join of a member never failed here syncs nothing.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("app9", serf.StatusAlive)}})
	for _, n := range []string{"db2", "db3"} {
		g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member(n, serf.StatusAlive)}})
	}
	blockUntil(t, clk, 1)
	select {
	case n := <-synced:
		t.Fatalf("synced with %s before syncDelay", n)
	default:
	}
	clk.Advance(syncDelay)
	select {
	case n := <-synced:
		if n != "db2" {
			t.Fatalf("sync after %s's return, want db2 (the first back)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no state exchange after a member came back")
	}
	// The sync goroutine waits again (for syncLate) before the clock
	// moves: an Advance before its wait registers is lost (seen in CI
	// under load: "no second state exchange").
	blockUntil(t, clk, 1)
	clk.Advance(syncDelay)
	select {
	case n := <-synced:
		t.Fatalf("a second exchange (%s) for members back together", n)
	case <-time.After(100 * time.Millisecond):
	}
	if g.Syncs.Load() != 1 {
		t.Fatalf("Syncs = %d, want 1", g.Syncs.Load())
	}
	// One more, syncLate after the comeback, for the later refutations.
	clk.Advance(syncLate - 2*syncDelay)
	select {
	case n := <-synced:
		if n != "db2" {
			t.Fatalf("late sync after %s's return, want db2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second state exchange syncLate after the comeback")
	}
	if g.Syncs.Load() != 2 {
		t.Fatalf("Syncs = %d, want 2", g.Syncs.Load())
	}
}
