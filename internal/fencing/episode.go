package fencing

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/backoff"
	"github.com/shoaldb/shoal/internal/pool"
)

// retry spaces the attempts that failed within one conflict.
var retry = backoff.Policy{Initial: time.Second, Max: 30 * time.Second}

// episode is the fencing loop's memory of the current conflict.
type episode struct {
	since    time.Time // when the conflict began; zero when there is none
	done     bool      // this episode's fence succeeded: never again in it
	attempts int
	next     time.Time // no attempt before this (after a failure)
}

// step returns the episode after a look at the pool at now, and whether
// to fence now: the conflict has lasted after, continuously, and this
// episode has not fenced yet (nor is it waiting to retry). A look without
// the conflict ends the episode.
func (e episode) step(conflict bool, now time.Time, after time.Duration) (episode, bool) {
	if !conflict {
		return episode{}, false
	}
	if e.since.IsZero() {
		e.since = now
	}
	return e, !e.done && now.Sub(e.since) >= after && !now.Before(e.next)
}

// record notes an attempt's outcome.
func (e *episode) record(err error, now time.Time) {
	e.attempts++
	if err == nil {
		e.done, e.next = true, time.Time{}
		return
	}
	e.next = now.Add(retry.Delay(e.attempts))
}

// Conflict reports whether self, a db node, must be fenced by the pool p
// of its own agent, and why: in a cluster that requires a writer term, a
// term is known, its holder is another node and is the writer in p, and
// self is out with reason conflict (its server is writable). Never when
// this agent is isolated: its view of the fleet may be old.
func Conflict(p *pool.Pool, self string, isolated bool) (cluster, why string, ok bool) {
	if p == nil || isolated {
		return "", "", false
	}
	for _, c := range p.Clusters {
		t := c.Term
		if t == nil || t.Number == 0 || t.Writer == self {
			continue
		}
		if len(c.Writers) != 1 || c.Writers[0].Name != t.Writer || c.Writers[0].Addr != t.Addr {
			continue
		}
		for _, n := range c.Out {
			if n.Name == self && n.Reason == pool.ReasonConflict {
				return c.Name, fmt.Sprintf("writable, but term %d belongs to %s (%s)", t.Number, t.Writer, t.Addr), true
			}
		}
	}
	return "", "", false
}

// selfState says whether self is out of p as critical (its server down),
// or in it as a writer or reader.
func selfState(p *pool.Pool, self string) (down, in bool) {
	if p == nil {
		return false, false
	}
	for _, c := range p.Clusters {
		for _, l := range [][]pool.Node{c.Writers, c.Readers} {
			for _, n := range l {
				if n.Name == self {
					in = true
				}
			}
		}
		for _, n := range c.Out {
			if n.Name == self && n.Reason == pool.ReasonCritical {
				down = true
			}
		}
	}
	return down, in
}

// leaseWatch follows a voter's last contact with a raft leader: itself
// while it leads (hashicorp/raft's leader steps down when it has not heard
// from a quorum for leader_lease_timeout), else raft's last contact.
//
// Before the first contact the lease counts from grace (the agent's start
// plus a lease: raft needs an election first); from the first contact on,
// from the last contact only, so a cut soon after the start fences a lease
// after the last contact, not a lease after the grace.
type leaseWatch struct{ contact, grace time.Time }

// observe notes the raft state seen at now.
func (w *leaseWatch) observe(leader bool, lastContact, now time.Time) {
	switch {
	case leader:
		w.contact = now
	case lastContact.After(w.contact):
		w.contact = lastContact
	}
}

// since is what the lease counts from: the last contact, or the grace
// before any.
func (w *leaseWatch) since() time.Time {
	if w.contact.IsZero() {
		return w.grace
	}
	return w.contact
}

// lost reports whether the lease of a voter holding the terms held ran
// out at now: no contact with a leader for lease. A voter that holds no
// term has no lease.
func (w *leaseWatch) lost(held []pool.Term, now time.Time, lease time.Duration) (why string, lost bool) {
	if len(held) == 0 || now.Sub(w.since()) < lease {
		return "", false
	}
	var ts []string
	for _, t := range held {
		ts = append(ts, fmt.Sprintf("term %d of %s", t.Number, t.Cluster))
	}
	return fmt.Sprintf("lease lost: holds %s, no contact with a raft leader for %s (lease %s)",
		strings.Join(ts, ", "), now.Sub(w.since()).Round(time.Millisecond), lease), true
}

// heldTerms are the terms of tv that self holds, by cluster name.
func heldTerms(tv pool.TermView, self string) []pool.Term {
	var out []pool.Term
	for _, c := range slices.Sorted(maps.Keys(tv.Terms)) {
		if t := tv.Terms[c]; t.Number > 0 && t.Writer == self {
			out = append(out, t)
		}
	}
	return out
}

// leaseReturn is the fencing loop's memory of a fence for a lost lease:
// the terms held then, and since when contact is back.
type leaseReturn struct {
	fenced []pool.Term // nil: no lease fence to undo
	since  time.Time   // contact back since; zero while it is not
	next   time.Time   // no attempt before this (after a failure)
}

// step notes that contact is back at now and reports whether the fence
// may be undone: contact has lasted after, and no failed attempt waits.
func (b *leaseReturn) step(now time.Time, after time.Duration) bool {
	if b.since.IsZero() {
		b.since = now
	}
	return now.Sub(b.since) >= after && !now.Before(b.next)
}

// stillHeld reports whether every term fenced is still this node's, by
// tv, and if not, which moved.
func (b *leaseReturn) stillHeld(tv pool.TermView, self string) (string, bool) {
	for _, t := range b.fenced {
		cur := tv.Terms[t.Cluster]
		if cur.Number != t.Number || cur.Writer != self {
			return fmt.Sprintf("term %d of %s is now %d, held by %s", t.Number, t.Cluster, cur.Number, cur.Writer), false
		}
	}
	return "", true
}
