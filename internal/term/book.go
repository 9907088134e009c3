package term

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
)

// Gossip is what the book uses of serf: the members (their voter tags),
// the broadcast of a signed term, and the query for a cluster's term.
type Gossip interface {
	Members() []serf.Member
	UserEvent(name string, payload []byte, coalesce bool) error
	Query(name string, payload []byte, params *serf.QueryParam) (*serf.QueryResponse, error)
}

// Voter is what the book reads of this agent's raft voter's state machine
// (a *consensus.FSM): the terms the quorum committed and its group.
type Voter interface {
	Term(cluster string) pool.Term
	Terms() map[string]pool.Term
	Group() string
}

// Config is the book's ports. Every func may be nil.
type Config struct {
	Node   string // the local node's name
	File   string // the terms file; "" keeps none
	Gossip Gossip // nil: no members, no broadcast nor query
	// Pool returns the current pool, nil before there is one: the loop
	// asks the voters for the terms it may lack.
	Pool func() *pool.Pool
	// Voter returns this agent's raft voter's FSM, nil when it is none.
	Voter func() Voter
	// Changed is called when a term was learned (the router recomputes).
	Changed func()
	// Other handles the internal queries the book does not own
	// (consensus.IsInternalEvent, other than TermQuery), on the loop.
	Other func(ctx context.Context, q *serf.Query)
	Clock clockwork.Clock // nil: the real clock
	Log   *slog.Logger    // nil: discarded
}

// Book holds the writer terms this agent knows, the highest of each
// cluster, and how it learns them: the raft leader broadcasts each signed
// term as a user event; an agent whose pool says a newer term may exist
// (pool.Cluster.AskTerm) asks the voters with a query, and every voter
// answers from its own copy. Every term is verified before it counts:
// holding the gossip key is not enough to forge one. Safe for concurrent
// use.
type Book struct {
	cfg   Config
	keys  atomic.Pointer[keys]
	in    chan serf.Event      // what serf's event loop hands over, bounded
	queue *consensus.TermQueue // the terms raft applied, for the loop
	asks  sync.WaitGroup       // the goroutines reading query answers

	mu    sync.Mutex // guards: known
	known map[string]pool.Term

	// asked is when each cluster's term was last asked for (loop only).
	// A cluster never asked for is asked once after the start, even with
	// a term known (it may be a saved one that moved).
	asked map[string]time.Time

	// fileMu guards: signed
	fileMu sync.Mutex
	signed map[string][]byte // the terms file's content (file.go)

	stats Stats
}

// keys is what terms are verified and signed with.
type keys struct {
	// verify lists the term-signing public keys; none: this agent cannot
	// verify terms, and unverifiable says why.
	verify       []ed25519.PublicKey
	unverifiable string
	// signer signs terms and query answers; nil unless this agent is a
	// voter.
	signer *consensus.Keyring
}

// Stats counts what the book saw, for /metrics.
type Stats struct {
	Learned, Stale, BadSignature, Malformed, Dropped, Asked, Answered, Panics, ForeignGroup atomic.Uint64
}

// Limits of the loop.
const (
	// QueueLen bounds the events and queries waiting for the loop.
	QueueLen = 64
	// askEvery is the least time between two queries for one cluster.
	askEvery = 2 * time.Second
	// askTick is how often the loop looks for clusters to ask about.
	askTick = 500 * time.Millisecond
)

// New returns a book that knows no term and no key.
func New(cfg Config) *Book {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	b := &Book{cfg: cfg, in: make(chan serf.Event, QueueLen), queue: consensus.NewTermQueue(),
		known: map[string]pool.Term{}, asked: map[string]time.Time{}}
	b.keys.Store(&keys{unverifiable: "this agent has neither the consensus key nor consensus.term_key: it cannot verify writer terms"})
	return b
}

// SetKeys sets what terms are verified with: the consensus keyring's keys
// (kr may be nil) and extra (consensus.term_key). Terms are signed with
// kr when this agent is a voter.
func (b *Book) SetKeys(kr *consensus.Keyring, extra []ed25519.PublicKey, voter bool) {
	k := &keys{unverifiable: b.keys.Load().unverifiable}
	if kr != nil {
		k.verify = kr.TermPublicKeys()
		if voter {
			k.signer = kr
		}
	}
	k.verify = append(k.verify, extra...)
	if len(k.verify) > 0 {
		k.unverifiable = ""
	}
	b.keys.Store(k)
}

// Verify returns the keys terms (and switchover messages) are verified
// with.
func (b *Book) Verify() []ed25519.PublicKey { return b.keys.Load().verify }

// Signer returns the keyring this voter signs with, nil when it is none.
func (b *Book) Signer() *consensus.Keyring { return b.keys.Load().signer }

// Stats returns the book's counters.
func (b *Book) Stats() *Stats { return &b.stats }

func (b *Book) voter() Voter {
	if b.cfg.Voter == nil {
		return nil
	}
	return b.cfg.Voter()
}

// View is what the router computes with: the known terms, merged with
// this voter's own (its FSM holds what the quorum committed).
func (b *Book) View() pool.TermView {
	groups := b.Groups()
	b.mu.Lock()
	for c, t := range b.known {
		if !groups.Follows(t) {
			delete(b.known, c) // learned before this agent knew its group
		}
	}
	known := maps.Clone(b.known)
	b.mu.Unlock()
	if v := b.voter(); v != nil {
		for c, t := range v.Terms() {
			if t.Number > known[c].Number {
				known[c] = t
			}
		}
	}
	return pool.TermView{Terms: known, Unverifiable: b.keys.Load().unverifiable, Conflict: groups.Conflict()}
}

// learn keeps t when it is newer than what this agent knows, and reports
// whether it was. own is set for the terms this voter granted or applied:
// the same term learned again from the other path is no stale one.
func (b *Book) learn(t pool.Term, from string, own bool) bool {
	if groups := b.Groups(); !groups.Follows(t) {
		b.stats.ForeignGroup.Add(1)
		b.cfg.Log.Debug("writer term of another raft group ignored", "cluster", t.Cluster, "term", t.Number, "group", t.Group, "own_group", groups.Own, "from", from)
		return false
	}
	b.mu.Lock()
	cur := b.known[t.Cluster]
	// While this agent knows no group, a term of another group than the
	// one it knows for the cluster does not replace it, whatever its number.
	newer := t.Number > cur.Number && (cur.Number == 0 || cur.Group == t.Group)
	if newer {
		b.known[t.Cluster] = t
	}
	b.mu.Unlock()
	if !newer {
		if !own || !sameTerm(cur, t) {
			b.stats.Stale.Add(1)
		}
		return false
	}
	b.stats.Learned.Add(1)
	b.cfg.Log.Info("writer term learned", "cluster", t.Cluster, "term", t.Number, "writer", t.Writer, "addr", t.Addr, "from", from)
	if b.cfg.Changed != nil {
		b.cfg.Changed()
	}
	return true
}

// sameTerm reports whether a and b are one grant.
func sameTerm(a, b pool.Term) bool {
	return a.Cluster == b.Cluster && a.Number == b.Number && a.Writer == b.Writer && a.Group == b.Group
}

// knows reports whether the book holds t already.
func (b *Book) knows(t pool.Term) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sameTerm(b.known[t.Cluster], t)
}

// acceptSigned verifies a signed term and learns it.
func (b *Book) acceptSigned(data []byte, from string) {
	t, err := consensus.DecodeSignedTerm(data, b.Verify())
	switch {
	case errors.Is(err, consensus.ErrTermSignature):
		b.stats.BadSignature.Add(1)
		b.cfg.Log.Debug("writer term refused", "from", from, "error", err)
	case err != nil:
		b.stats.Malformed.Add(1)
		b.cfg.Log.Debug("writer term refused", "from", from, "error", err)
	default:
		if b.learn(t, from, false) {
			b.saveSigned(t.Cluster, data, true)
		}
	}
}

// keep learns a term this voter signed and, when it is newer than what it
// knew, saves it to the terms file: a restarted voter then routes by it at
// once, before raft has replayed its log.
func (b *Book) keep(t pool.Term, signed []byte, from string) {
	if b.learn(t, from, true) {
		b.saveSigned(t.Cluster, signed, true)
	}
}

// safely runs f, turning a panic into a logged and counted failure: a bad
// term message never stops the loop.
func (b *Book) safely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			b.stats.Panics.Add(1)
			b.cfg.Log.Error("writer terms: recovered from a panic", "in", what, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}
