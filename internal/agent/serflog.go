package agent

import (
	"log/slog"
	"strings"
)

// serfLogLevel is the level a serf or memberlist log line is logged at:
// its own, but for routine lines that would drown the rest. serf logs
// "attempting reconnect" at INFO for every failed member at every
// reconnect_interval (every second with the fast profile, for up to
// reconnect_timeout): DEBUG. Its agent logs "Serf shutdown detected" at
// WARN also when we shut it down: INFO then.
func (a *Agent) serfLogLevel(lv slog.Level, component, msg string) slog.Level {
	switch {
	case component == "serf" && strings.HasPrefix(msg, "attempting reconnect to "):
		return min(lv, slog.LevelDebug)
	case component == "agent" && msg == "Serf shutdown detected, quitting" && a.isStopping():
		return min(lv, slog.LevelInfo)
	}
	return lv
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
