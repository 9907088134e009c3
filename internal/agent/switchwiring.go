package agent

import (
	"context"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/switchover"
	"github.com/shoaldb/shoal/internal/view"
)

// startSwitcher builds this agent's part in switchovers (package
// switchover): every agent answers what its sinks applied; a voter also
// coordinates, takes steps and, leading, resumes orphaned switchovers.
func (a *Agent) startSwitcher() {
	cfg := switchover.Config{
		Node: a.cfg.Node, Gossip: a, Terms: a.cons.terms, Actuator: a.actuator(),
		Voter:    a.switchVoter,
		Pool:     func() *pool.Pool { return a.pool.router.Current().Pool },
		Members:  a.poolMembers,
		Lags:     a.ReplicaLags,
		History:  a.recordSwitch,
		Applied:  appliedPort{a},
		Go:       func(f func()) { a.life.wg.Go(f) },
		Clock:    a.clock,
		Log:      a.log,
		ReplUser: a.cons.replUser, ReplPassword: a.cons.replPassword,
		Lease:         a.cfg.Consensus.LeaseDuration(),
		LeaderLease:   a.cfg.Consensus.LeaderLeaseTimeout,
		FailoverLimit: a.cfg.Consensus.FailoverLimit,
		Promotion:     a.cfg.Consensus.Promotion,
	}
	if a.probe != nil {
		cfg.CheckNow = a.probe.CheckNow
	}
	if a.cfg.Snapshot != "" {
		cfg.HoldFile = a.cfg.Snapshot + ".survey-hold" // next to the snapshot, like the terms file
	}
	a.cons.sw = switchover.New(cfg)
}

// actuator is the local server's actuator, nil without one (an interface
// holding a nil pointer is not nil).
func (a *Agent) actuator() switchover.Actuator {
	if a.cons.act == nil {
		return nil
	}
	return a.cons.act
}

// switchVoter is the raft node, nil when this agent is no voter.
func (a *Agent) switchVoter() switchover.Voter {
	if a.cons.node == nil {
		return nil
	}
	return a.cons.node
}

// runFailover runs the failover loop (package switchover): every agent
// starts again replication that a failover's survey stopped in vain; the
// raft leader, with consensus.failover on, fails dead writers over.
func (a *Agent) runFailover(ctx context.Context) {
	a.cons.sw.Failover(ctx, a.cfg.Consensus.Failover)
}

// Failover fails a cluster with a dead writer over now, or plans it
// (package switchover).
func (a *Agent) Failover(ctx context.Context, req view.FailoverRequest) (view.Failover, error) {
	return a.cons.sw.FailoverNow(ctx, req)
}

// Switchover moves a cluster's writer (package switchover).
func (a *Agent) Switchover(ctx context.Context, req view.SwitchoverRequest) (view.Switchover, error) {
	return a.cons.sw.Switchover(ctx, req)
}

// recordSwitch records what a switchover step did to this server.
func (a *Agent) recordSwitch(e history.Entry) {
	if a.rep.hist != nil {
		a.rep.hist.Add(e)
	}
}

// appliedPort is what this agent's sinks applied.
type appliedPort struct{ a *Agent }

func (p appliedPort) Record() *switchover.Record { return p.a.appliedRecord() }
func (p appliedPort) Sinks() []view.SinkStatus   { return p.a.sinkStatus() }
func (p appliedPort) Generation() uint64 {
	if p.a.pool.router == nil {
		return 0
	}
	return p.a.pool.router.Current().Generation
}

// appliedRecord is the record the sinks share; nil before startSinks or
// without sinks.
func (a *Agent) appliedRecord() *switchover.Record {
	for _, s := range a.pool.sinks {
		if r, ok := s.(switchover.RecordedSink); ok {
			return r.Log
		}
	}
	return nil
}

// appliedTermsNow is what this agent's sinks applied, read at scrape time.
func (a *Agent) appliedTermsNow() map[string]uint64 {
	return switchover.AppliedTerms(a.appliedRecord(), a.sinkStatus())
}
