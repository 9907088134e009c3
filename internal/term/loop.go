package term

import (
	"context"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// IsEvent reports whether e is one of shoal's own events or queries
// (consensus.IsInternalEvent), which the book's loop handles and event
// hooks never see.
func IsEvent(e serf.Event) bool {
	switch e := e.(type) {
	case serf.UserEvent:
		return consensus.IsInternalEvent(e.Name)
	case *serf.Query:
		return consensus.IsInternalEvent(e.Name)
	}
	return false
}

// HideEvents returns next without shoal's own events and queries: they are
// the agent's business, not the hooks'.
func HideEvents(next sagent.EventHandler) sagent.EventHandler { return hookFilter{next} }

type hookFilter struct{ next sagent.EventHandler }

func (h hookFilter) HandleEvent(e serf.Event) {
	if !IsEvent(e) {
		h.next.HandleEvent(e)
	}
}

// Offer queues an event or query (IsEvent) for the loop without blocking
// serf's event loop: when the queue is full it is dropped and counted.
func (b *Book) Offer(e serf.Event) {
	select {
	case b.in <- e:
	default:
		b.stats.Dropped.Add(1)
	}
}

// OnApply is the raft FSM's callback (consensus.Config.OnApply) for each
// term a grant made current on this voter, and the replay after a restart:
// it only queues the term and never blocks; the loop signs and saves it.
func (b *Book) OnApply(t pool.Term) { b.queue.Put(t) }

// Run handles events and queries, the terms raft applied, and asks for
// the terms the pool may lack, until ctx ends; it returns once the query
// answers it reads are done.
func (b *Book) Run(ctx context.Context) {
	defer b.asks.Wait()
	t := b.cfg.Clock.NewTicker(askTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-b.in:
			b.safely("term event", func() { b.Handle(ctx, e) })
		case <-b.queue.Ready():
			b.safely("applied term", b.keepApplied)
		case <-t.Chan():
			b.safely("term query", func() { b.ask(ctx) })
		}
	}
}

// Handle verifies a broadcast term, answers a query for a term, or hands
// another internal query to Config.Other. The loop calls it for what
// Offer queued.
func (b *Book) Handle(ctx context.Context, e serf.Event) {
	switch e := e.(type) {
	case serf.UserEvent:
		if e.Name == consensus.TermEvent {
			b.acceptSigned(e.Payload, "event")
		}
	case *serf.Query:
		switch {
		case e.Name == consensus.TermQuery:
			b.answer(e)
		case b.cfg.Other != nil:
			b.cfg.Other(ctx, e)
		}
	}
}

// keepApplied signs and keeps the terms raft applied since the last time;
// a term the book holds already (this leader's own grant, published
// first) is not signed again.
func (b *Book) keepApplied() {
	signer := b.Signer()
	for _, t := range b.queue.Take() {
		if signer == nil || b.knows(t) {
			continue
		}
		data, err := consensus.EncodeSignedTerm(signer, t)
		if err != nil {
			b.cfg.Log.Warn("cannot sign a writer term", "cluster", t.Cluster, "error", err)
			continue
		}
		b.keep(t, data, "applied by raft")
	}
}

// answer answers a query for a cluster's term when this agent is a voter
// that holds one.
func (b *Book) answer(e *serf.Query) {
	signer, v := b.Signer(), b.voter()
	if signer == nil || v == nil {
		return
	}
	cluster, err := consensus.DecodeTermQuery(e.Payload)
	if err != nil {
		b.stats.Malformed.Add(1)
		return
	}
	t := v.Term(cluster)
	if t.Number == 0 {
		return
	}
	data, err := consensus.EncodeSignedTerm(signer, t)
	if err != nil {
		b.cfg.Log.Warn("cannot sign a writer term", "cluster", cluster, "error", err)
		return
	}
	if err := e.Respond(data); err != nil {
		b.cfg.Log.Debug("term query answer not sent", "cluster", cluster, "error", err)
		return
	}
	b.stats.Answered.Add(1)
}

// ask asks the voters for each cluster whose pool says a newer term may
// exist, at most once per askEvery per cluster. The answers arrive on
// their own goroutine and are verified like events.
func (b *Book) ask(ctx context.Context) {
	if b.keys.Load().unverifiable != "" || b.cfg.Pool == nil || b.cfg.Gossip == nil {
		return
	}
	p := b.cfg.Pool()
	if p == nil {
		return
	}
	now := b.cfg.Clock.Now()
	for _, c := range p.Clusters {
		last, askedOnce := b.asked[c.Name]
		if c.Term == nil || askedOnce && (!c.AskTerm || now.Sub(last) < askEvery) {
			continue
		}
		b.asked[c.Name] = now
		resp, err := b.cfg.Gossip.Query(consensus.TermQuery, consensus.EncodeTermQuery(c.Name), &serf.QueryParam{FilterTags: map[string]string{tags.KeyVoter: ".+"}})
		if err != nil {
			b.cfg.Log.Debug("term query not sent", "cluster", c.Name, "error", err)
			continue
		}
		b.stats.Asked.Add(1)
		b.asks.Add(1)
		go func() {
			defer b.asks.Done()
			gossip.EachAnswer(ctx, resp, func(r serf.NodeResponse) bool {
				b.safely("term answer", func() { b.acceptSigned(r.Payload, "answer from "+r.From) })
				return true
			})
		}()
	}
}

// Publish broadcasts terms signed, as the raft leader does on each grant
// and once elected (consensus.View.Publish), and keeps them.
func (b *Book) Publish(terms []pool.Term) {
	signer := b.Signer()
	if signer == nil {
		return
	}
	for _, t := range terms {
		data, err := consensus.EncodeSignedTerm(signer, t)
		if err == nil {
			b.keep(t, data, "granted here")
			if b.cfg.Gossip != nil {
				err = b.cfg.Gossip.UserEvent(consensus.TermEvent, data, false)
			}
		}
		if err != nil {
			b.cfg.Log.Warn("writer term not broadcast", "cluster", t.Cluster, "term", t.Number, "error", err)
		}
	}
}
