package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
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
	g := newFailureGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	g := newFailureGate(func(serf.Member) bool { pings.Add(1); return true }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("app1", serf.StatusFailed)}})
	// A second failed for the same member while pending starts no second check.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("app1", serf.StatusFailed)}})
	for pings.Load() < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	if g.Pending() != 1 {
		t.Fatalf("pending %d, want 1", g.Pending())
	}
	// Other events flow while the failure is withheld.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberUpdate, Members: []serf.Member{member("db1", serf.StatusAlive)}})
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("app1", serf.StatusAlive), member("db3", serf.StatusAlive)}})
	time.Sleep(50 * time.Millisecond)
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
	g := newFailureGate(func(serf.Member) bool { return true }, r.emit, 10*time.Millisecond, 100*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer g.Close()
	start := time.Now()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	ev := waitEvents(t, r, 1)
	if ev[0].Type != serf.EventMemberFailed || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("want member-failed after the 100ms hold, got %v after %s", ev, time.Since(start))
	}
	if g.Expired.Load() != 1 {
		t.Fatalf("expired %d", g.Expired.Load())
	}
}

func TestFailureGateLeaveEndsCheck(t *testing.T) {
	r := &gateRecorder{}
	g := newFailureGate(func(serf.Member) bool { return true }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberLeave, Members: []serf.Member{member("db2", serf.StatusLeft)}})
	ev := waitEvents(t, r, 1)
	time.Sleep(50 * time.Millisecond)
	if len(r.get()) != 1 || ev[0].Type != serf.EventMemberLeave || g.Pending() != 0 {
		t.Fatalf("want only the leave, got %v (pending %d)", r.get(), g.Pending())
	}
}

func TestFailureGateRejoinsMemberThatAnswersAgain(t *testing.T) {
	r := &gateRecorder{}
	var up atomic.Bool
	rejoined := make(chan string, 10)
	g := newFailureGate(func(serf.Member) bool { return up.Load() }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.rejoin = func(m serf.Member) { rejoined <- m.Name }
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	waitEvents(t, r, 1)
	select {
	case n := <-rejoined:
		t.Fatalf("rejoined %s while it does not answer", n)
	case <-time.After(2 * reviveEvery):
	}
	up.Store(true)
	select {
	case n := <-rejoined:
		if n != "db2" {
			t.Fatalf("rejoined %s", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a confirmed-failed member that answers again was not rejoined")
	}
	// Once it is alive again the watcher stops.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{member("db2", serf.StatusAlive)}})
	for len(rejoined) > 0 {
		<-rejoined
	}
	time.Sleep(2*reviveEvery + reviveJitter)
	if len(rejoined) != 0 {
		t.Fatal("rejoin continued after the member was alive again")
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

// slowML answers pings after a delay and counts how many are in flight.
type slowML struct {
	delay          time.Duration
	answer         bool
	inFlight, peak atomic.Int32
	calls          atomic.Int32
}

func (s *slowML) Ping(string, net.Addr) (time.Duration, error) {
	n := s.inFlight.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.calls.Add(1)
	time.Sleep(s.delay)
	s.inFlight.Add(-1)
	if s.answer {
		return time.Millisecond, nil
	}
	return 0, errors.New("no ack")
}

func TestPingerBoundsPingsInFlight(t *testing.T) {
	ml := &slowML{delay: 200 * time.Millisecond}
	p := newPinger(ml, 4)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The caller gives up after 10ms; the pings keep their slots
			// until memberlist returns.
			p.ping(member("db2", serf.StatusFailed), 3, 10*time.Millisecond, true)
		}()
	}
	wg.Wait()
	if peak := ml.peak.Load(); peak > 4 {
		t.Fatalf("%d pings in flight, bound 4", peak)
	}
	// Best-effort pings are not sent when every slot is taken.
	for i := 0; i < 4; i++ {
		p.slots <- struct{}{}
	}
	before := ml.calls.Load()
	if p.ping(member("db2", serf.StatusFailed), 1, 10*time.Millisecond, false) {
		t.Fatal("a ping that could not be sent reported an answer")
	}
	if ml.calls.Load() != before {
		t.Fatal("a best-effort ping was sent with no free slot")
	}
	for i := 0; i < 4; i++ {
		<-p.slots
	}
	ml.answer = true
	time.Sleep(300 * time.Millisecond)
	if !p.ping(member("db2", serf.StatusFailed), 3, time.Second, true) {
		t.Fatal("an answered ping was reported unanswered")
	}
}

func TestReviveIntervalSpreadsWithSize(t *testing.T) {
	if reviveInterval(15) != reviveEvery || reviveInterval(1000) != reviveEvery*62 {
		t.Fatalf("reviveInterval(15)=%s reviveInterval(1000)=%s", reviveInterval(15), reviveInterval(1000))
	}
}

// An answer that comes after memberlist's Ping gave up, or any other packet
// from the member, counts while the wait lasts.
func TestPingerCountsLateAnswers(t *testing.T) {
	ml := &slowML{delay: 20 * time.Millisecond} // memberlist gives up after 20ms
	p := newPinger(ml, 4)
	var watched atomic.Int32
	late := make(chan struct{})
	p.watch = func(addr netip.AddrPort) (<-chan struct{}, func()) {
		if addr != netip.MustParseAddrPort("10.0.0.2:7946") {
			t.Errorf("watching %s", addr)
		}
		watched.Add(1)
		return late, func() { watched.Add(-1) }
	}
	m := member("db2", serf.StatusFailed)
	m.Addr, m.Port = net.ParseIP("10.0.0.2"), 7946
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(late)
	}()
	start := time.Now()
	if !p.ping(m, 3, 2*time.Second, true) {
		t.Fatal("a late answer was not counted")
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("answered after %s, before the late packet", d)
	}
	// Nothing at all within the wait: unanswered, after the wait.
	start = time.Now()
	p.watch = func(netip.AddrPort) (<-chan struct{}, func()) {
		watched.Add(1)
		return make(chan struct{}), func() { watched.Add(-1) }
	}
	if p.ping(m, 3, 150*time.Millisecond, true) {
		t.Fatal("a silent member was reported answering")
	}
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Fatalf("gave up after %s, before the wait of 150ms", d)
	}
	if n := watched.Load(); n != 0 {
		t.Fatalf("%d watches left behind", n)
	}
}

// A member that misses the first check gets a second, longer one only if
// it was heard from just before its failure arrived; a member silent since
// long ago (crashed, cut off) is confirmed after the first.
func TestFailureGateAsksAgainWhenRecentlyHeard(t *testing.T) {
	r := &gateRecorder{}
	var careful atomic.Int32
	g := newFailureGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.pingCareful = func(serf.Member) bool { careful.Add(1); return true }
	g.heardSince = func(m serf.Member) (time.Duration, bool) {
		switch m.Name {
		case "silent":
			return 2 * time.Second, true
		case "chatty":
			return 50 * time.Millisecond, true
		}
		return 0, false
	}
	defer g.Close()
	for _, name := range []string{"silent", "never"} {
		g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member(name, serf.StatusFailed)}})
	}
	if ev := waitEvents(t, r, 2); ev[0].Type != serf.EventMemberFailed || ev[1].Type != serf.EventMemberFailed {
		t.Fatalf("got %v", ev)
	}
	if careful.Load() != 0 || g.Careful.Load() != 0 {
		t.Fatal("second check for a member silent for long")
	}
	// Heard 50ms ago: the second check, which it answers: withheld.
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("chatty", serf.StatusFailed)}})
	deadline := time.Now().Add(5 * time.Second)
	for careful.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if careful.Load() == 0 {
		t.Fatal("no second check for a member heard from just before")
	}
	time.Sleep(50 * time.Millisecond)
	if ev := r.get(); len(ev) != 2 || g.Pending() != 1 {
		t.Fatalf("chatty not withheld while answering the second check: events %v, pending %d", ev, g.Pending())
	}
}

// The first packet from a confirmed-failed member gets it asked at once,
// not at the next revival tick.
func TestFailureGateAsksOnFirstPacket(t *testing.T) {
	r := &gateRecorder{}
	g := newFailureGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	packet := make(chan struct{})
	g.heard = func(serf.Member) (<-chan struct{}, func()) { return packet, func() {} }
	var up atomic.Bool
	rejoined := make(chan struct{}, 1)
	g.revivePing = func(serf.Member) bool { return up.Load() }
	g.rejoin = func(serf.Member) {
		select {
		case rejoined <- struct{}{}:
		default:
		}
	}
	g.reviveEvery = func() time.Duration { return time.Hour }
	defer g.Close()
	g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member("db2", serf.StatusFailed)}})
	waitEvents(t, r, 1)
	up.Store(true)
	close(packet)
	select {
	case <-rejoined:
	case <-time.After(5 * time.Second):
		t.Fatal("a packet from a failed member did not get it asked")
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
		g := newFailureGate(func(serf.Member) bool { return false }, r.emit, 10*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
		packets := map[string]chan struct{}{}
		var mu sync.Mutex
		g.heard = func(m serf.Member) (<-chan struct{}, func()) {
			mu.Lock()
			defer mu.Unlock()
			if packets[m.Name] == nil {
				packets[m.Name] = make(chan struct{})
			}
			return packets[m.Name], func() {}
		}
		g.size = func() int { return c.size }
		g.rejoin = func(serf.Member) {}
		g.reviveEvery = func() time.Duration { return time.Hour }
		for i := 0; i < c.failedNum; i++ {
			g.HandleEvent(serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{member(fmt.Sprintf("db%d", i), serf.StatusFailed)}})
		}
		waitEvents(t, r, c.failedNum)
		if g.rejoining() {
			t.Fatal("careful before any packet")
		}
		for {
			mu.Lock()
			ch := packets["db0"]
			mu.Unlock()
			if ch != nil {
				close(ch)
				break
			}
			time.Sleep(time.Millisecond)
		}
		deadline := time.Now().Add(time.Second)
		for !g.rejoining() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if g.rejoining() != c.careful {
			t.Errorf("size %d, %d failed: rejoining = %v, want %v", c.size, c.failedNum, g.rejoining(), c.careful)
		}
		g.Close()
	}
}
