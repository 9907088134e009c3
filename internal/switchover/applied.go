package switchover

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// What a router has applied (for `shoal switchover`): a
// switchover, once it has granted the new term, waits until every router
// (every agent that drives a sink) says its sinks apply a pool whose
// writer is the new holder. A sink reports only the generation of the
// last pool it fully applied (package sink, "Applied generation"), so
// the router remembers, per cluster, the generation at which each
// (term, writer, address) first appeared in the pools it handed out, and
// reads there the term and writer of the oldest generation any of its
// sinks has applied. It answers the serf query consensus.AppliedQuery
// with that; waitApplied asks every agent and collects the answers.

// Limits of the applied record and of a wait.
const (
	// appliedEntries bounds what is kept per cluster: the newest changes
	// of (term, writer, address). A sink more than this many changes
	// behind cannot be told apart from one that never applied.
	appliedEntries = 64
	// appliedClusters bounds the clusters recorded: a pool never holds
	// this many in a sane fleet, and a member inventing cluster names
	// must not grow the record without end.
	appliedClusters = 1024
	// appliedEvery is how often waitApplied asks again.
	appliedEvery = 250 * time.Millisecond
	// appliedQueryTimeout is each query's serf timeout: answers later
	// than that are lost, and a later query asks again.
	appliedQueryTimeout = time.Second
)

// appliedTerm is the writer term and writer of one cluster in a pool,
// and the generation at which that pair first appeared.
type appliedTerm struct {
	Gen    uint64
	Term   uint64 // 0: none (none known, or the cluster requires none)
	Writer string // "": the pool routes writes to no one
	Addr   string
}

// same reports whether t and o route writes alike.
func (t appliedTerm) same(o appliedTerm) bool {
	return t.Term == o.Term && t.Writer == o.Writer && t.Addr == o.Addr
}

// appliedHistory is one cluster's changes, oldest first.
type appliedHistory struct {
	entries []appliedTerm
	// trimmed: older entries were dropped, so a generation before the
	// first one kept is unknown rather than "not in the pool".
	trimmed bool
}

// Record is the router's record of the writer terms of the pools it
// handed its sinks. Every sink gets every pool (startSinks), so one record
// serves them all.
type Record struct {
	// mu guards: last, clusters
	mu       sync.Mutex
	last     uint64 // newest generation recorded
	clusters map[string]*appliedHistory
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{clusters: map[string]*appliedHistory{}}
}

// routedTerm is the term and writer a pool gives cluster c.
func routedTerm(c *pool.Cluster, gen uint64) appliedTerm {
	t := appliedTerm{Gen: gen}
	if c.Term != nil {
		t.Term = c.Term.Number
	}
	if len(c.Writers) > 0 {
		t.Writer, t.Addr = c.Writers[0].Name, c.Writers[0].Addr
	}
	return t
}

// record notes the pool of generation gen. Generations already recorded
// (every sink hands the same update over) are ignored. A cluster missing
// from p is forgotten: a switchover asks about a cluster in the pool.
func (l *Record) Add(gen uint64, p *pool.Pool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen <= l.last {
		return
	}
	l.last = gen
	if p == nil {
		p = &pool.Pool{}
	}
	present := make(map[string]bool, len(p.Clusters))
	for _, c := range p.Clusters {
		present[c.Name] = true
	}
	maps.DeleteFunc(l.clusters, func(name string, _ *appliedHistory) bool { return !present[name] })
	for i := range p.Clusters {
		c := &p.Clusters[i]
		h := l.clusters[c.Name]
		if h == nil {
			if len(l.clusters) >= appliedClusters {
				continue
			}
			h = &appliedHistory{}
			l.clusters[c.Name] = h
		}
		t := routedTerm(c, gen)
		if n := len(h.entries); n > 0 && h.entries[n-1].same(t) {
			continue
		}
		h.entries = append(h.entries, t)
		if len(h.entries) > appliedEntries {
			h.entries = slices.Delete(h.entries, 0, len(h.entries)-appliedEntries)
			h.trimmed = true
		}
	}
}

// at returns cluster's term and writer in the pool of generation gen: the
// newest entry at or before it. A cluster not in that pool (or gen 0)
// has the zero term; ok is false when gen is older than the entries
// kept.
func (l *Record) at(cluster string, gen uint64) (t appliedTerm, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.clusters[cluster]
	if h == nil {
		return appliedTerm{}, true
	}
	i := len(h.entries) - 1
	for i >= 0 && h.entries[i].Gen > gen {
		i--
	}
	if i < 0 {
		return appliedTerm{}, !h.trimmed
	}
	return h.entries[i], true
}

// names returns the clusters recorded.
func (l *Record) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.clusters))
}

// minApplied is the oldest generation any sink has fully applied.
func minApplied(sinks []view.SinkStatus) uint64 {
	var least uint64
	for i, s := range sinks {
		if i == 0 || s.AppliedGeneration < least {
			least = s.AppliedGeneration
		}
	}
	return least
}

// sinksWhy says why sinks have not applied the router's newest pool,
// current: each sink that is frozen, failing, has applied nothing yet or
// is still applying. "" when every sink has applied it.
func sinksWhy(sinks []view.SinkStatus, current uint64) string {
	var parts []string
	for _, s := range sinks {
		var why string
		switch {
		case s.Frozen:
			why = "frozen (isolated)"
		case s.State == view.SinkFailing:
			why = "failing: " + s.LastError
		case s.AppliedGeneration == 0:
			why = "nothing applied yet"
		case s.AppliedGeneration < current:
			why = fmt.Sprintf("applying (generation %d of %d)", s.AppliedGeneration, current)
		default:
			continue
		}
		parts = append(parts, s.Name+": "+why)
	}
	return strings.Join(parts, "; ")
}

// appliedAnswer is this router's answer for cluster: the term and writer
// at the oldest generation its sinks have applied (the pool every sink
// has gone past), and why the sinks are behind current, the router's
// newest generation. With no sinks it says so and nothing else.
func appliedAnswer(node, cluster string, l *Record, sinks []view.SinkStatus, current uint64) consensus.AppliedAnswer {
	ans := consensus.AppliedAnswer{Node: node, Cluster: cluster, Sinks: len(sinks)}
	if len(sinks) == 0 || l == nil {
		ans.Sinks = 0
		return ans
	}
	least := minApplied(sinks)
	t, ok := l.at(cluster, least)
	ans.Term, ans.Writer, ans.Addr = t.Term, t.Writer, t.Addr
	why := sinksWhy(sinks, current)
	if !ok {
		why = strings.TrimPrefix(why+fmt.Sprintf("; generation %d is older than this router's record", least), "; ")
	}
	ans.Why = why
	return ans
}

// AppliedTerms is the term number the sinks of this router have applied,
// by cluster, for shoal_router_applied_term; nil without sinks.
func AppliedTerms(l *Record, sinks []view.SinkStatus) map[string]uint64 {
	if len(sinks) == 0 || l == nil {
		return nil
	}
	least := minApplied(sinks)
	out := map[string]uint64{}
	for _, c := range l.names() {
		if t, ok := l.at(c, least); ok {
			out[c] = t.Term
		}
	}
	return out
}

// RecordedSink is a sink as startSinks runs it: each update's writer
// terms go into the router's applied record before the sink gets the
// update, so that a sink never reports a generation the record lacks.
// It is how the record is reached (appliedRecord): the agent keeps it
// with its sinks.
type RecordedSink struct {
	sink.Sink
	Log *Record
}

// Update records u, then hands it to the sink.
func (s RecordedSink) Update(u sink.Update) {
	s.Log.Add(u.Generation, u.Pool)
	s.Sink.Update(u)
}

// AppliedSource is what an agent's sinks applied: the record they share
// (nil without sinks), their statuses and the router's newest generation
// (0 before the first pool, or without a router).
type AppliedSource interface {
	Record() *Record
	Sinks() []view.SinkStatus
	Generation() uint64
}

// AnswerApplied answers a consensus.AppliedQuery: every agent answers,
// one without sinks with sinks 0, so that the asker knows not to wait for
// it. It reports false for a query that does not decode.
func (s *Switcher) AnswerApplied(q *serf.Query) bool {
	cluster, err := consensus.DecodeAppliedQuery(q.Payload)
	if err != nil {
		s.cfg.Log.Debug("applied query refused", "error", err)
		return false
	}
	src := s.cfg.Applied
	// The sinks' statuses before the generation: no sink is ahead of it.
	sinks := src.Sinks()
	ans := appliedAnswer(s.cfg.Node, cluster, src.Record(), sinks, src.Generation())
	b, err := consensus.EncodeAppliedAnswer(ans)
	if err != nil {
		s.cfg.Log.Warn("applied query not answered", "cluster", cluster, "error", err)
		return true
	}
	if err := q.Respond(b); err != nil {
		s.cfg.Log.Debug("applied query answer not sent", "cluster", cluster, "error", err)
	}
	return true
}

// AppliedReport is what waitApplied saw.
type AppliedReport struct {
	// Applied lists the routers that applied term >= want with writer ==
	// wantWriter, sorted.
	Applied []string
	// Pending is each other reachable router and why not: "no answer",
	// or "applied term 7 (writer dbp)" and its answer's why.
	Pending map[string]string
	// Unreachable is each expected router whose member is failed, leaving
	// or left, with that status.
	Unreachable map[string]string
	Took        time.Duration
}

// Done reports whether no reachable router is left to wait for.
func (r AppliedReport) Done() bool { return len(r.Pending) == 0 }

// appliedWait is one wait's state: the latest valid answer of each
// member, kept across the queries of the wait.
type appliedWait struct {
	cluster    string
	want       uint64
	wantWriter string
	answers    map[string]consensus.AppliedAnswer
}

func newAppliedWait(cluster string, want uint64, wantWriter string) *appliedWait {
	return &appliedWait{cluster: cluster, want: want, wantWriter: wantWriter, answers: map[string]consensus.AppliedAnswer{}}
}

// observe keeps r's answer when it decodes, is about this wait's cluster,
// names its sender, and the sender is a member (isMember): answers are
// bounded by the member count. It reports whether it kept it.
func (w *appliedWait) observe(r serf.NodeResponse, isMember func(string) bool) bool {
	ans, err := consensus.DecodeAppliedAnswer(r.Payload)
	if err != nil || ans.Node != r.From || ans.Cluster != w.cluster || !isMember(r.From) {
		return false
	}
	w.answers[r.From] = ans
	return true
}

// expectedRouter reports whether a member is a router the wait expects:
// a shoal agent (role app or db) that answered with sinks, or an app
// agent that has not answered it has none. A member without shoal's role
// tag (a stock serf agent) never is.
func expectedRouter(m serf.Member, ans consensus.AppliedAnswer, answered bool) bool {
	switch m.Tags[tags.KeyRole] {
	case tags.RoleApp:
		return !answered || ans.Sinks > 0
	case tags.RoleDB:
		return answered && ans.Sinks > 0
	}
	return false
}

// report is the wait as of members, the current member list.
func (w *appliedWait) report(members []serf.Member, took time.Duration) AppliedReport {
	r := AppliedReport{Pending: map[string]string{}, Unreachable: map[string]string{}, Took: took}
	for _, m := range members {
		ans, answered := w.answers[m.Name]
		if !expectedRouter(m, ans, answered) {
			continue
		}
		name := member.Safe(m.Name)
		switch {
		case m.Status != serf.StatusAlive:
			r.Unreachable[name] = m.Status.String()
		case !answered:
			r.Pending[name] = "no answer"
		case ans.Term >= w.want && ans.Writer == w.wantWriter:
			r.Applied = append(r.Applied, name)
		default:
			why := fmt.Sprintf("applied term %d (writer %s)", ans.Term, cmp.Or(ans.Writer, "none"))
			if ans.Why != "" {
				why += ": " + ans.Why
			}
			r.Pending[name] = why
		}
	}
	slices.Sort(r.Applied)
	return r
}

// WaitApplied asks every agent which term of cluster its sinks have
// applied (consensus.AppliedQuery, every appliedEvery) until every
// expected router says term want or later with writer wantWriter, or
// timeout passes, or ctx ends, and reports what it saw. It must not run
// on the term loop, which answers the query, this agent's own included.
func (s *Switcher) WaitApplied(ctx context.Context, cluster string, want uint64, wantWriter string, timeout time.Duration) AppliedReport {
	start := s.cfg.Clock.Now()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	w := newAppliedWait(cluster, want, wantWriter)
	members, isMember := s.appliedMembers()
	// Each query in flight forwards at most one answer per member; at
	// most timeout/interval queries are in flight.
	answers := make(chan serf.NodeResponse, len(members)+1)
	ask := func() {
		resp, err := s.cfg.Gossip.Query(consensus.AppliedQuery, consensus.EncodeAppliedQuery(cluster), &serf.QueryParam{Timeout: appliedQueryTimeout})
		if err != nil {
			s.cfg.Log.Debug("applied query not sent", "cluster", cluster, "error", err)
			return
		}
		limit := len(members) + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			forwardAnswers(ctx, resp, answers, limit)
		}()
	}
	timer := s.cfg.Clock.NewTimer(timeout)
	defer timer.Stop()
	tick := s.cfg.Clock.NewTicker(appliedEvery)
	defer tick.Stop()
	ask()
	for {
		select {
		case <-ctx.Done():
			return w.report(s.cfg.Gossip.Members(), s.cfg.Clock.Since(start))
		case <-timer.Chan():
			return w.report(s.cfg.Gossip.Members(), s.cfg.Clock.Since(start))
		case r := <-answers:
			if !w.observe(r, isMember) {
				continue
			}
		case <-tick.Chan():
			members, isMember = s.appliedMembers()
			ask()
		}
		if rep := w.report(members, s.cfg.Clock.Since(start)); rep.Done() {
			return rep
		}
	}
}

// appliedMembers is the member list and a lookup of its names.
func (s *Switcher) appliedMembers() ([]serf.Member, func(string) bool) {
	ms := s.cfg.Gossip.Members()
	names := make(map[string]bool, len(ms))
	for _, m := range ms {
		names[m.Name] = true
	}
	return ms, func(n string) bool { return names[n] }
}

// forwardAnswers hands the answers of one query to out, at most limit,
// until the query times out or ctx ends, then closes the query.
func forwardAnswers(ctx context.Context, resp *serf.QueryResponse, out chan<- serf.NodeResponse, limit int) {
	n := 0
	gossip.EachAnswer(ctx, resp, func(r serf.NodeResponse) bool {
		select {
		case out <- r:
		case <-ctx.Done():
			return false
		}
		n++
		return n < limit
	})
}
