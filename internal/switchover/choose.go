package switchover

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/tags"
)

// gtid is one MariaDB GTID: domain-server-seq.
type gtid struct {
	Domain, Server uint32
	Seq            uint64
}

// gtidList is a MariaDB GTID position ("0-1-100,1-2-5"): the last
// transaction of each domain.
type gtidList map[uint32]gtid

// parseGTIDList reads a MariaDB GTID position; "" is the empty one.
func parseGTIDList(s string) (gtidList, error) {
	out := gtidList{}
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		f := strings.Split(strings.TrimSpace(part), "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("GTID %.40q: want domain-server-seq", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("GTID %.40q: want domain-server-seq in decimal", part)
		}
		if _, dup := out[uint32(d)]; dup {
			return nil, fmt.Errorf("GTID position %.80q: domain %d twice", s, d)
		}
		out[uint32(d)] = gtid{Domain: uint32(d), Server: uint32(sv), Seq: n}
	}
	return out, nil
}

// beyond names what of l is beyond o, per domain: "0-1-22..0-1-24"
// (the transactions l has after o's last of the domain), the same
// sequence number of another server as one; "" when nothing is.
func (l gtidList) beyond(o gtidList) string {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(l)) {
		g, theirs := l[d], o[d]
		switch {
		case g.Seq > theirs.Seq+1:
			parts = append(parts, fmt.Sprintf("%d-%d-%d..%d-%d-%d", d, g.Server, theirs.Seq+1, d, g.Server, g.Seq))
		case g.Seq == theirs.Seq+1, g.Seq == theirs.Seq && g.Seq > 0 && g.Server != 0 && theirs.Server != 0 && g.Server != theirs.Server:
			parts = append(parts, fmt.Sprintf("%d-%d-%d", d, g.Server, g.Seq))
		}
	}
	return strings.Join(parts, ",")
}

// behind is how many transactions of o the list l lacks (per domain, how
// far l's sequence number is below o's). The same sequence number from
// two servers (both known) is two histories: l lacks o's one.
func (l gtidList) behind(o gtidList) uint64 {
	var n uint64
	for d, g := range o {
		switch mine := l[d]; {
		case g.Seq > mine.Seq:
			n += g.Seq - mine.Seq
		case g.Seq == mine.Seq && g.Seq > 0 && g.Server != 0 && mine.Server != 0 && g.Server != mine.Server:
			n++
		}
	}
	return n
}

// candidate is one replica's answer to a failover's survey.
type candidate struct {
	Name, Addr string
	// Err: the survey failed (no answer, or an error): the candidate's
	// position is unknown.
	Err error
	// Pos is what it applied (gtid_current_pos after the drain);
	// Received what its IO thread had received.
	Pos, Received gtidList
	Survey        consensus.SurveyAnswer
	SQLError      string
	Timers        *consensus.ReplTimers // its replication timers, from the survey
	// Hint: not surveyed (its agent is gone or did not answer); Pos is
	// its last gossiped position, which the pick must hold too.
	Hint bool
}

// choice is the candidate a failover promotes, and why; or why none.
type choice struct {
	Pick string // "" when none may be promoted
	Addr string
	Why  string
	// Out says why each candidate not picked was passed over.
	Out map[string]string
}

// choose picks the replica a failover promotes: a replica whose SQL
// thread runs, that applied everything it received, that has no errant
// transactions, whose promotion rule is not never, and whose position
// holds every transaction any surveyed replica applied or received. Ties
// go to a candidate whose rule is prefer, then to the first by name. A
// never candidate's transactions still count: when it alone holds them,
// nobody is promoted. old is the
// dead writer's last gossiped position: a transaction a candidate wrote
// itself that neither old nor any other replica has is errant (its
// server_id is the candidate's own, its sequence number beyond
// everyone's). None is picked when no candidate holds every transaction:
// promoting one would lose what the others have.
func choose(cands []candidate, old tags.Position) choice {
	ch := choice{Out: map[string]string{}}
	var eligible []candidate
	for _, c := range cands {
		if why := ineligible(c, cands, old); why != "" {
			ch.Out[c.Name] = why
			continue
		}
		eligible = append(eligible, c)
	}
	// Those whose rule is prefer first, then by name.
	slices.SortFunc(eligible, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.Name, b.Name))
	})
	var best *candidate
	for i := range eligible {
		c := &eligible[i]
		if lack := lacking(*c, cands, old); lack != "" {
			ch.Out[c.Name] = lack
			continue
		}
		switch {
		case best == nil:
			best = c
		case rank(*best) < rank(*c):
			ch.Out[c.Name] = fmt.Sprintf("as advanced as %s, whose promotion rule is prefer", best.Name)
		default:
			ch.Out[c.Name] = fmt.Sprintf("as advanced as %s, which goes first by name", best.Name)
		}
	}
	if best == nil {
		ch.Why = "no candidate may be promoted: " + outText(ch.Out)
		return ch
	}
	ch.Pick, ch.Addr = best.Name, best.Addr
	ch.Why = fmt.Sprintf("%s is the most advanced replica (%s)", best.Name, orNone(formatList(best.Pos)))
	return ch
}

// rank orders candidates by promotion rule: prefer (0) before the rest.
func rank(c candidate) int {
	if c.Survey.Promotion == consensus.PromotePrefer {
		return 0
	}
	return 1
}

// ineligible says why c may not be promoted whatever the others hold.
func ineligible(c candidate, all []candidate, old tags.Position) string {
	switch {
	case c.Hint:
		return "not surveyed (" + c.Err.Error() + "): its last gossiped position counts"
	case c.Err != nil:
		return "no survey: " + c.Err.Error()
	case !c.Survey.Replica:
		return "not a replica"
	case c.SQLError != "":
		return "replication SQL thread stopped on an error: " + c.SQLError
	case !c.Survey.SQLRunning:
		return "replication SQL thread not running"
	case !c.Survey.Drained:
		return "has not applied what it received (relay log not drained)"
	case c.Survey.Promotion == consensus.PromoteNever:
		return "its promotion rule is never (consensus.promotion)"
	}
	errant, err := errantOf(c, all, old)
	switch {
	case err != nil:
		return "own GTIDs: " + err.Error()
	case len(errant) > 0:
		return fmt.Sprintf("errant transactions: %s was written on it and no other server has it", formatList(errant))
	}
	return ""
}

// errantOf returns c's errant transactions, the last of each domain: a
// GTID of its own server_id with a sequence number beyond what the old
// writer and every other surveyed replica have.
func errantOf(c candidate, all []candidate, old tags.Position) (gtidList, error) {
	own, err := parseGTIDList(c.Survey.Own)
	if err != nil {
		return nil, err
	}
	errant := gtidList{}
	for d, g := range own {
		if g.Server != c.Survey.ServerID {
			continue
		}
		top, _ := old.Seq(d)
		clash := false // another server logged this sequence number
		for _, o := range all {
			if o.Name != c.Name && (o.Err == nil || o.Hint) {
				top = max(top, o.Pos[d].Seq, o.Received[d].Seq)
				for _, x := range []gtid{o.Pos[d], o.Received[d]} {
					clash = clash || (x.Seq == g.Seq && x.Server != 0 && x.Server != g.Server)
				}
			}
		}
		if g.Seq > top || clash {
			errant[d] = g
		}
	}
	return errant, nil
}

// lacking says which transactions of the other surveyed replicas c does
// not hold, "" when none. Another's errant transactions do not count.
func lacking(c candidate, all []candidate, old tags.Position) string {
	var parts []string
	for _, o := range all {
		if o.Name == c.Name || (o.Err != nil && !o.Hint) {
			continue
		}
		errant, _ := errantOf(o, all, old)
		pos, recv := without(o.Pos, errant), without(o.Received, errant)
		if n := c.Pos.behind(pos); n > 0 && o.Hint {
			parts = append(parts, fmt.Sprintf("%d transactions %s had when it last gossiped", n, o.Name))
		} else if n > 0 {
			parts = append(parts, fmt.Sprintf("%d transactions %s applied", n, o.Name))
		} else if n := c.Pos.behind(recv); n > 0 {
			parts = append(parts, fmt.Sprintf("%d transactions %s received", n, o.Name))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return "lacks " + strings.Join(parts, ", ")
}

// without is l but the domains of errant.
func without(l, errant gtidList) gtidList {
	if len(errant) == 0 {
		return l
	}
	out := gtidList{}
	for d, g := range l {
		if _, ok := errant[d]; !ok {
			out[d] = g
		}
	}
	return out
}

// fromPosition is a gossiped position as a list (server ids unknown: 0).
func fromPosition(p tags.Position) gtidList {
	l := gtidList{}
	for _, d := range p.List() {
		l[d.ID] = gtid{Domain: d.ID, Seq: d.Seq}
	}
	return l
}

func formatList(l gtidList) string {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(l)) {
		g := l[d]
		parts = append(parts, fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq))
	}
	return strings.Join(parts, ",")
}

func outText(out map[string]string) string {
	if len(out) == 0 {
		return "no replica answered"
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(out)) {
		parts = append(parts, n+": "+out[n])
	}
	return strings.Join(parts, "; ")
}
