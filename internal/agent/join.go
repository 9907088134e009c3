package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// retryJoin joins the configured addresses, retrying with exponential
// backoff and jitter until one answers, the context ends, or retry_max
// attempts have failed (then it reports a fatal error).
func (a *Agent) retryJoin(ctx context.Context) {
	addrs := a.cfg.Join
	if len(addrs) == 0 {
		return
	}
	wait := a.cfg.RetryInterval
	for attempt := 1; ; attempt++ {
		n, err := a.joinCounted(addrs, false)
		a.mu.Lock()
		a.join.Attempts = attempt
		a.join.LastAttempt = time.Now()
		if n > 0 {
			a.join.Joined, a.join.JoinedNodes, a.join.LastError = true, n, ""
			a.mu.Unlock()
			a.log.Info("joined cluster", "contacted", n, "addrs", addrs, "attempts", attempt)
			return
		}
		if err == nil {
			err = fmt.Errorf("no node answered")
		}
		err = flatten(err)
		a.join.LastError = err.Error()
		a.mu.Unlock()
		if a.cfg.RetryMax > 0 && attempt >= a.cfg.RetryMax {
			a.fail(fmt.Errorf("join %v: giving up after %d attempts (retry_max): %w", addrs, attempt, err))
			return
		}
		// Equal jitter (half fixed, half random) keeps many restarting
		// agents apart without ever retrying at once.
		sleep := wait/2 + rand.N(wait/2+1)
		a.log.Warn("join failed, retrying", "addrs", addrs, "attempt", attempt, "retry_in", sleep.Round(time.Millisecond).String(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(sleep):
		}
		wait = min(wait*2, a.cfg.RetryMaxWait)
	}
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
	a.joinInFlight.Add(1)
	defer a.joinInFlight.Add(-1)
	return a.sa.Join(addrs, replay)
}
