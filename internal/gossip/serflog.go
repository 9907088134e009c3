package gossip

import (
	"log/slog"
	"strings"
)

// SerfLogLevel is the level a serf or memberlist log line is logged at:
// its own, but for routine lines that would drown the rest. serf logs
// "attempting reconnect" at INFO for every failed member at every
// reconnect_interval (every second with the fast profile, for up to
// reconnect_timeout): DEBUG. Its agent logs "Serf shutdown detected" at
// WARN also when we shut it down (stopping): INFO then. serf warns
// "Shutdown without a Leave" when it is shut down before its own Leave
// returned, and shoal shuts it down as soon as it has decided the leave
// complete (left: see the agent's leave.go), often while serf's Leave still
// waits for a broadcast nobody is left to take or sleeps its propagation
// delay: DEBUG then. A shutdown without a completed leave (a second
// signal, a leave not confirmed) still warns.
func SerfLogLevel(lv slog.Level, component, msg string, stopping, left bool) slog.Level {
	switch {
	case component == "serf" && strings.HasPrefix(msg, "attempting reconnect to "):
		return min(lv, slog.LevelDebug)
	case component == "agent" && msg == "Serf shutdown detected, quitting" && stopping:
		return min(lv, slog.LevelInfo)
	case component == "serf" && msg == serfShutdownWithoutLeave && left:
		return min(lv, slog.LevelDebug)
	}
	return lv
}

// serfShutdownWithoutLeave is serf's warning (serf/serf.go Shutdown) when
// its state is not "left".
const serfShutdownWithoutLeave = "Shutdown without a Leave"

// serf's messages when a leave broadcast was not sent out in time
// (serf/serf.go Leave): after them, serf's nil return does not mean sent.
var serfLeaveTimeouts = []string{
	"timeout while waiting for graceful leave",
	"timeout waiting for leave broadcast",
}

// IsLeaveTimeout reports whether a serf log line says a leave broadcast was
// not sent out in time.
func IsLeaveTimeout(component, msg string) bool {
	if component != "serf" {
		return false
	}
	for _, p := range serfLeaveTimeouts {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
