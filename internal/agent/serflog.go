package agent

import (
	"log/slog"

	"github.com/shoaldb/shoal/internal/gossip"
)

// observeSerfLog watches serf's log for the timeouts of its leave
// (observeLeaveLog) and for a conflict over our own name, which serf
// reports only there (gossip.Conflicts).
func (a *Agent) observeSerfLog(_ slog.Level, component, msg string) {
	a.observeLeaveLog(component, msg)
	a.conflicts.Observe(component, msg)
}

// serfLogLevel is the level a serf or memberlist log line is logged at (see
// gossip.SerfLogLevel).
func (a *Agent) serfLogLevel(lv slog.Level, component, msg string) slog.Level {
	return gossip.SerfLogLevel(lv, component, msg, a.isStopping())
}

// isStopping reports whether Shutdown has begun.
func (a *Agent) isStopping() bool {
	select {
	case <-a.stopping:
		return true
	default:
		return false
	}
}
