package probe

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// killTrials runs n kill -9 / restart cycles against a probe on srv and
// returns kill -> critical and restart-ready -> passing durations.
func killTrials(t *testing.T, srv *mariadbtest.Server, rec *recorder, n int) (detect, recover []time.Duration) {
	t.Helper()
	var reaped []time.Duration
	defer func() { t.Logf("kill -9 -> process reaped (for scale): %s", distribution(reaped)) }()
	rec.await(t, 0, 10*time.Second, "state passing", isState(StatePassing))
	for i := range n {
		// Let the kill land anywhere in the check cycle.
		time.Sleep(time.Duration(37*i%250) * time.Millisecond)
		m := rec.mark()
		t0 := time.Now()
		srv.Kill()
		reaped = append(reaped, time.Since(t0))
		e := rec.await(t, m, 10*time.Second, "state critical", isState(StateCritical))
		detect = append(detect, e.at.Sub(t0))
		if e.Status.Last.Outcome != OutcomeHardFail {
			t.Errorf("trial %d: critical by %s (%s: %s), want a hard failure", i, e.Status.Last.Outcome, e.Status.Reason, e.Status.Message)
		}
		if i == 0 {
			t.Logf("kill -9 -> critical: reason %s: %s", e.Status.Reason, e.Status.Message)
		}
		srv.Restart()
		t1 := time.Now()
		e = rec.await(t, rec.mark(), 10*time.Second, "state passing", isState(StatePassing))
		recover = append(recover, e.at.Sub(t1))
	}
	return detect, recover
}

func TestProbeKill9(t *testing.T) {
	mariadbtest.Require(t)
	for _, tc := range []struct {
		name   string
		socket bool
		n      int
	}{{"tcp", false, 20}, {"unix", true, 5}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mariadbtest.Start(t, mariadbtest.Options{})
			createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
			_, rec := startProbe(t, srv, func(c *Config) {
				if tc.socket {
					c.Host, c.Port, c.Socket = "", 0, srv.Socket()
				}
			})
			detect, recover := killTrials(t, srv, rec, trials(tc.n))
			t.Logf("kill -9 -> critical over %s: %s", tc.name, distribution(detect))
			t.Logf("restarted (ready) -> passing: %s", distribution(recover))
			// Generous bounds for a shared, noisy machine; typical is ~1 ms.
			if p := percentile(detect, 0.5); p > 300*time.Millisecond {
				t.Errorf("kill -9 -> critical p50 %s, want well under an interval", p)
			}
			if m := percentile(detect, 1); m > 2*time.Second {
				t.Errorf("kill -9 -> critical max %s", m)
			}
		})
	}
}

func TestProbeSigstop(t *testing.T) {
	mariadbtest.Require(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
	p, rec := startProbe(t, srv, nil)
	rec.await(t, 0, 10*time.Second, "state passing", isState(StatePassing))
	cfg := p.cfg
	bound := cfg.Interval + time.Duration(cfg.Fall)*cfg.Timeout
	var detect, recover []time.Duration
	for i := range trials(5) {
		time.Sleep(time.Duration(37*i%250) * time.Millisecond)
		m := rec.mark()
		t0 := time.Now()
		srv.Stop()
		e := rec.await(t, m, 10*time.Second, "state critical", isState(StateCritical))
		d := e.at.Sub(t0)
		detect = append(detect, d)
		if e.Status.Reason != ReasonTimeout {
			t.Errorf("trial %d: critical with reason %s (%s), want timeout", i, e.Status.Reason, e.Status.Message)
		}
		if d < cfg.Timeout {
			t.Errorf("trial %d: critical after %s, faster than one timeout: not detected by timeout?", i, d)
		}
		srv.Cont()
		t1 := time.Now()
		e = rec.await(t, rec.mark(), 10*time.Second, "state passing", isState(StatePassing))
		recover = append(recover, e.at.Sub(t1))
	}
	t.Logf("SIGSTOP -> critical: %s (bound interval+fall*timeout = %s)", distribution(detect), bound)
	t.Logf("SIGCONT -> passing: %s (reconnect back-off up to %s)", distribution(recover), cfg.ReconnectMax)
	if m := percentile(detect, 1); m > bound+time.Second {
		t.Errorf("SIGSTOP -> critical max %s, want <= %s + 1s slack", m, bound)
	}
}
