package agent

import "github.com/shoaldb/shoal/internal/agent/leave"

// The graceful leave is package leave's: the agent hands it serf's agent
// and leave_timeout.

// Leave leaves the cluster gracefully, bounded by leave_timeout. Only the
// first call leaves; every call returns its outcome.
func (a *Agent) Leave() error { return a.leave.Leave(a.leaveTarget(), a.cfg.LeaveTimeout) }

// LeaveForRPC is the Serf RPC's leave: the graceful leave, whose outcome
// the client gets; the gate then calls RequestLeave, so that a leave over
// the RPC ends the process through the normal exit, as cleanly as `shoal
// leave`. It returns early, with an error, if the agent shuts down
// meanwhile (a second signal).
func (a *Agent) LeaveForRPC() error {
	return a.leave.LeaveForRPC(a.leaveTarget(), a.cfg.LeaveTimeout)
}

// leaveTarget is serf's agent, or nil before it exists.
func (a *Agent) leaveTarget() leave.Target {
	if a.mesh.sa == nil {
		return nil
	}
	return a.mesh.sa
}
