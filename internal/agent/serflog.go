package agent

import (
	"io"
	"log/slog"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/logging"
)

// newSerfOut is serf's and memberlist's log output: their lines into the
// agent's log, relevelled (serfLogLevel) and watched (observeSerfLog),
// behind a throttle for the lines a flood of bad packets or streams makes
// (gossip.LogThrottle).
func (a *Agent) newSerfOut() io.Writer {
	return gossip.NewLogThrottle(&logging.StdWriter{Logger: a.logs.Logger, Observe: a.observeSerfLog, Relevel: a.serfLogLevel})
}

// observeSerfLog watches serf's log for the timeouts of its leave
// (leave.Leaver.ObserveLog) and for a conflict over our own name, which serf
// reports only there (gossip.Conflicts).
func (a *Agent) observeSerfLog(_ slog.Level, component, msg string) {
	a.leave.ObserveLog(component, msg)
	a.join.conflicts.Observe(component, msg)
}

// serfLogLevel is the level a serf or memberlist log line is logged at (see
// gossip.SerfLogLevel).
func (a *Agent) serfLogLevel(lv slog.Level, component, msg string) slog.Level {
	return gossip.SerfLogLevel(lv, component, msg, a.isStopping(), a.leave.Completed())
}

// isStopping reports whether Shutdown has begun.
func (a *Agent) isStopping() bool {
	select {
	case <-a.life.stopping:
		return true
	default:
		return false
	}
}
