package pool

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// Term is a cluster's writer term: the one node that may take the
// cluster's writes, granted through consensus (package consensus) and
// numbered so that a later grant always wins. Number 0 is no term.
type Term struct {
	Cluster string `json:"cluster"`
	Number  uint64 `json:"term"`
	Writer  string `json:"writer"`
	// Addr is the writer's routed address ("host:port") when the term was
	// granted: a node that takes the writer's name later, with another
	// address, does not hold the term.
	Addr    string    `json:"addr"`
	Granted time.Time `json:"granted"`
	// Why says what the grant followed, for history and `shoal info`.
	Why string `json:"why"`
	// Group is the raft group that granted the term (tags.ValidGroup): an
	// agent follows only the terms of its own fleet's group.
	Group string `json:"group,omitempty"`
}

// Grant is a decision to grant a new term: Term.Number is Expect+1, and
// the grant applies only while the cluster's term is still Expect (a
// compare-and-set, so two decisions made on the same old term cannot
// both apply).
type Grant struct {
	Term   Term   `json:"term"`
	Expect uint64 `json:"expect"`
}

// Limits of a term's fields, checked where a term enters (CheckTerm).
const (
	maxTermName = 256
	maxTermWhy  = 256
)

// CheckTerm reports what is wrong with a term that came from outside (a
// raft log entry, a snapshot): empty or over-long names, an address that
// is not host:port, a zero number.
func CheckTerm(t Term) error {
	switch {
	case t.Cluster == "" || len(t.Cluster) > tags.MaxClusterLen:
		return fmt.Errorf("cluster %q: must be 1 to %d bytes", t.Cluster, tags.MaxClusterLen)
	case t.Writer == "" || len(t.Writer) > maxTermName:
		return fmt.Errorf("writer of %q: must be 1 to %d bytes", t.Cluster, maxTermName)
	case len(t.Addr) > maxTermName || !strings.Contains(t.Addr, ":"):
		return fmt.Errorf("addr %q of %q: must be host:port", t.Addr, t.Cluster)
	case len(t.Why) > maxTermWhy:
		return fmt.Errorf("why of %q: longer than %d bytes", t.Cluster, maxTermWhy)
	case t.Number == 0:
		return fmt.Errorf("term of %q: number 0", t.Cluster)
	case t.Group != "" && !tags.ValidGroup(t.Group):
		return fmt.Errorf("group %q of %q: must be %d lowercase hex digits", t.Group, t.Cluster, tags.GroupLen)
	}
	return nil
}

// DecideTerms returns the grants the consensus leader should make, from
// its view of the members, the current terms by cluster and the voters
// (only a voter can hold a term). The rules (docs/consensus.md):
//
//   - no term yet: grant term 1 when exactly one passing server of the
//     cluster is writable, and it is a voter;
//   - the holder is gone (not a member, left, failed, critical or
//     read-only) and exactly one other passing server is writable, a
//     voter: grant it the next term (an outside promotion: an operator,
//     Orchestrator or MaxScale flipped read_only);
//   - otherwise none: two writable servers leave the term where it is,
//     and a slow (warning) holder keeps it.
//
// A Galera cluster (any synced Galera node) gets no term: all its nodes
// are writable by design, and its writer rule is pickWriter's.
//
// barred names, by cluster, a node that may not get the next term by these
// rules: the writer a failover replaced, while that failover's term is
// current (a writer frozen before it and thawed now still gossips its old
// writable tag while the new holder's tag may still say read-only: it is
// no outside promotion).
func DecideTerms(members []Member, policy Policy, terms map[string]Term, voters map[string]bool, barred map[string]string, now time.Time) []Grant {
	byCluster := map[string][]Member{}
	for _, m := range dedupe(members) {
		if m.Tags[tags.KeyRole] == tags.RoleDB {
			c := tags.Cluster(m.Tags)
			byCluster[c] = append(byCluster[c], m)
		}
	}
	var grants []Grant
	for _, c := range slices.Sorted(maps.Keys(byCluster)) {
		if g, ok := decideTerm(c, byCluster[c], policy, terms[c], voters, now); ok && (barred[c] == "" || barred[c] != g.Term.Writer) {
			grants = append(grants, g)
		}
	}
	return grants
}

func decideTerm(cluster string, ms []Member, policy Policy, cur Term, voters map[string]bool, now time.Time) (Grant, bool) {
	var writable []eval
	holderGone, holderWhy := cur.Number != 0, "not a member"
	for _, m := range ms {
		e := evaluate(m, policy)
		if e.galera {
			return Grant{}, false
		}
		if e.kind == kindWriter && voters[m.Name] {
			writable = append(writable, e)
		}
		if cur.Number != 0 && m.Name == cur.Writer {
			holderGone, holderWhy = termHolderGone(m)
			if m.Addr != cur.Addr {
				// The same node at another address (its MySQL address
				// changed) no longer holds the term, which routers
				// match by name and address: without a new term it
				// would never be the writer again.
				holderGone, holderWhy = true, "now at "+m.Addr
			}
		}
	}
	if cur.Number != 0 && !holderGone {
		return Grant{}, false
	}
	writable = slices.DeleteFunc(writable, func(e eval) bool {
		return cur.Number != 0 && e.node.Name == cur.Writer && e.node.Addr == cur.Addr
	})
	if len(writable) != 1 {
		return Grant{}, false
	}
	w := writable[0].node
	why := "first term: the only writable server"
	if cur.Number != 0 {
		why = fmt.Sprintf("%s was the writer (term %d) and is %s; %s is the only writable server", cur.Writer, cur.Number, holderWhy, w.Name)
	}
	return Grant{Expect: cur.Number, Term: Term{Cluster: cluster, Number: cur.Number + 1, Writer: w.Name, Addr: w.Addr,
		Granted: now.UTC().Truncate(time.Millisecond), Why: why}}, true
}

// termHolderGone reports whether the term holder m can no longer take
// writes, and why: its member left or failed, or its server is critical
// or read-only. Warning, lag, maintenance and the like do not end a term.
func termHolderGone(m Member) (bool, string) {
	switch {
	case m.Bad != ReasonNone:
		return true, "refused (" + string(m.Bad) + ")"
	case m.Status == StatusLeft || m.Status == StatusLeaving:
		return true, "left"
	case m.Status == StatusFailed:
		return true, "failed"
	case m.Status != StatusAlive:
		return true, m.Status.String()
	case m.Health == nil:
		return true, "without health"
	case m.Health.State == tags.Critical:
		return true, "critical"
	case m.Health.ReadOnly:
		return true, "read-only"
	}
	return false, ""
}
