package switchover

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/history"
)

// The return of a failed-over writer (docs/consensus.md, "Failover"):
// its own agent, a voter, finds the cluster's failover record (the term
// it granted and the new writer's GTID position at the promotion) naming
// its node as the old writer, and judges its server once it is back,
// read-only (its file says so, or its agent fenced it):
//   - its binlog holds transactions beyond the promotion position: they
//     were never on the new writer, so they are lost to the cluster. They
//     are counted and named (log, history, `shoal info`, the metric
//     shoal_failover_lost_transactions), and the server stays as it is,
//     read-only and replicating from nobody: diverged, until an operator
//     reseeds it (or salvages the transactions first);
//   - none: it rejoins as a replica of the term's writer (MASTER_USE_GTID
//     = current_pos, the failover's replication account).
//
// A server that replicates already (re-pointed by hand) is left alone.

// returnEvery is how often the old writer's agent looks at its server.
const returnEvery = 2 * time.Second

// Return is what became of the old writer of a cluster's latest failover,
// as its own agent judged it.
type Return struct {
	Term     uint64 // the failover's term
	NewRole  string // "replica of db3", "diverged", "replicates already"
	Lost     uint64 // transactions beyond the promotion position
	LostSet  string // them, named: "0-1-22..0-1-24"
	Position string // the promotion position they were judged by
	At       time.Time
}

// String says it for humans.
func (r Return) String() string {
	if r.Lost == 0 {
		return fmt.Sprintf("returned after the failover of term %d: %s", r.Term, r.NewRole)
	}
	return fmt.Sprintf("returned after the failover of term %d diverged: %d transactions (%s) beyond the promotion position %s were never on the new writer: lost to the cluster; the server stays read-only and replicates from nobody until it is reseeded",
		r.Term, r.Lost, r.LostSet, r.Position)
}

// returnState is the bookkeeping of checkReturn; the Failover loop's
// goroutine owns next, mu guards done.
type returnState struct {
	next time.Time
	done map[string]Return // by cluster: judged for that term
}

// checkReturn judges this agent's server when it was the old writer of a
// cluster's latest failover and is back (see above); at most every
// returnEvery, and once per failover.
func (s *Switcher) checkReturn(ctx context.Context) {
	n := s.voter()
	if n == nil || s.cfg.Actuator == nil {
		return
	}
	now := s.cfg.Clock.Now()
	if now.Before(s.ret.next) {
		return
	}
	s.ret.next = now.Add(returnEvery)
	switches := n.FSM().Switches()
	for cluster, rec := range n.FSM().Failovers() {
		s.fo.mu.Lock()
		done := s.ret.done[cluster].Term == rec.Term
		s.fo.mu.Unlock()
		if rec.Old != s.cfg.Node || done {
			continue
		}
		if _, busy := switches[cluster]; busy {
			continue
		}
		t := n.FSM().Term(cluster)
		if t.Number == 0 || t.Writer == s.cfg.Node {
			continue // it holds the term again: nothing to rejoin
		}
		sv, err := s.cfg.Actuator.Positions(ctx)
		if err != nil || !sv.ReadOnly {
			continue // down still, or not yet fenced: next time
		}
		r := s.judgeReturn(ctx, rec, sv, t.Writer, t.Addr)
		if r.NewRole == "" {
			continue
		}
		r.At = now
		s.fo.mu.Lock()
		s.ret.done[cluster] = r
		s.fo.mu.Unlock()
		if r.Lost > 0 {
			s.stats.LostTransactions.Add(r.Lost)
		}
		if s.cfg.History != nil {
			s.cfg.History(history.Entry{Time: now, Kind: history.KindFence, Cluster: cluster, Node: s.cfg.Node,
				From: "read-only", To: r.NewRole, Reason: "failover-return", Detail: r.String()})
		}
	}
}

// judgeReturn judges the returning old writer's server sv against the
// failover record rec, and re-points it to the writer (addr) when it
// holds nothing beyond the promotion position. A zero Return: try again.
func (s *Switcher) judgeReturn(ctx context.Context, rec consensus.Failover, sv fence.Survey, writer, addr string) Return {
	log := s.cfg.Log.With("cluster", rec.Cluster, "term", rec.Term, "new_writer", writer)
	r := Return{Term: rec.Term, Position: rec.Position}
	if sv.Replica {
		r.NewRole = "replicates already"
		log.Info("failover return: this server replicates already (re-pointed by hand); left alone")
		return r
	}
	own, err1 := parseGTIDList(sv.BinlogPos)
	promoted, err2 := parseGTIDList(rec.Position)
	if err1 != nil || err2 != nil {
		log.Error("failover return: cannot compare positions; the server is left alone", "binlog", sv.BinlogPos, "promoted", rec.Position)
		r.NewRole = "left alone: positions unreadable"
		return r
	}
	if r.Lost = promoted.behind(own); r.Lost > 0 {
		r.NewRole, r.LostSet = "diverged", own.beyond(promoted)
		log.Error("failover return: this server holds transactions the new writer never had; lost to the cluster, the server stays read-only and out of replication (reseed it)",
			"lost", r.Lost, "gtids", r.LostSet, "binlog", sv.BinlogPos, "promoted", rec.Position)
		return r
	}
	src := fence.Source{Addr: addr, User: s.cfg.ReplUser, Password: s.cfg.ReplPassword, FormerWriter: true, Timers: fenceTimers(rec.Timers)}
	if err := s.cfg.Actuator.Repoint(ctx, src); err != nil {
		log.Warn("failover return: cannot re-point this server to the new writer; trying again", "error", err)
		return Return{}
	}
	r.NewRole = "replica of " + writer
	log.Warn("failover return: this server holds nothing beyond the promotion position; it replicates from the new writer", "binlog", sv.BinlogPos, "promoted", rec.Position)
	return r
}

// Returns is what became of this agent's server after each failover that
// replaced it, for the status.
func (s *Switcher) Returns() map[string]Return {
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	return maps.Clone(s.ret.done)
}
