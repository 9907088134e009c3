package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/internal/config"
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
// state (role, cluster, health, maintenance).
func (a *Agent) fullTags(user map[string]string) (map[string]string, error) {
	a.mu.Lock()
	var h *tags.Health
	if a.role == tags.RoleDB {
		hh := a.health
		h = &hh
	}
	maint := a.maint
	a.mu.Unlock()
	return tags.Merge(user, a.role, a.cfg.Cluster, h, maint)
}

// probeConfig turns the mysql settings into the probe's, reading the
// password from the password file, the environment or the option file.
func probeConfig(c *config.Config, getenv func(string) string) (probe.Config, error) {
	pc := probe.DefaultConfig()
	if c.MySQL.OptionFile != "" {
		opts, err := probe.LoadOptionFile(c.MySQL.OptionFile)
		if err != nil {
			return pc, fmt.Errorf("mysql.option_file: %w", err)
		}
		pc = opts.Fill(pc)
	}
	if c.MySQL.Addr != "" {
		host, port, _ := net.SplitHostPort(c.MySQL.Addr)
		pc.Host = host
		pc.Port, _ = strconv.Atoi(port)
		pc.Socket = ""
	}
	if c.MySQL.Socket != "" {
		pc.Socket, pc.Host = c.MySQL.Socket, ""
	}
	if c.MySQL.User != "" {
		pc.User = c.MySQL.User
	}
	switch {
	case c.MySQL.PasswordFile != "":
		pw, err := probe.PasswordFromFile(c.MySQL.PasswordFile)
		if err != nil {
			return pc, fmt.Errorf("mysql.password_file: %w", err)
		}
		pc.Password = pw
	case getenv("SHOAL_MYSQL_PASSWORD") != "":
		pc.Password = getenv("SHOAL_MYSQL_PASSWORD")
	}
	pc.Interval, pc.Timeout, pc.Rise, pc.Fall = c.MySQL.Interval, c.MySQL.Timeout, c.MySQL.Rise, c.MySQL.Fall
	pc = pc.WithDefaults()
	if err := pc.Validate(); err != nil {
		return pc, fmt.Errorf("mysql: %w", err)
	}
	return pc, nil
}

// healthFromStatus converts the probe's view to the published health.
func healthFromStatus(st probe.Status, port int) tags.Health {
	f := st.Last.Facts
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

// publishLoop gossips the agent's tags whenever they change, off the
// probe's goroutine (serf's SetTags waits for the broadcast to be queued).
func (a *Agent) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.dirty:
		}
		if err := a.publish(nil); err != nil {
			a.log.Error("publish tags", "err", err)
		}
	}
}

// publish gossips the full tag set built from the agent's state and the user
// tags: user when not nil, else the user tags currently published. Every
// writer of the local tags goes through here, one at a time, so that a
// health publish never overwrites a concurrent maintenance or tag change with
// the state it read before.
func (a *Agent) publish(user map[string]string) error {
	a.pubMu.Lock()
	defer a.pubMu.Unlock()
	cur := a.Serf().LocalMember().Tags
	if user == nil {
		user = userTags(cur)
	}
	next, err := a.fullTags(user)
	if err != nil {
		return err
	}
	if maps.Equal(cur, next) {
		return nil
	}
	start := time.Now()
	if err := a.Serf().SetTags(next); err != nil {
		return fmt.Errorf("set tags: %w", err)
	}
	a.log.Debug("published tags", "health", next[tags.KeyHealth], "took", time.Since(start))
	a.router.Trigger()
	return nil
}

// poolMembers converts serf's member view for pool.Compute. A member's
// routing address is its gossip IP with the MySQL port it publishes.
func (a *Agent) poolMembers() []pool.Member {
	ms := a.Members()
	out := make([]pool.Member, 0, len(ms))
	for _, m := range ms {
		port := "3306"
		if v, ok := m.Tags[tags.KeyHealth]; ok {
			if h, err := tags.Decode(v); err == nil && h.Port != 0 {
				port = strconv.Itoa(int(h.Port))
			}
		}
		out = append(out, pool.Member{
			Name:   m.Name,
			Addr:   net.JoinHostPort(m.Addr.String(), port),
			Status: pool.Status(m.Status),
			Tags:   m.Tags,
		})
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
