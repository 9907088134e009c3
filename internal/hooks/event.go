package hooks

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"
)

// Event is one of shoal's own events, pool-change or health-change.
type Event struct {
	// Type is PoolChange or HealthChange.
	Type string
	// Time is when it happened; zero means when it is enqueued.
	Time time.Time
	// Data is the event's JSON document, passed on as the "data" member of
	// the handler's stdin. It must be valid JSON; nil is passed as null.
	Data json.RawMessage
}

// StdinVersion is the version of the JSON document shoal events write to
// stdin.
const StdinVersion = 1

// stdinDoc is the JSON document a pool-change or health-change handler reads
// on stdin, followed by a newline.
type stdinDoc struct {
	Version int             `json:"version"`
	Event   string          `json:"event"`
	Time    time.Time       `json:"time"`
	Node    string          `json:"node"`
	Data    json.RawMessage `json:"data"`
}

// item is one event in a handler queue. It is shared by every handler it
// matches and never modified after creation.
type item struct {
	typ  string // event type, as in a filter
	name string // user event or query name

	member *serf.MemberEvent
	user   *serf.UserEvent
	query  *serf.Query
	shoal  *Event

	responded *atomic.Bool // queries: a response was sent
}

// serfEvent reports whether the item came from Serf (and so matches *).
func (it *item) serfEvent() bool { return it.shoal == nil }

// isMember reports whether the item is a member event.
func (it *item) isMember() bool { return it.member != nil }

// isState reports whether the item describes the cluster's state (a member,
// pool-change or health-change event): such events run before user events
// and queries and are never dropped to make room for them.
func (it *item) isState() bool { return it.member != nil || it.shoal != nil }

// class is the item's event class, one of Classes.
func (it *item) class() string {
	switch {
	case it.member != nil:
		return ClassMember
	case it.shoal != nil:
		return ClassShoal
	case it.query != nil:
		return ClassQuery
	default:
		return ClassUser
	}
}

// label names the event in logs: member-join, user:deploy, query:ping.
func (it *item) label() string {
	if it.name != "" {
		return it.typ + ":" + it.name
	}
	return it.typ
}

// newSerfItem wraps a Serf event.
func newSerfItem(e serf.Event) (*item, error) {
	switch e := e.(type) {
	case serf.MemberEvent:
		return newMemberItem(e)
	case *serf.MemberEvent:
		if e == nil {
			return nil, fmt.Errorf("nil member event")
		}
		return newMemberItem(*e)
	case serf.UserEvent:
		return &item{typ: User, name: e.Name, user: &e}, nil
	case *serf.UserEvent:
		if e == nil {
			return nil, fmt.Errorf("nil user event")
		}
		u := *e
		return &item{typ: User, name: u.Name, user: &u}, nil
	case *serf.Query:
		if e == nil {
			return nil, fmt.Errorf("nil query")
		}
		return &item{typ: Query, name: e.Name, query: e, responded: new(atomic.Bool)}, nil
	case nil:
		return nil, fmt.Errorf("nil event")
	default:
		return nil, fmt.Errorf("unsupported serf event %T", e)
	}
}

func newMemberItem(e serf.MemberEvent) (*item, error) {
	var typ string
	switch e.Type {
	case serf.EventMemberJoin:
		typ = MemberJoin
	case serf.EventMemberLeave:
		typ = MemberLeave
	case serf.EventMemberFailed:
		typ = MemberFailed
	case serf.EventMemberUpdate:
		typ = MemberUpdate
	case serf.EventMemberReap:
		typ = MemberReap
	default:
		return nil, fmt.Errorf("member event with unknown type %d", int(e.Type))
	}
	return &item{typ: typ, member: &e}, nil
}

// newShoalItem wraps a shoal event, checking it.
func newShoalItem(e Event, now time.Time) (*item, error) {
	if e.Type != PoolChange && e.Type != HealthChange {
		return nil, fmt.Errorf("unknown shoal event type %q (want %s or %s)", e.Type, PoolChange, HealthChange)
	}
	if e.Data != nil && !json.Valid(e.Data) {
		return nil, fmt.Errorf("%s event: data is not valid JSON", e.Type)
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	return &item{typ: e.Type, shoal: &e}, nil
}
