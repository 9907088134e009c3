package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/backoff"
	"github.com/shoaldb/shoal/internal/view"
)

// retryJoin joins the configured addresses, retrying with exponential
// backoff and jitter until one answers, the context ends, or retry_max
// attempts have failed (then it reports a fatal error).
func (a *Agent) retryJoin(ctx context.Context) {
	addrs := a.cfg.Join
	if len(addrs) == 0 {
		return
	}
	// Equal jitter (half fixed, half random) keeps many restarting
	// agents apart without ever retrying at once.
	b := backoff.New(backoff.Policy{Initial: a.cfg.RetryInterval, Max: a.cfg.RetryMaxWait, Jitter: true}, a.clock)
	for attempt := 1; ; attempt++ {
		n, err := a.joinCounted(addrs, false)
		if n > 0 {
			a.join.record(attempt, a.clock.Now(), n, nil)
			a.log.Info("joined cluster", "contacted", n, "addrs", addrs, "attempts", attempt)
			return
		}
		if err == nil {
			err = fmt.Errorf("no node answered")
		}
		err = flatten(err)
		a.join.record(attempt, a.clock.Now(), 0, err)
		if a.cfg.RetryMax > 0 && attempt >= a.cfg.RetryMax {
			a.fail(fmt.Errorf("join %v: giving up after %d attempts (retry_max): %w", addrs, attempt, err))
			return
		}
		sleep := b.Next()
		a.log.Warn("join failed, retrying", "addrs", addrs, "attempt", attempt, "retry_in", sleep.Round(time.Millisecond).String(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-a.clock.After(sleep):
		}
	}
}

// record notes an attempt of the start-up join: joined n nodes, else err.
func (j *joiner) record(attempt int, at time.Time, n int, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.status.Attempts, j.status.LastAttempt = attempt, at
	if n > 0 {
		j.status.Joined, j.status.JoinedNodes, j.status.LastError = true, n, ""
		return
	}
	j.status.LastError = err.Error()
}

// snapshot returns a copy of the join status.
func (j *joiner) snapshot() view.JoinStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.status
	st.Addrs = append([]string(nil), st.Addrs...)
	return st
}

// flatten turns serf's multi-line multierror text into one line.
func flatten(err error) error {
	var me interface{ WrappedErrors() []error }
	if !errors.As(err, &me) {
		return err
	}
	parts := make([]string, 0, len(me.WrappedErrors()))
	for _, e := range me.WrappedErrors() {
		parts = append(parts, e.Error())
	}
	return errors.New(strings.Join(parts, "; "))
}

// joinCounted joins while marking a join in flight (see gossip.Conflicts).
func (a *Agent) joinCounted(addrs []string, replay bool) (int, error) {
	a.join.inFlight.Add(1)
	defer a.join.inFlight.Add(-1)
	return a.mesh.sa.Join(addrs, replay)
}
