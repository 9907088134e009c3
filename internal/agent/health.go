package agent

import (
	"fmt"

	"github.com/shoaldb/shoal/internal/config"
	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/tags"
)

// userTags returns the tags an operator controls: everything but shoal's
// reserved keys.
func userTags(all map[string]string) map[string]string {
	out := make(map[string]string, len(all))
	for k, v := range all {
		if !tags.IsReserved(k) {
			out[k] = v
		}
	}
	return out
}

// fullTags builds the tag set to gossip from user tags and the agent's own
// state (role, cluster, health, maintenance), and checks it against the
// rules every agent applies to gossiped tags (package member), so that an
// agent never publishes tags that make it bad-tags everywhere.
func (a *Agent) fullTags(user map[string]string) (map[string]string, error) {
	a.mu.Lock()
	var h *tags.Health
	if a.role == tags.RoleDB {
		hh := a.health
		h = &hh
	}
	maint := a.maint
	a.mu.Unlock()
	full, err := tags.Merge(user, a.role, a.cfg.Cluster, h, maint)
	if err != nil {
		return nil, err
	}
	// Never publish tags the other agents would refuse (bad-tags).
	if d := gossiped.CheckTags(full); d != "" {
		return nil, fmt.Errorf("tags: %s", d)
	}
	return full, nil
}

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
	h := healthFromStatus(e.Status, a.cfg.MySQLPort())
	a.mu.Lock()
	seq := a.health.Seq
	if e.StateChanged {
		seq++
	}
	h.Seq = seq
	changed := h != a.health
	a.health = h
	a.mu.Unlock()
	if changed {
		a.markDirty()
	}
}

func (a *Agent) markDirty() {
	select {
	case a.dirty <- struct{}{}:
	default:
	}
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
func (a *Agent) Router() *routing.Router { return a.router }

// ProbeStatus returns the local probe's status, and false on an app agent.
func (a *Agent) ProbeStatus() (probe.Status, bool) {
	if a.probe == nil {
		return probe.Status{}, false
	}
	return a.probe.Status(), true
}
