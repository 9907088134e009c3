package agent

import (
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/gossip"
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
	h := e.Status.Health(a.mysqlPort())
	a.pub.SetHealth(h, e.StateChanged)
	if a.cfg.Gossip.Positions != gossip.PositionsTags {
		a.mesh.pos.Publish(h.Position, !h.ReadOnly)
	}
}

// poolMembers converts serf's member view for pool.Compute, admitting each
// member on the way (member.FromSerf).
func (a *Agent) poolMembers() []pool.Member {
	ms := a.Members()
	out := make([]pool.Member, 0, len(ms))
	for _, m := range ms {
		pm := gossiped.FromSerf(m).Pool()
		a.streamPosition(&pm)
		out = append(out, pm)
	}
	return out
}

// streamPosition gives m the position stream's newest position of it,
// when that covers the one its health tag carries (the tag's is kept when
// it is the newer, or when the two differ: a server restored from a
// backup publishes its health, position included, at once).
func (a *Agent) streamPosition(m *pool.Member) {
	if a.mesh.pos == nil || m.Health == nil || m.Bad != pool.ReasonNone {
		return
	}
	s, ok := a.mesh.pos.Latest(m.Name)
	if !ok || s.Pos == m.Health.Position || !s.Pos.Covers(m.Health.Position) {
		return
	}
	h := *m.Health
	h.Position = s.Pos
	m.Health = &h
	m.PosPrev, m.PosPrevAt = s.Prev, s.PrevAt
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
