package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// termParts holds the writer terms this agent knows, the highest of each
// cluster, and how it learns them (docs/consensus.md, "Publishing"): the
// raft leader broadcasts each signed term as a user event; an agent whose
// pool says a newer term may exist (pool.Cluster.AskTerm) asks the voters
// with a query, and every voter answers from its own copy. Every term is
// verified before it counts: holding the gossip key is not enough to
// forge one.
type termParts struct {
	// verify lists the term-signing public keys (the consensus keyring's
	// and consensus.term_key); none: this agent cannot verify terms, and
	// unverifiable says why.
	verify       []ed25519.PublicKey
	unverifiable string
	// signer signs query answers; nil unless this agent is a voter.
	signer *consensus.Keyring

	// in queues what serf's event loop hands over (events and queries),
	// bounded: what does not fit is dropped and counted.
	in chan serf.Event

	mu    sync.Mutex // guards: known
	known map[string]pool.Term

	// asked is when each cluster's term was last asked for (loop only).
	// A cluster never asked for is asked once after the start, even with
	// a term known (it may be a saved one that moved).
	asked map[string]time.Time

	// signed is the terms file's content (termsfile.go).
	// fileMu guards: signed
	fileMu sync.Mutex
	signed map[string][]byte

	stats termStats
}

// termStats counts what the term loop saw, for /metrics.
type termStats struct {
	Learned, Stale, BadSignature, Malformed, Dropped, Asked, Answered, Panics, ForeignGroup atomic.Uint64
}

// termSafely runs f, turning a panic into a logged and counted failure:
// a bad term message never stops the loop.
func (a *Agent) termSafely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			a.cons.terms.stats.Panics.Add(1)
			a.log.Error("writer terms: recovered from a panic", "in", what, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}

// Term loop limits.
const (
	termQueue = 64
	// askEvery is the least time between two queries for one cluster.
	askEvery = 2 * time.Second
	// askTick is how often the loop looks for clusters to ask about.
	askTick = 500 * time.Millisecond
)

func newTermParts() termParts {
	return termParts{in: make(chan serf.Event, termQueue), known: map[string]pool.Term{}, asked: map[string]time.Time{},
		unverifiable: "this agent has neither the consensus key nor consensus.term_key: it cannot verify writer terms"}
}

// setTermKeys sets what terms are verified with: the consensus keyring's
// keys (kr may be nil) and consensus.term_key. signer is kr when this
// agent is a voter.
func (a *Agent) setTermKeys(kr *consensus.Keyring, voter bool) error {
	extra, err := a.cfg.Consensus.TermPublicKeys()
	if err != nil {
		return err
	}
	if kr != nil {
		a.cons.terms.verify = kr.TermPublicKeys()
		if voter {
			a.cons.terms.signer = kr
		}
	}
	a.cons.terms.verify = append(a.cons.terms.verify, extra...)
	if len(a.cons.terms.verify) > 0 {
		a.cons.terms.unverifiable = ""
	}
	return nil
}

// isTermEvent reports whether e is a term event or query, which the term
// loop handles and event hooks never see.
func isTermEvent(e serf.Event) bool {
	switch e := e.(type) {
	case serf.UserEvent:
		return consensus.IsInternalEvent(e.Name)
	case *serf.Query:
		return consensus.IsInternalEvent(e.Name)
	}
	return false
}

// offerTermEvent queues a term event or query for the loop without
// blocking serf's event loop.
func (a *Agent) offerTermEvent(e serf.Event) {
	select {
	case a.cons.terms.in <- e:
	default:
		a.cons.terms.stats.Dropped.Add(1)
	}
}

// termView is what the router computes with: the known terms, merged
// with this voter's own (its FSM holds what the quorum committed).
func (a *Agent) termView() pool.TermView {
	groups := a.raftGroups()
	a.cons.terms.mu.Lock()
	for c, t := range a.cons.terms.known {
		if !groups.follows(t) {
			delete(a.cons.terms.known, c) // learned before this agent knew its group
		}
	}
	known := maps.Clone(a.cons.terms.known)
	a.cons.terms.mu.Unlock()
	if a.cons.node != nil {
		for c, t := range a.cons.node.FSM().Terms() {
			if t.Number > known[c].Number {
				known[c] = t
			}
		}
	}
	return pool.TermView{Terms: known, Unverifiable: a.cons.terms.unverifiable, Conflict: groups.Conflict()}
}

// learnTerm keeps t when it is newer than what this agent knows, and
// reports whether it was.
func (a *Agent) learnTerm(t pool.Term, from string) bool {
	if groups := a.raftGroups(); !groups.follows(t) {
		a.cons.terms.stats.ForeignGroup.Add(1)
		a.log.Debug("writer term of another raft group ignored", "cluster", t.Cluster, "term", t.Number, "group", t.Group, "own_group", groups.Own, "from", from)
		return false
	}
	a.cons.terms.mu.Lock()
	cur := a.cons.terms.known[t.Cluster]
	// While this agent knows no group, a term of another group than the
	// one it knows for the cluster does not replace it, whatever its number.
	newer := t.Number > cur.Number && (cur.Number == 0 || cur.Group == t.Group)
	if newer {
		a.cons.terms.known[t.Cluster] = t
	}
	a.cons.terms.mu.Unlock()
	if !newer {
		a.cons.terms.stats.Stale.Add(1)
		return false
	}
	a.cons.terms.stats.Learned.Add(1)
	a.log.Info("writer term learned", "cluster", t.Cluster, "term", t.Number, "writer", t.Writer, "addr", t.Addr, "from", from)
	if a.pool.router != nil {
		a.pool.router.Trigger()
	}
	return true
}

// acceptSignedTerm verifies a signed term and learns it.
func (a *Agent) acceptSignedTerm(b []byte, from string) {
	t, err := consensus.DecodeSignedTerm(b, a.cons.terms.verify)
	switch {
	case errors.Is(err, consensus.ErrTermSignature):
		a.cons.terms.stats.BadSignature.Add(1)
		a.log.Debug("writer term refused", "from", from, "error", err)
	case err != nil:
		a.cons.terms.stats.Malformed.Add(1)
		a.log.Debug("writer term refused", "from", from, "error", err)
	default:
		if a.learnTerm(t, from) {
			a.saveSignedTerm(t.Cluster, b, true)
		}
	}
}

// runTerms handles term events and queries, and asks for the terms the
// pool may lack, until ctx ends.
func (a *Agent) runTerms(ctx context.Context) {
	t := a.clock.NewTicker(askTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-a.cons.terms.in:
			a.termSafely("term event", func() { a.handleTermEvent(ctx, e) })
		case <-t.Chan():
			a.termSafely("term query", func() { a.askTerms(ctx) })
		}
	}
}

// handleTermEvent verifies a broadcast term, or answers one of shoal's
// own queries.
func (a *Agent) handleTermEvent(ctx context.Context, e serf.Event) {
	switch e := e.(type) {
	case serf.UserEvent:
		if e.Name == consensus.TermEvent {
			a.acceptSignedTerm(e.Payload, "event")
		}
	case *serf.Query:
		switch e.Name {
		case consensus.TermQuery:
			a.answerTermQuery(e)
		case consensus.SwitchQuery:
			a.cons.sw.Answer(ctx, e)
		case consensus.AppliedQuery:
			if !a.cons.sw.AnswerApplied(e) {
				a.cons.terms.stats.Malformed.Add(1)
			}
		}
	}
}

// answerTermQuery answers a query for a cluster's term when this agent is
// a voter that holds one.
func (a *Agent) answerTermQuery(e *serf.Query) {
	if a.cons.terms.signer == nil || a.cons.node == nil {
		return
	}
	cluster, err := consensus.DecodeTermQuery(e.Payload)
	if err != nil {
		a.cons.terms.stats.Malformed.Add(1)
		return
	}
	t := a.cons.node.FSM().Term(cluster)
	if t.Number == 0 {
		return
	}
	b, err := consensus.EncodeSignedTerm(a.cons.terms.signer, t)
	if err != nil {
		a.log.Warn("cannot sign a writer term", "cluster", cluster, "error", err)
		return
	}
	if err := e.Respond(b); err != nil {
		a.log.Debug("term query answer not sent", "cluster", cluster, "error", err)
		return
	}
	a.cons.terms.stats.Answered.Add(1)
}

// askTerms asks the voters for each cluster whose pool says a newer term
// may exist, at most once per askEvery per cluster. The answers arrive
// on their own goroutine and are verified like events.
func (a *Agent) askTerms(ctx context.Context) {
	if a.cons.terms.unverifiable != "" || a.pool.router == nil {
		return
	}
	now := a.clock.Now()
	for _, c := range a.pool.router.Current().Pool.Clusters {
		last, askedOnce := a.cons.terms.asked[c.Name]
		if c.Term == nil || askedOnce && (!c.AskTerm || now.Sub(last) < askEvery) {
			continue
		}
		a.cons.terms.asked[c.Name] = now
		resp, err := a.Query(consensus.TermQuery, consensus.EncodeTermQuery(c.Name), &serf.QueryParam{FilterTags: map[string]string{tags.KeyVoter: ".+"}})
		if err != nil {
			a.log.Debug("term query not sent", "cluster", c.Name, "error", err)
			continue
		}
		a.cons.terms.stats.Asked.Add(1)
		a.life.wg.Add(1)
		go func() {
			defer a.life.wg.Done()
			eachAnswer(ctx, resp, func(r serf.NodeResponse) bool {
				a.termSafely("term answer", func() { a.acceptSignedTerm(r.Payload, "answer from "+r.From) })
				return true
			})
		}()
	}
}

// eachAnswer calls f with each answer to a query until the query ends,
// ctx ends or f returns false, then closes the query.
func eachAnswer(ctx context.Context, resp *serf.QueryResponse, f func(serf.NodeResponse) bool) {
	defer resp.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case r, ok := <-resp.ResponseCh():
			if !ok || !f(r) {
				return
			}
		}
	}
}

// keepTerm learns a term this voter signed and, when it is newer than
// what it knew, saves it to the terms file: a restarted voter then routes
// by it at once, before raft has replayed its log.
func (a *Agent) keepTerm(t pool.Term, signed []byte, from string) {
	if a.learnTerm(t, from) {
		a.saveSignedTerm(t.Cluster, signed, true)
	}
}

// appliedTerm is the FSM's callback for each term a grant made current on
// this voter: the grants it did not make itself, and the replay after a
// restart (older terms change nothing).
func (a *Agent) appliedTerm(t pool.Term) {
	if a.cons.terms.signer == nil {
		return
	}
	a.termSafely("applied term", func() {
		b, err := consensus.EncodeSignedTerm(a.cons.terms.signer, t)
		if err != nil {
			a.log.Warn("cannot sign a writer term", "cluster", t.Cluster, "error", err)
			return
		}
		a.keepTerm(t, b, "applied by raft")
	})
}

// publishTerms broadcasts terms signed, as the raft leader does on each
// grant and once elected (consensus.View.Publish).
func (a *Agent) publishTerms(terms []pool.Term) {
	if a.cons.terms.signer == nil {
		return
	}
	for _, t := range terms {
		b, err := consensus.EncodeSignedTerm(a.cons.terms.signer, t)
		if err == nil {
			a.keepTerm(t, b, "granted here")
			err = a.UserEvent(consensus.TermEvent, b, false)
		}
		if err != nil {
			a.log.Warn("writer term not broadcast", "cluster", t.Cluster, "term", t.Number, "error", err)
		}
	}
}

// hookEvents is the hooks' event handler without shoal's own term events
// and queries: they are the agent's business, not the hooks'.
func (a *Agent) hookEvents() sagent.EventHandler {
	return hookFilter{a.rep.hooks}
}

type hookFilter struct{ next sagent.EventHandler }

func (h hookFilter) HandleEvent(e serf.Event) {
	if !isTermEvent(e) {
		h.next.HandleEvent(e)
	}
}
