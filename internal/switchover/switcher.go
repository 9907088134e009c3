package switchover

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/view"
)

// Gossip is what a switchover sends and reads through serf.
type Gossip interface {
	Query(name string, payload []byte, p *serf.QueryParam) (*serf.QueryResponse, error)
	Members() []serf.Member
}

// Terms is the writer-term book: what this agent knows, the raft group it
// follows, the keys steps are signed and verified with, and the leader's
// broadcast of a term it granted.
type Terms interface {
	View() pool.TermView
	OwnGroup() string
	Signer() *consensus.Keyring
	Verify() []ed25519.PublicKey
	Publish([]pool.Term)
}

// Voter is this agent's raft node (a *consensus.Node).
type Voter interface {
	IsLeader() bool
	Status() consensus.Status
	Voters() map[string]string
	FSM() *consensus.FSM
	ProveWriter(ctx context.Context, t pool.Term) error
	BeginSwitch(ctx context.Context, in consensus.SwitchIntent) (consensus.SwitchIntent, error)
	EndSwitch(ctx context.Context, cluster, id, outcome string, rollback bool) (consensus.SwitchIntent, error)
	GrantSwitch(ctx context.Context, id string, g pool.Grant) (pool.Term, error)
}

// Actuator changes the local MySQL server (a *fence.Actuator).
type Actuator interface {
	Demote(ctx context.Context) (fence.Result, string, error)
	Unfence(ctx context.Context) error
	CatchUp(ctx context.Context, gtid string, wait time.Duration) error
	Promote(ctx context.Context) (string, fence.Timers, error)
	Repoint(ctx context.Context, src fence.Source) error
	Survey(ctx context.Context, drain time.Duration) (fence.Survey, error)
	ResumeReplication(ctx context.Context) error
	Positions(ctx context.Context) (fence.Survey, error)
}

// Config is a Switcher's ports.
type Config struct {
	Node   string
	Gossip Gossip
	Terms  Terms
	// Voter is the raft node; nil returns when this agent is none.
	Voter func() Voter
	// Actuator is the local server's; nil on an agent without one.
	Actuator Actuator
	// Pool is the router's current pool; Members the pool's members now.
	Pool    func() *pool.Pool
	Members func() []pool.Member
	// Lags is each replica's lag as this agent judges it (nil: unknown).
	Lags func() map[string]view.Lag
	// CheckNow makes the probe publish the server's state at once (nil:
	// no probe).
	CheckNow func()
	// History records what a step did to the local server (nil: none).
	History func(history.Entry)
	// Applied reads what this agent's sinks applied (AnswerApplied).
	Applied AppliedSource
	// ReplUser and ReplPassword are the account a former writer
	// replicates from the new one with; "" keeps the server's own.
	ReplUser, ReplPassword string
	// Go runs f on a goroutine the agent waits for at shutdown.
	Go func(f func())
	// Lease is the writer's lease (consensus.Settings.LeaseDuration): a
	// failover whose writer's agent is gone waits that long, and
	// LeaderLease (raft's leader_lease_timeout) more: a writer whose agent
	// led raft counted as in contact until it stepped down.
	Lease, LeaderLease time.Duration
	// HoldFile keeps the IO threads a failover's survey stopped across an
	// agent restart ("": not kept).
	HoldFile string
	// FailoverLimit is consensus.failover_limit (0: the default).
	FailoverLimit int
	// Promotion is this server's promotion rule (consensus.promotion),
	// answered in a failover's survey.
	Promotion string
	Clock     clockwork.Clock
	Log       *slog.Logger
}

// Switcher is one agent's part in switchovers: the one it coordinates,
// the steps it takes for others, and the leader's resume.
type Switcher struct {
	cfg Config

	// busy is set while a step runs: one at a time; a step that arrives
	// meanwhile is answered "busy" and sent again.
	busy atomic.Bool
	// running is set while this agent coordinates a switchover.
	running atomic.Bool

	mu sync.Mutex // guards: answers, order, demoted, resuming
	// answers are the answers to the steps taken, by "ID/op", so that a
	// step sent again (its answer was lost) gets the same answer and is
	// not taken twice. Bounded: the oldest go first.
	answers map[string][]byte
	order   []string
	// demoted is the term of each cluster a switchover demoted this
	// server in: the return of contact after a lease fence must not make
	// it writable again (package fencing).
	demoted map[string]uint64
	// resuming holds the intents the leader is finishing, by ID.
	resuming map[string]bool

	fo  failoverState
	ret returnState

	stats Stats
	// ask sends one attempt of a step and waits for its answer: askStep,
	// which tests replace.
	ask func(ctx context.Context, st consensus.SwitchStep, timeout time.Duration) (consensus.SwitchAnswer, error)
}

// Stats counts what the switcher did, for /metrics and tests.
type Stats struct {
	Taken, Refused, Resumed atomic.Uint64
	// FailoversPromoted and FailoversNotDone count the failovers this
	// agent ran as the leader.
	FailoversPromoted, FailoversNotDone atomic.Uint64
	// LostTransactions counts the transactions returning old writers of
	// failovers held beyond the promotion position (checkReturn).
	LostTransactions atomic.Uint64
}

// New returns a switcher; nothing runs until Resume or a request.
func New(cfg Config) *Switcher {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Go == nil {
		cfg.Go = func(f func()) { go f() }
	}
	s := &Switcher{cfg: cfg, answers: map[string][]byte{}, demoted: map[string]uint64{}, resuming: map[string]bool{}}
	s.ask = s.askStep
	s.fo.init()
	s.ret.done = map[string]Return{}
	if err := s.loadHolds(); err != nil {
		cfg.Log.Error("failover: survey holds not read: a stopped IO thread is not started again by this agent", "error", err)
	}
	return s
}

// Stats returns the switcher's counters.
func (s *Switcher) Stats() *Stats { return &s.stats }

// voter is the raft node, nil when this agent is none.
func (s *Switcher) voter() Voter {
	if s.cfg.Voter == nil {
		return nil
	}
	return s.cfg.Voter()
}

// maxAnswers bounds the remembered answers.
const maxAnswers = 64

func (s *Switcher) cached(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.answers[key]
	return b, ok
}

func (s *Switcher) remember(key string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.answers[key]; ok {
		return
	}
	s.answers[key] = b
	s.order = append(s.order, key)
	if len(s.order) > maxAnswers {
		delete(s.answers, s.order[0])
		s.order = s.order[1:]
	}
}

// setDemoted notes (term > 0) or forgets (0) that a switchover demoted
// this server in cluster at term.
func (s *Switcher) setDemoted(cluster string, term uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if term == 0 {
		delete(s.demoted, cluster)
		return
	}
	s.demoted[cluster] = term
}

// WasDemoted reports whether a switchover demoted this server in cluster
// at term or later.
func (s *Switcher) WasDemoted(cluster string, term uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.demoted[cluster]
	return ok && d >= term
}

// history records what a step did to this server (kind fence: the
// server's writability changed).
func (s *Switcher) history(st consensus.SwitchStep, from, to, detail string) {
	if s.cfg.History == nil {
		return
	}
	s.cfg.History(history.Entry{Time: s.cfg.Clock.Now(), Kind: history.KindFence, Cluster: st.Cluster, Node: s.cfg.Node,
		From: from, To: to, Reason: "switchover", Detail: detail})
}

// view converts an AppliedReport (Applied is sorted already).
func (r AppliedReport) view() view.RoutersApplied {
	return view.RoutersApplied{Applied: r.Applied, Pending: r.Pending, Unreachable: r.Unreachable, Took: r.Took}
}
