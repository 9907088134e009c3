package hooks

import (
	"container/list"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

func memberItem(name string) *item {
	return memberEvent(serf.EventMemberJoin, name)
}

func memberEvent(typ serf.EventType, names ...string) *item {
	e := serf.MemberEvent{Type: typ}
	for _, n := range names {
		e.Members = append(e.Members, serf.Member{Name: n})
	}
	it, err := newSerfItem(e)
	if err != nil {
		panic(err)
	}
	return it
}

func userItem(name string) *item {
	it, _ := newSerfItem(serf.UserEvent{Name: name})
	return it
}

func queryItem(name string) *item {
	it, _ := newSerfItem(&serf.Query{Name: name})
	return it
}

func shoalItem(typ string) *item {
	it, err := newShoalItem(Event{Type: typ}, time.Now())
	if err != nil {
		panic(err)
	}
	return it
}

// itemName names an item in test output: member-failed:a+b, u:deploy,
// q:load, pool-change.
func itemName(it *item) string {
	switch {
	case it.member != nil:
		var ns []string
		for _, m := range it.member.Members {
			ns = append(ns, m.Name)
		}
		return it.typ + ":" + strings.Join(ns, "+")
	case it.user != nil:
		return "u:" + it.name
	case it.query != nil:
		return "q:" + it.name
	default:
		return it.typ
	}
}

func names(items []*item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, itemName(it))
	}
	return out
}

// contents lists the queue in run order without changing it.
func contents(q *queue) []string {
	var items []*item
	for e := q.state.Front(); e != nil; e = e.Next() {
		items = append(items, e.Value.(*item))
	}
	return names(append(items, q.bulk...))
}

// checkIndex fails unless q.keys indexes exactly the state part.
func checkIndex(t *testing.T, q *queue) {
	t.Helper()
	want := map[string][]*list.Element{}
	for e := q.state.Front(); e != nil; e = e.Next() {
		for _, k := range stateKeys(e.Value.(*item)) {
			want[k] = append(want[k], e)
		}
	}
	if !maps.EqualFunc(want, q.keys, slices.Equal) {
		t.Errorf("index %v, want %v", q.keys, want)
	}
	if q.state.Len() > q.limit || len(q.bulk) > q.limit || q.high > q.limit {
		t.Errorf("over the bound %d: state %d, bulk %d, high %d", q.limit, q.state.Len(), len(q.bulk), q.high)
	}
}

func TestQueuePolicy(t *testing.T) {
	const (
		join   = serf.EventMemberJoin
		failed = serf.EventMemberFailed
	)
	tests := []struct {
		name      string
		fill      []*item
		push      *item
		dropped   []string // "event/reason"
		coalesced int
		contents  []string // in run order
	}{
		{"room", []*item{memberItem("a")}, userItem("x"), nil, 0, []string{"member-join:a", "u:x"}},
		{"state events run first, each part in order",
			[]*item{userItem("1"), memberItem("a"), queryItem("2"), shoalItem(PoolChange)}, memberItem("b"), nil, 0,
			[]string{"member-join:a", "pool-change", "member-join:b", "u:1", "q:2"}},
		{"full bulk drops its oldest",
			[]*item{userItem("1"), memberItem("a"), queryItem("2"), userItem("3")}, queryItem("4"), []string{"u:1/queue_full"}, 0,
			[]string{"member-join:a", "q:2", "u:3", "q:4"}},
		{"a member event never makes way for user events",
			[]*item{userItem("1"), userItem("2"), userItem("3")}, memberEvent(failed, "a"), nil, 0,
			[]string{"member-failed:a", "u:1", "u:2", "u:3"}},
		{"user events never make way for member events",
			[]*item{memberItem("a"), memberItem("b"), memberItem("c")}, userItem("1"), nil, 0,
			[]string{"member-join:a", "member-join:b", "member-join:c", "u:1"}},
		{"full state: the newest state of a member wins",
			[]*item{memberItem("a"), memberItem("b"), memberItem("c")}, memberEvent(failed, "a"), []string{"member-join:a/superseded"}, 0,
			[]string{"member-join:b", "member-join:c", "member-failed:a"}},
		{"full state: every older entry of the member goes",
			[]*item{memberItem("a"), memberEvent(failed, "a"), memberItem("b")}, memberItem("a"),
			[]string{"member-join:a/superseded", "member-failed:a/superseded"}, 0,
			[]string{"member-join:b", "member-join:a"}},
		{"full state: a shared event keeps its other members",
			[]*item{memberEvent(join, "a", "b"), memberItem("c"), memberItem("d")}, memberEvent(failed, "a"),
			[]string{"member-join:b/queue_full"}, 1,
			[]string{"member-join:c", "member-join:d", "member-failed:a"}},
		{"full state, no older state of the same member: the oldest goes",
			[]*item{memberItem("a"), shoalItem(HealthChange), memberItem("c")}, memberItem("d"), []string{"member-join:a/queue_full"}, 0,
			[]string{"health-change", "member-join:c", "member-join:d"}},
		{"full state: the newest pool-change wins",
			[]*item{shoalItem(PoolChange), memberItem("a"), shoalItem(HealthChange)}, shoalItem(PoolChange), []string{"pool-change/superseded"}, 0,
			[]string{"member-join:a", "health-change", "pool-change"}},
		{"full state: not superseded by another type",
			[]*item{shoalItem(HealthChange), memberItem("a"), memberItem("b")}, shoalItem(PoolChange), []string{"health-change/queue_full"}, 0,
			[]string{"member-join:a", "member-join:b", "pool-change"}},
		{"room in the state part: nothing is coalesced",
			[]*item{memberItem("a"), memberEvent(failed, "a")}, memberItem("a"), nil, 0,
			[]string{"member-join:a", "member-failed:a", "member-join:a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(3)
			for _, it := range tt.fill {
				if res := q.push(it); len(res.drops) > 0 || res.coalesced > 0 {
					t.Fatalf("dropped while filling: %+v", res)
				}
			}
			res := q.push(tt.push)
			var dropped []string
			for _, d := range res.drops {
				dropped = append(dropped, itemName(d.it)+"/"+d.reason)
			}
			if !slices.Equal(dropped, tt.dropped) || res.coalesced != tt.coalesced {
				t.Errorf("dropped %q, coalesced %d; want %q, %d", dropped, res.coalesced, tt.dropped, tt.coalesced)
			}
			if got := contents(q); !slices.Equal(got, tt.contents) {
				t.Errorf("queue %q, want %q", got, tt.contents)
			}
			checkIndex(t, q)
			var popped []*item
			for it := q.pop(); it != nil; it = q.pop() {
				popped = append(popped, it)
			}
			if got := names(popped); !slices.Equal(got, tt.contents) {
				t.Errorf("popped %q, want %q", got, tt.contents)
			}
			if q.len() != 0 || len(q.keys) != 0 {
				t.Errorf("after popping everything: len %d, index %v", q.len(), q.keys)
			}
		})
	}
}

// TestQueueSharedItemsUntouched: coalescing replaces a queued event shared
// with other handlers, never modifies it.
func TestQueueSharedItemsUntouched(t *testing.T) {
	shared := memberEvent(serf.EventMemberJoin, "a", "b")
	q := newQueue(1)
	q.push(shared)
	q.push(memberEvent(serf.EventMemberFailed, "a"))
	if got := itemName(shared); got != "member-join:a+b" {
		t.Errorf("the shared event became %s", got)
	}
}

// TestQueueFloodKeepsStateEvents is the attack on a handler's queue: any
// gossip key holder sends thousands of user events (and queries) while a
// member fails; every state event stays queued and runs before them.
func TestQueueFloodKeepsStateEvents(t *testing.T) {
	q := newQueue(100)
	var drops []drop
	for i := range 1200 {
		drops = append(drops, q.push(userItem(fmt.Sprint(i))).drops...)
		if i%2 == 0 {
			drops = append(drops, q.push(queryItem(fmt.Sprint(i))).drops...)
		}
		switch i {
		case 600:
			drops = append(drops, q.push(memberEvent(serf.EventMemberFailed, "db2")).drops...)
		case 601:
			drops = append(drops, q.push(shoalItem(PoolChange)).drops...)
		}
	}
	for _, d := range drops {
		if d.it.isState() || d.reason != DropQueueFull {
			t.Fatalf("dropped %s (%s)", itemName(d.it), d.reason)
		}
	}
	if len(drops) != 1200+600-100 {
		t.Errorf("%d drops, want %d", len(drops), 1200+600-100)
	}
	if a, b := itemName(q.pop()), itemName(q.pop()); a != "member-failed:db2" || b != "pool-change" {
		t.Errorf("first runs %s, %s; want the member-failed and the pool-change", a, b)
	}
	checkIndex(t, q)
}

func TestQueuePopOrderAndBound(t *testing.T) {
	q := newQueue(100)
	for i := range 1000 {
		q.push(memberItem(fmt.Sprint(i)))
		q.push(userItem(fmt.Sprint(i)))
	}
	if q.len() != 200 || q.high != 100 {
		t.Fatalf("len %d high %d, want 200 and 100", q.len(), q.high)
	}
	checkIndex(t, q)
	for i := 900; i < 1000; i++ {
		if got := itemName(q.pop()); got != fmt.Sprintf("member-join:%d", i) {
			t.Fatalf("pop %s, want member %d", got, i)
		}
	}
	for i := 900; i < 1000; i++ {
		if got := itemName(q.pop()); got != fmt.Sprintf("u:%d", i) {
			t.Fatalf("pop %s, want user event %d", got, i)
		}
	}
	if q.pop() != nil || len(q.keys) != 0 {
		t.Fatal("queue not empty")
	}
}

// TestQueueRandomBound pushes random events of every class and checks the
// bounds and the index after each push and pop.
func TestQueueRandomBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := newQueue(7)
	for range 5000 {
		var it *item
		switch rng.IntN(5) {
		case 0:
			it = memberEvent(serf.EventType(rng.IntN(5)), fmt.Sprint(rng.IntN(10)))
		case 1:
			it = memberEvent(serf.EventMemberJoin, fmt.Sprint(rng.IntN(10)), fmt.Sprint(rng.IntN(10)))
		case 2:
			it = shoalItem([]string{PoolChange, HealthChange}[rng.IntN(2)])
		case 3:
			it = userItem("u")
		default:
			it = queryItem("q")
		}
		before := q.len()
		res := q.push(it)
		if q.len() != before+1-len(res.drops) {
			t.Fatalf("len %d after push to %d with %d drops", q.len(), before, len(res.drops))
		}
		if rng.IntN(3) == 0 {
			q.pop()
		}
		checkIndex(t, q)
		if t.Failed() {
			t.FailNow()
		}
	}
	if n := len(q.drain()); n > 14 || q.len() != 0 || len(q.keys) != 0 {
		t.Fatalf("drained %d, left %d, index %v", n, q.len(), q.keys)
	}
}

func TestCoalescer(t *testing.T) {
	m := func(name string) serf.Member { return serf.Member{Name: name, Addr: net.IPv4(10, 0, 0, 1)} }
	c := newCoalescer()
	c.add(&serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{m("b"), m("a")}})
	c.add(&serf.MemberEvent{Type: serf.EventMemberFailed, Members: []serf.Member{m("c")}})
	if n := c.add(&serf.MemberEvent{Type: serf.EventMemberLeave, Members: []serf.Member{m("c")}}); n != 1 {
		t.Errorf("replaced %d, want 1", n)
	}
	events, repeats := c.flush()
	if repeats != 0 || len(events) != 2 ||
		events[0].Type != serf.EventMemberJoin || events[0].Members[0].Name != "a" || events[0].Members[1].Name != "b" ||
		events[1].Type != serf.EventMemberLeave || events[1].Members[0].Name != "c" {
		t.Fatalf("first flush: %+v, %d repeats", events, repeats)
	}
	// A repeat of the last delivered event is left out, an update is not.
	c.add(&serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{m("a")}})
	c.add(&serf.MemberEvent{Type: serf.EventMemberUpdate, Members: []serf.Member{m("b")}})
	events, repeats = c.flush()
	if repeats != 1 || len(events) != 1 || events[0].Type != serf.EventMemberUpdate {
		t.Fatalf("second flush: %+v, %d repeats", events, repeats)
	}
	c.add(&serf.MemberEvent{Type: serf.EventMemberUpdate, Members: []serf.Member{m("b")}})
	if events, _ = c.flush(); len(events) != 1 {
		t.Fatalf("repeated update left out: %+v", events)
	}
	if c.pending() {
		t.Fatal("pending after flush")
	}
}

// dropRecorder keeps what a dropLog emits.
type dropRecorder struct {
	mu    sync.Mutex
	lines []string
	total uint64 // drops in all lines
}

func (r *dropRecorder) emit(first bool, event string, counts map[dropKey]uint64, _ time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range counts {
		r.total += n
	}
	r.lines = append(r.lines, fmt.Sprintf("first=%v event=%s counts=%v", first, event, counts))
}

// logged returns the lines so far.
func (r *dropRecorder) logged() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

func TestDropLogRateLimit(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	var rec dropRecorder
	d := dropLog{interval: time.Hour, clock: clock, emit: rec.emit}
	d.note(ClassUser, DropQueueFull, "user:x", 1)
	for range 999 {
		d.note(ClassUser, DropQueueFull, "user:x", 1)
	}
	if len(rec.lines) != 1 || rec.lines[0] != "first=true event=user:x counts=map[{user queue_full}:1]" {
		t.Fatalf("after 1000 drops: %q", rec.lines)
	}
	// The summary timer never fires in this test: a drop at the end of the
	// interval logs at once (in real time it races the timer, which would
	// log the same counts).
	d.timer.Stop()
	clock.Advance(time.Hour)
	d.note(ClassMember, DropRemoved, "member-join", 2)
	if len(rec.lines) != 2 || rec.lines[1] != "first=false event=member-join counts=map[{member handler_removed}:2 {user queue_full}:999]" {
		t.Fatalf("after the interval: %q", rec.lines)
	}
	d.note(ClassUser, DropQueueFull, "user:x", 5)
	d.flush()
	if len(rec.lines) != 3 || rec.total != 1007 {
		t.Fatalf("after flush: %q, total %d, want 1007", rec.lines, rec.total)
	}
	d.flush()
	if len(rec.lines) != 3 {
		t.Fatalf("empty flush logged: %q", rec.lines)
	}
}

// TestDropLogTimerLogsTheSummary: drops held back within the interval are
// logged by the timer when the interval ends, with no further drop.
func TestDropLogTimerLogsTheSummary(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var rec dropRecorder
	d := dropLog{interval: time.Minute, clock: clock, emit: rec.emit}
	d.note(ClassUser, DropQueueFull, "user:x", 1)
	d.note(ClassUser, DropQueueFull, "user:x", 3)
	clock.Advance(59 * time.Second)
	if got := rec.logged(); !slices.Equal(got, []string{"first=true event=user:x counts=map[{user queue_full}:1]"}) {
		t.Fatalf("within the interval: %q, want the first drop alone", got)
	}
	clock.Advance(time.Second)
	testkit.WaitFor(t, 10*time.Second, "the timer's summary", func() bool { return len(rec.logged()) == 2 })
	if got := rec.logged()[1]; got != "first=false event= counts=map[{user queue_full}:3]" {
		t.Errorf("summary: %q", got)
	}
}
