package soakcheck

import (
	"slices"
	"sort"
	"time"
)

// Ack is one acknowledged client write of the freshness table: its
// sequence number (per writer, rising with each attempt) and the moment
// the client had the server's OK.
type Ack struct {
	Seq int64
	At  time.Time
}

// Read is one client read through an app host's HAProxy read port: the
// newest sequence number of its own writer it saw, and the server that
// answered (its node name), or the error.
type Read struct {
	Client string // the app host, whose writer's rows the read looks for
	Start  time.Time
	End    time.Time
	Node   string // answered by; "" when it failed
	MaxSeq int64  // the newest of the client's writes visible (0: none)
	Err    string

	// Stale is the read's staleness (see Staleness), set by CheckReads.
	Stale time.Duration
}

// Staleness of a read that started at start and saw every write up to
// maxSeq (a replica applies a writer's transactions in order): start minus
// the acknowledgement time of the oldest write acknowledged before start
// that the read did not see, or 0 when it saw every one of them. The
// acknowledgement, not the write's start, is the moment the write surely
// existed on the primary, so this is a lower bound of how old the data
// served was, whatever the write took. acks are sorted by Seq, which for
// one sequential writer is also the order of their times.
func Staleness(acks []Ack, start time.Time, maxSeq int64) time.Duration {
	i := sort.Search(len(acks), func(i int) bool { return acks[i].Seq > maxSeq })
	if i == len(acks) || !acks[i].At.Before(start) {
		return 0
	}
	return start.Sub(acks[i].At)
}

// ReadStats is what the clients' reads show.
type ReadStats struct {
	Total, OK, Failed int
	// Bound is the staleness over which a read is stale: the agents'
	// max_lag plus a second (probe and gossip delays).
	Bound time.Duration
	// Stale are the successful reads staler than Bound, in time order,
	// but for those in CutOff.
	Stale []Read
	// CutOff are the reads staler than Bound made while the reading app
	// host was cut off from the primary (a CutOff window): with no writer
	// to measure against or to fall back on, the reader floor keeps the
	// replicas of its side serving (docs/pool.md, Read fallback), and a
	// write the primary acknowledged as the cut began, which never
	// reached them, ages on them until the heal.
	CutOff []Read
	// Percentiles of the staleness of the successful reads.
	P50, P99, Max time.Duration
	// Late are successful reads whose staleness was over 0 (they missed at
	// least one acknowledged write), stale or not.
	Late int
}

// CutOff is a span in which the app host Client could not reach the
// primary, nor know its position: a partition that left it on the other
// side, or the primary's host cut off, until its agent hears from the
// primary again after the heal.
type CutOff struct {
	Client string
	Window
}

// CheckReads computes every successful read's staleness against the
// acknowledged writes of its client's writer (acks by client, each sorted
// by Seq) and counts the reads staler than bound, apart those that started
// in one of their client's cut-off windows. Failed reads are counted
// apart: they served no data.
func CheckReads(reads []Read, acks map[string][]Ack, bound time.Duration, cut []CutOff) ReadStats {
	st := ReadStats{Bound: bound}
	var all []time.Duration
	for _, r := range reads {
		st.Total++
		if r.Err != "" {
			st.Failed++
			continue
		}
		st.OK++
		r.Stale = Staleness(acks[r.Client], r.Start, r.MaxSeq)
		all = append(all, r.Stale)
		if r.Stale > 0 {
			st.Late++
		}
		if r.Stale > bound {
			if slices.ContainsFunc(cut, func(c CutOff) bool { return c.Client == r.Client && c.Contains(r.Start) }) {
				st.CutOff = append(st.CutOff, r)
				continue
			}
			st.Stale = append(st.Stale, r)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	st.P50, st.P99, st.Max = quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1)
	sort.SliceStable(st.Stale, func(i, j int) bool { return st.Stale[i].Start.Before(st.Stale[j].Start) })
	return st
}

// StaleEpisode is a run of stale reads served by one node, none more than
// a few seconds after the previous one.
type StaleEpisode struct {
	Node     string
	From, To time.Time // the first and the last stale read's start
	Reads    int
	Max      time.Duration
	Clients  []string
}

// Episodes groups the stale reads by node into runs with gaps of at most
// gap between them.
func (st ReadStats) Episodes(gap time.Duration) []StaleEpisode {
	var out []StaleEpisode
	open := map[string]int{} // node → index in out of its last episode
	for _, r := range st.Stale {
		i, ok := open[r.Node]
		if !ok || r.Start.Sub(out[i].To) > gap {
			out = append(out, StaleEpisode{Node: r.Node, From: r.Start})
			i = len(out) - 1
			open[r.Node] = i
		}
		e := &out[i]
		e.To, e.Reads, e.Max = r.Start, e.Reads+1, max(e.Max, r.Stale)
		if !slices.Contains(e.Clients, r.Client) {
			e.Clients = append(e.Clients, r.Client)
		}
	}
	return out
}
