package agent

import (
	"github.com/shoaldb/shoal/internal/config"
	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
)

// probeConfig turns the mysql settings into the probe's (config.ProbeConfig,
// which --config-check runs too).
func probeConfig(c *config.Config, getenv func(string) string) (probe.Config, error) {
	return c.ProbeConfig(getenv)
}

// onProbe runs on the probe goroutine: record, and wake the publisher.
// The publisher sees every check, not only the changed ones: a change of
// the GTID position alone is held back to its cadence (publish.SetHealth),
// and the next check publishes it once the interval is over, even when the
// position has stopped changing by then.
func (a *Agent) onProbe(e probe.Event) {
	a.countCheck(e)
	if e.StateChanged {
		a.recordHealth(e)
		a.hookHealth(e)
	}
	a.pub.SetHealth(e.Status.Health(a.mysqlPort()), e.StateChanged)
}

// poolMembers converts serf's member view for pool.Compute, admitting each
// member on the way (member.FromSerf).
func (a *Agent) poolMembers() []pool.Member {
	ms := a.Members()
	out := make([]pool.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, gossiped.FromSerf(m).Pool())
	}
	return out
}

// Router returns the agent's pool router.
func (a *Agent) Router() *routing.Router { return a.pool.router }

// mysqlPort is the MySQL port this agent publishes.
func (a *Agent) mysqlPort() uint16 { return uint16(a.cfg.MySQLPort()) }

// ProbeStatus returns the local probe's status, and false on an app agent.
func (a *Agent) ProbeStatus() (probe.Status, bool) {
	if a.probe == nil {
		return probe.Status{}, false
	}
	return a.probe.Status(), true
}
