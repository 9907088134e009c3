package agent

import (
	"github.com/shoaldb/shoal/internal/config"
	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/tags"
)

// probeConfig turns the mysql settings into the probe's (config.ProbeConfig,
// which --config-check runs too).
func probeConfig(c *config.Config, getenv func(string) string) (probe.Config, error) {
	return c.ProbeConfig(getenv)
}

// healthFromStatus converts the probe's view to the published health: its
// state, and the latest facts it read (a failed check that read none, while
// the state has not yet moved, publishes the server as it was).
func healthFromStatus(st probe.Status, port int) tags.Health {
	f := st.Known
	h := tags.Health{
		ReadOnly:      f.ReadOnly,
		SuperReadOnly: f.SuperReadOnly,
		Replica:       f.Replication.IsReplica(),
		IORunning:     f.Replication.IORunning,
		SQLRunning:    f.Replication.SQLRunning,
		LagKnown:      f.Replication.LagKnown,
		ServerID:      f.ServerID,
		Galera:        f.Galera.Enabled,
		GaleraSynced:  f.Galera.Healthy(),
		Port:          uint16(port),
	}
	if f.Replication.LagKnown && f.Replication.LagSeconds > 0 {
		h.LagSeconds = uint32(min(f.Replication.LagSeconds, tags.MaxLagSeconds))
	}
	switch st.State {
	case probe.StatePassing:
		h.State = tags.Passing
	case probe.StateWarning:
		h.State = tags.Warning
		h.Reason = string(st.Reason)
	default:
		h.State = tags.Critical
		h.Reason = string(st.Reason)
	}
	return h
}

// onProbe runs on the probe goroutine: record, and wake the publisher.
func (a *Agent) onProbe(e probe.Event) {
	a.countCheck(e)
	if !e.StateChanged && !e.FactsChanged {
		return
	}
	if e.StateChanged {
		a.recordHealth(e)
		a.hookHealth(e)
	}
	a.pub.SetHealth(healthFromStatus(e.Status, a.cfg.MySQLPort()), e.StateChanged)
}

// poolMembers converts serf's member view for pool.Compute, admitting each
// member on the way (member.PoolMember).
func (a *Agent) poolMembers() []pool.Member {
	ms := a.Members()
	out := make([]pool.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, gossiped.PoolMember(m))
	}
	return out
}

// Router returns the agent's pool router.
func (a *Agent) Router() *routing.Router { return a.pool.router }

// ProbeStatus returns the local probe's status, and false on an app agent.
func (a *Agent) ProbeStatus() (probe.Status, bool) {
	if a.probe == nil {
		return probe.Status{}, false
	}
	return a.probe.Status(), true
}
