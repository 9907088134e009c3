package hooks

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

func memberItem(name string) *item {
	it, _ := newSerfItem(serf.MemberEvent{Type: serf.EventMemberJoin, Members: []serf.Member{{Name: name}}})
	return it
}

func userItem(name string) *item {
	it, _ := newSerfItem(serf.UserEvent{Name: name})
	return it
}

func names(items []*item) []string {
	var out []string
	for _, it := range items {
		switch {
		case it.member != nil:
			out = append(out, "m:"+it.member.Members[0].Name)
		default:
			out = append(out, "u:"+it.name)
		}
	}
	return out
}

func TestQueueDropPolicy(t *testing.T) {
	tests := []struct {
		name     string
		fill     []*item
		push     *item
		dropped  string
		contents []string
	}{
		{"room", []*item{memberItem("a")}, userItem("x"), "", []string{"m:a", "u:x"}},
		{"oldest member first", []*item{userItem("1"), memberItem("a"), memberItem("b")}, userItem("x"), "m:a", []string{"u:1", "m:b", "u:x"}},
		{"member before user even when newer", []*item{userItem("1"), userItem("2"), memberItem("a")}, memberItem("b"), "m:a", []string{"u:1", "u:2", "m:b"}},
		{"incoming member when only users", []*item{userItem("1"), userItem("2"), userItem("3")}, memberItem("b"), "m:b", []string{"u:1", "u:2", "u:3"}},
		{"oldest when none droppable", []*item{userItem("1"), userItem("2"), userItem("3")}, userItem("4"), "u:1", []string{"u:2", "u:3", "u:4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := queue{limit: 3}
			for _, it := range tt.fill {
				if d := q.push(it); d != nil {
					t.Fatalf("dropped while filling")
				}
			}
			got := ""
			if d := q.push(tt.push); d != nil {
				got = names([]*item{d})[0]
			}
			if got != tt.dropped {
				t.Errorf("dropped %q, want %q", got, tt.dropped)
			}
			if got := names(q.items); !slices.Equal(got, tt.contents) {
				t.Errorf("queue %v, want %v", got, tt.contents)
			}
			members := 0
			for _, it := range q.items {
				if it.isMember() {
					members++
				}
			}
			if q.members != members || q.len() > q.limit || q.high > q.limit {
				t.Errorf("members %d (counted %d), len %d, high %d", q.members, members, q.len(), q.high)
			}
		})
	}
}

func TestQueuePopOrderAndBound(t *testing.T) {
	q := queue{limit: 100}
	for i := range 1000 {
		q.push(memberItem(fmt.Sprint(i)))
	}
	if q.len() != 100 || q.high != 100 {
		t.Fatalf("len %d high %d, want 100", q.len(), q.high)
	}
	for i := 900; i < 1000; i++ {
		it := q.pop()
		if got := it.member.Members[0].Name; got != fmt.Sprint(i) {
			t.Fatalf("pop %s, want %d", got, i)
		}
	}
	if q.pop() != nil || q.members != 0 {
		t.Fatal("queue not empty")
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

func TestDropLogRateLimit(t *testing.T) {
	var (
		mu    sync.Mutex
		now   = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		lines []string
		total uint64
	)
	d := dropLog{
		interval: time.Hour, // the timer never fires in this test
		now:      func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		emit: func(first bool, event string, counts map[string]uint64, _ time.Time) {
			mu.Lock()
			defer mu.Unlock()
			for _, n := range counts {
				total += n
			}
			lines = append(lines, fmt.Sprintf("first=%v event=%s counts=%v", first, event, counts))
		},
	}
	d.note(DropQueueFull, "member-join", 1)
	for range 999 {
		d.note(DropQueueFull, "member-join", 1)
	}
	if len(lines) != 1 || lines[0] != "first=true event=member-join counts=map[queue_full:1]" {
		t.Fatalf("after 1000 drops: %q", lines)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	d.note(DropRemoved, "user", 2)
	if len(lines) != 2 || lines[1] != "first=false event=user counts=map[handler_removed:2 queue_full:999]" {
		t.Fatalf("after the interval: %q", lines)
	}
	d.note(DropQueueFull, "user", 5)
	d.flush()
	if len(lines) != 3 || total != 1007 {
		t.Fatalf("after flush: %q, total %d, want 1007", lines, total)
	}
	d.flush()
	if len(lines) != 3 {
		t.Fatalf("empty flush logged: %q", lines)
	}
}
