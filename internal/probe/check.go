package probe

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/internal/backoff"
)

// safeCheck runs one check, turning a panic into a failed result.
func (p *Probe) safeCheck(ctx context.Context, start time.Time) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("check panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p.dropSession() // its state is unknown
			res = Result{Outcome: OutcomeFail, Reason: ReasonPanic, Message: fmt.Sprintf("check panicked: %v", r),
				Start: start, Duration: p.clock.Since(start)}
		}
	}()
	if p.beforeCheck != nil {
		p.beforeCheck()
	}
	if err := p.stall.begin(); err != nil {
		p.log.Info("host pressure (PSI) unreadable; every check timeout counts as a hung server", "err", err)
	}
	res = p.check(ctx)
	res.Start = start
	res.Duration = p.clock.Since(start)
	if stall, on := p.stall.end(); res.Reason == ReasonTimeout && stall > 0 {
		res.HostStall = stall
		if res.HostStalled() {
			res.Message += fmt.Sprintf(" (the host stalled on %s for %s of the %s: counted as one failure)",
				on, stall.Round(time.Millisecond), res.Duration.Round(time.Millisecond))
		}
	}
	if res.Outcome == OutcomePass && res.Duration > p.cfg.Timeout/2 {
		res.Outcome, res.Reason = OutcomeWarn, ReasonSlow
		res.Message = fmt.Sprintf("check took %s, over half the %s timeout", res.Duration.Round(time.Millisecond), p.cfg.Timeout)
	}
	return res
}

// check runs the check statements within the timeout, connecting first if
// needed. Two statements per check: the variables SELECT and the
// replication status.
func (p *Probe) check(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()

	prefix := ""
	if p.lostIdle != nil {
		prefix = fmt.Sprintf("connection lost while idle (%v); ", p.lostIdle)
		p.lostIdle = nil
	}
	reused := p.sess != nil
	if !reused {
		if p.skip > 0 {
			p.skip--
			r := p.lastConnFail
			r.Message += " (waiting to reconnect)"
			return r
		}
		if res, ok := p.connect(ctx, prefix); !ok {
			return res
		}
	}

	facts, replErr, err := p.collect(ctx)
	if err != nil {
		v := classify(err, ctx, false)
		if v.lost && reused && ctx.Err() == nil {
			// A connection that worked before broke: the server may be gone
			// or may just have dropped us (KILL, wait_timeout). One
			// immediate reconnect tells which.
			p.log.Warn("connection lost; reconnecting at once", "err", err)
			p.dropSession()
			prefix += fmt.Sprintf("connection lost (%v); ", err)
			if res, ok := p.connect(ctx, prefix); !ok {
				return res
			}
			facts, replErr, err = p.collect(ctx)
			if err != nil {
				v = classify(err, ctx, false)
			}
		}
		if err != nil {
			if v.lost || v.reason == ReasonTimeout {
				p.dropSession()
			}
			return Result{Outcome: v.outcome, Reason: v.reason, Message: prefix + err.Error(), Facts: answered(err)}
		}
	}

	switch {
	case !facts.Galera.Healthy():
		return Result{Outcome: OutcomeFail, Reason: ReasonWsrep, Facts: facts, FactsRead: true, Message: fmt.Sprintf(
			"galera node not serving: wsrep_local_state=%d wsrep_cluster_status=%q",
			facts.Galera.LocalState, facts.Galera.ClusterStatus)}
	case replErr != nil:
		return Result{Outcome: OutcomeWarn, Reason: ReasonReplStatus, Facts: facts, FactsRead: true, Message: replErr.Error()}
	}
	return Result{Outcome: OutcomePass, Reason: ReasonOK, Facts: facts, FactsRead: true}
}

// connect opens a connection; on failure it returns the failed result and
// schedules the next attempt with exponential back-off (package backoff,
// from Interval up to ReconnectMax, no jitter: one probe per server has no
// herd to spread) counted in checks: after n consecutive failures,
// 2^(n-1)-1 checks are skipped, up to ReconnectMax. The first attempt after
// a connection breaks is immediate.
func (p *Probe) connect(ctx context.Context, prefix string) (Result, bool) {
	p.attempts++
	s, err := p.conn.open(ctx)
	if err != nil {
		v := classify(err, ctx, true)
		p.connFailures++
		wait := backoff.Policy{Initial: p.cfg.Interval, Max: p.cfg.ReconnectMax}.Delay(p.connFailures)
		p.skip = max(1, int(wait/p.cfg.Interval)) - 1
		res := Result{Outcome: v.outcome, Reason: v.reason, Message: prefix + "connect: " + err.Error(), Facts: answered(err)}
		p.lastConnFail = res
		if p.connFailures == 1 {
			p.log.Warn("cannot connect", "err", err, "reason", string(v.reason))
		}
		return res, false
	}
	p.sess = s
	p.connects++
	if p.connFailures > 0 || p.connects > 1 {
		p.log.Info("connected", "version", s.info.version, "after_failures", p.connFailures)
	} else {
		p.log.Info("connected", "version", s.info.version, "flavor", string(s.info.flavor))
	}
	p.connFailures, p.skip = 0, 0
	return Result{}, true
}

// collect reads the facts over the current session. replErr is set when
// only the replication status failed with a server error (the server is
// up; the facts lack replication); err is set when the check failed.
func (p *Probe) collect(ctx context.Context) (f Facts, replErr, err error) {
	si := p.sess.info
	f = Facts{Reachable: true, Flavor: si.flavor, Version: si.version}
	if err := collectVariables(ctx, p.sess.sc, si, &f); err != nil {
		return Facts{}, nil, err
	}
	repl, rx, err := collectReplication(ctx, p.sess.sc, si)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			readPosition(si, &f)
			return f, err, nil
		}
		return Facts{}, nil, err
	}
	repl.NotReceiving = p.silent(repl, rx)
	f.Replication = repl
	readPosition(si, &f)
	return f, nil, nil
}

// ReceiveSilence is how many heartbeat periods a running IO thread may
// receive nothing before the replica counts as not receiving: a source
// with nothing to send sends a heartbeat every period, so three missed in
// a row is silence, not a quiet source (replication-manager watches
// Slave_received_heartbeats over 3 s the same way).
const ReceiveSilence = 3

// minSilence is the least silence that counts, whatever the period.
const minSilence = 2 * time.Second

// silent tracks what repl's channels received (rx) from check to check
// and reports whether the IO threads run but nothing arrived for
// ReceiveSilence heartbeat periods.
func (p *Probe) silent(repl Replication, rx received) bool {
	now := p.clock.Now()
	if !repl.IORunning || rx.period == 0 || rx.token != p.rx.token || p.rx.at.IsZero() {
		p.rx.token, p.rx.at = rx.token, now
		return false
	}
	return now.Sub(p.rx.at) > max(ReceiveSilence*rx.period, minSilence)
}

// answered returns the facts of a failed check: reachable if the server
// answered at all (with a MySQL error), zero otherwise.
func answered(err error) Facts {
	var me *mysql.MySQLError
	return Facts{Reachable: errors.As(err, &me)}
}
