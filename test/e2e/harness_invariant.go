//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// The write invariant of issue 26, checked from the database side: a
// writer on every app host inserts through its own HAProxy read-write
// listener and records which server accepted each row (RETURNING
// @@server_id); a term timeline records from when each writer term was
// first seen on any voter; CheckInvariant compares the two.

// InvTable is the invariant writers' table, created on the primary (and
// replicated) before they start.
const InvTable = "e2e.inv"

// InvTableDDL creates InvTable.
const InvTableDDL = "CREATE TABLE IF NOT EXISTS " + InvTable + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, app VARCHAR(64) NOT NULL, sent DATETIME(6) NOT NULL)"

// InvWrite is one write of an invariant writer.
type InvWrite struct {
	App      string    // the app host that wrote
	Sent     time.Time // before the connection was dialed
	Acked    time.Time // when the server's answer arrived (or the error)
	ServerID int64     // @@server_id of the server that accepted the row; 0 on error
	Err      string
}

// OK reports whether the write was acked.
func (w InvWrite) OK() bool { return w.Err == "" }

// InvWriter writes one row every `every` through 127.0.0.1:port in an app
// host's namespace, a new connection per write, and keeps at most max
// writes in memory (the oldest are dropped, counted in Dropped).
type InvWriter struct {
	App    string
	db     *sql.DB
	every  time.Duration
	max    int
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	writes  []InvWrite
	dropped int
}

// StartInvWriter starts an invariant writer on h (named app) writing
// through port every `every`, keeping at most max writes.
func StartInvWriter(app string, h *Host, port int, every time.Duration, max int) (*InvWriter, error) {
	db, err := appDB(h, port)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &InvWriter{App: app, db: db, every: every, max: max, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w, nil
}

func (w *InvWriter) run(ctx context.Context) {
	defer close(w.done)
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	q := "INSERT INTO " + InvTable + " (app, sent) VALUES (?, ?) RETURNING @@server_id"
	for {
		op := InvWrite{App: w.App, Sent: time.Now()}
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := w.db.QueryRowContext(qctx, q, w.App, op.Sent.UTC()).Scan(&op.ServerID)
		cancel()
		op.Acked = time.Now()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			op.Err, op.ServerID = err.Error(), 0
		}
		w.mu.Lock()
		if len(w.writes) >= w.max {
			n := len(w.writes) / 10
			w.writes = append(w.writes[:0], w.writes[n:]...)
			w.dropped += n
		}
		w.writes = append(w.writes, op)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop ends the writer and closes its pool. Idempotent.
func (w *InvWriter) Stop() {
	w.cancel()
	<-w.done
	w.db.Close()
}

// Writes returns the writes sent in [from, to] (zero to: no upper bound).
func (w *InvWriter) Writes(from, to time.Time) []InvWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []InvWrite
	for _, op := range w.writes {
		if !op.Sent.Before(from) && (to.IsZero() || !op.Sent.After(to)) {
			out = append(out, op)
		}
	}
	return out
}

// Dropped is the number of writes dropped to keep the memory bounded.
func (w *InvWriter) Dropped() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// TermEpoch is one writer term of a cluster as the timeline saw it: the
// term number, its writer and that writer's server_id, from when it was
// first seen on any voter.
type TermEpoch struct {
	Number   uint64
	Writer   string
	ServerID int64 // 0: the writer is no known db host
	Seen     time.Time
	By       string // the voter it was first seen on
}

// String is "term 2 db2 (server 5) from 07:01:02.345".
func (e TermEpoch) String() string {
	return fmt.Sprintf("term %d %s (server %d) from %s", e.Number, e.Writer, e.ServerID, e.Seen.Format("15:04:05.000"))
}

// TermTimeline polls the voters' terms of one cluster every `every`, each
// voter in its own goroutine (a stopped voter does not hold up the
// others), and records the first sight of each term number.
type TermTimeline struct {
	cluster string
	ids     map[string]int64 // writer name → server_id
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	epochs []TermEpoch // by number
	polls  int
	errs   map[string]int // voter → failed polls
}

// StartTermTimeline starts polling voters (c.Consensus) for cluster's term;
// ids maps each db host's name to its server_id.
func StartTermTimeline(c *Cluster, voters []*Agent, cluster string, ids map[string]int64, every time.Duration) *TermTimeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &TermTimeline{cluster: cluster, ids: ids, cancel: cancel, errs: map[string]int{}}
	for _, a := range voters {
		tl.wg.Add(1)
		go func() {
			defer tl.wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				ci, err := c.Consensus(a)
				tl.observe(a.Name, ci, err, time.Now())
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	return tl
}

func (tl *TermTimeline) observe(voter string, ci *ConsensusInfo, err error, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.polls++
	if err != nil {
		tl.errs[voter]++
		return
	}
	tm := ci.Term(tl.cluster)
	if tm.Term == 0 {
		return
	}
	for _, e := range tl.epochs {
		if e.Number == tm.Term {
			return
		}
	}
	tl.epochs = append(tl.epochs, TermEpoch{Number: tm.Term, Writer: tm.Writer, ServerID: tl.ids[tm.Writer], Seen: at, By: voter})
	sort.Slice(tl.epochs, func(i, j int) bool { return tl.epochs[i].Number < tl.epochs[j].Number })
}

// Stop ends the polling.
func (tl *TermTimeline) Stop() {
	tl.cancel()
	tl.wg.Wait()
}

// Epochs returns the terms seen so far, by number.
func (tl *TermTimeline) Epochs() []TermEpoch {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]TermEpoch(nil), tl.epochs...)
}

// Current is the highest term seen (Number 0: none).
func (tl *TermTimeline) Current() TermEpoch {
	e := tl.Epochs()
	if len(e) == 0 {
		return TermEpoch{}
	}
	return e[len(e)-1]
}

// PollErrors returns the failed polls by voter.
func (tl *TermTimeline) PollErrors() map[string]int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string]int{}
	for k, v := range tl.errs {
		out[k] = v
	}
	return out
}

// InvSpan is the span of one server's acked writes under one term.
type InvSpan struct {
	ServerID    int64
	Term        uint64
	First, Last time.Time
	N           int
}

// InvViolation is one breach of the invariant.
type InvViolation struct {
	Write InvWrite // the write concerned (zero for an overlap)
	What  string
}

// InvReport is CheckInvariant's verdict and counts.
type InvReport struct {
	Acked, Errors int
	PerServer     map[int64]int  // acked writes by server_id
	PerTerm       map[uint64]int // acked writes by the term current at the ack
	Spans         []InvSpan
	// Gap is the longest time without an acked write, by app (from the
	// window's start to the first ack, between acks, from the last ack to
	// the window's end).
	Gap        map[string]time.Duration
	Violations []InvViolation
}

// OK reports whether the invariant held.
func (r InvReport) OK() bool { return len(r.Violations) == 0 }

// Summary is a one-line account: counts per server and term, errors, gaps.
func (r InvReport) Summary() string {
	var srv, trm, gap []string
	for id, n := range r.PerServer {
		srv = append(srv, fmt.Sprintf("server %d: %d", id, n))
	}
	for t, n := range r.PerTerm {
		trm = append(trm, fmt.Sprintf("term %d: %d", t, n))
	}
	for a, g := range r.Gap {
		gap = append(gap, fmt.Sprintf("%s %.2fs", a, g.Seconds()))
	}
	sort.Strings(srv)
	sort.Strings(trm)
	sort.Strings(gap)
	return fmt.Sprintf("%d acked (%s; %s), %d errors, longest write gap %s, %d violations",
		r.Acked, strings.Join(srv, ", "), strings.Join(trm, ", "), r.Errors, strings.Join(gap, ", "), len(r.Violations))
}

// InvOptions tunes CheckInvariant.
type InvOptions struct {
	// Grace is the slack around a term change: a write acked by the new
	// holder at most Grace before its term was first seen, or by the old
	// holder at most Grace after, is fine (the timeline polls; use the
	// poll interval).
	Grace time.Duration
	// Overlap is how far two servers' spans may overlap (the poll
	// interval).
	Overlap time.Duration
	// From and To bound the window for the gaps (zero: the writes' own).
	From, To time.Time
}

// CheckInvariant checks writes against the term timeline epochs:
//   - every acked write was accepted by the server whose term was current
//     when the write was acked (within opts.Grace of a term change, the
//     neighbouring term's server is accepted too);
//   - for each server, the span from its first to its last acked write per
//     term; of two servers' spans, the later one starts at most
//     opts.Overlap before the earlier one's last write.
//
// It also counts writes per server and term, errors, and the longest
// write gap per app.
func CheckInvariant(writes []InvWrite, epochs []TermEpoch, opts InvOptions) InvReport {
	r := InvReport{PerServer: map[int64]int{}, PerTerm: map[uint64]int{}, Gap: map[string]time.Duration{}}
	ws := append([]InvWrite(nil), writes...)
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Acked.Before(ws[j].Acked) })
	spans := map[[2]int64]*InvSpan{}
	lastAck := map[string]time.Time{}
	for _, w := range ws {
		if _, ok := lastAck[w.App]; !ok {
			lastAck[w.App] = opts.From
		}
		if !w.OK() {
			r.Errors++
			continue
		}
		r.Acked++
		r.PerServer[w.ServerID]++
		if prev := lastAck[w.App]; !prev.IsZero() {
			r.Gap[w.App] = max(r.Gap[w.App], w.Acked.Sub(prev))
		} else {
			r.Gap[w.App] = max(r.Gap[w.App], 0)
		}
		lastAck[w.App] = w.Acked
		i := epochAt(epochs, w.Acked)
		if i < 0 {
			if len(epochs) > 0 && epochs[0].ServerID == w.ServerID && epochs[0].Seen.Sub(w.Acked) <= opts.Grace {
				i = 0
			} else {
				r.Violations = append(r.Violations, InvViolation{Write: w, What: fmt.Sprintf(
					"%s's write sent %s, acked %s by server %d before any term was seen", w.App, ts(w.Sent), ts(w.Acked), w.ServerID)})
				continue
			}
		}
		e := epochs[i]
		term := e.Number
		if w.ServerID != e.ServerID {
			switch {
			case i+1 < len(epochs) && epochs[i+1].ServerID == w.ServerID && epochs[i+1].Seen.Sub(w.Acked) <= opts.Grace:
				term = epochs[i+1].Number // the new holder, just before its term was seen
			case i > 0 && epochs[i-1].ServerID == w.ServerID && w.Acked.Sub(e.Seen) <= opts.Grace:
				term = epochs[i-1].Number // the old holder, just after the new term was seen
			default:
				r.Violations = append(r.Violations, InvViolation{Write: w, What: fmt.Sprintf(
					"%s's write sent %s, acked %s by server %d, but the current term was %s", w.App, ts(w.Sent), ts(w.Acked), w.ServerID, e)})
				// Counted in the spans under the current term all the
				// same: the overlap rule judges the servers' windows
				// whatever the terms say.
			}
		}
		r.PerTerm[term]++
		k := [2]int64{w.ServerID, int64(term)}
		s := spans[k]
		if s == nil {
			s = &InvSpan{ServerID: w.ServerID, Term: term, First: w.Acked}
			spans[k] = s
		}
		s.Last, s.N = w.Acked, s.N+1
	}
	if !opts.To.IsZero() {
		for app, prev := range lastAck {
			if !prev.IsZero() {
				r.Gap[app] = max(r.Gap[app], opts.To.Sub(prev))
			} else if !opts.From.IsZero() {
				r.Gap[app] = opts.To.Sub(opts.From)
			}
		}
	}
	for _, s := range spans {
		r.Spans = append(r.Spans, *s)
	}
	sort.Slice(r.Spans, func(i, j int) bool { return r.Spans[i].First.Before(r.Spans[j].First) })
	for i, a := range r.Spans {
		for _, b := range r.Spans[i+1:] {
			if a.ServerID == b.ServerID {
				continue
			}
			// a starts first: b may start at most opts.Overlap before a's
			// last write.
			if d := a.Last.Sub(b.First); d > opts.Overlap {
				r.Violations = append(r.Violations, InvViolation{What: fmt.Sprintf(
					"servers %d and %d both accepted writes: server %d term %d %s–%s (%d writes), server %d term %d %s–%s (%d writes); server %d's first write %.3fs before server %d's last (both at once for %.3fs)",
					a.ServerID, b.ServerID, a.ServerID, a.Term, ts(a.First), ts(a.Last), a.N, b.ServerID, b.Term, ts(b.First), ts(b.Last), b.N,
					b.ServerID, d.Seconds(), a.ServerID, earlier(a.Last, b.Last).Sub(b.First).Seconds())})
			}
		}
	}
	return r
}

// epochAt is the index of the epoch current at t (the last seen at or
// before t), -1 for none.
func epochAt(epochs []TermEpoch, t time.Time) int {
	at := -1
	for i, e := range epochs {
		if !e.Seen.After(t) {
			at = i
		}
	}
	return at
}

func ts(t time.Time) string { return t.Format("15:04:05.000") }

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
