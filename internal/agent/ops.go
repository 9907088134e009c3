package agent

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/version"
	"github.com/shoaldb/shoal/pkg/client"
)

// Info returns the agent's description.
func (a *Agent) Info(httpAddr string) client.Info {
	s := a.Serf()
	local := s.LocalMember()
	sc := a.sa.SerfConfig()
	mc := sc.MemberlistConfig
	a.mu.Lock()
	join := a.join
	join.Addrs = append([]string(nil), join.Addrs...)
	a.mu.Unlock()
	return client.Info{
		Node:        local.Name,
		Addr:        fmt.Sprintf("%s:%d", local.Addr, local.Port),
		Tags:        local.Tags,
		Status:      s.State().String(),
		Version:     version.Version,
		GoVersion:   runtime.Version(),
		Started:     a.started,
		Uptime:      time.Since(a.started).Round(time.Second).String(),
		Profile:     a.cfg.Profile,
		Encrypted:   s.EncryptionEnabled(),
		KeyringFile: a.cfg.KeyringFile,
		KeyWarning:  a.keyWarning,
		Snapshot:    a.cfg.Snapshot,
		HTTPAddr:    httpAddr,
		RPCAddr:     a.RPCAddr(),
		Join:        join,
		HealthScore: s.Memberlist().GetHealthScore(),
		EventsDrop:  a.events.dropped.Load(),
		Serf:        s.Stats(),
		Timings: client.Timings{
			ProbeInterval:     mc.ProbeInterval.String(),
			ProbeTimeout:      mc.ProbeTimeout.String(),
			SuspicionMult:     mc.SuspicionMult,
			SuspicionMaxMult:  mc.SuspicionMaxTimeoutMult,
			GossipInterval:    mc.GossipInterval.String(),
			GossipNodes:       mc.GossipNodes,
			RetransmitMult:    mc.RetransmitMult,
			IndirectChecks:    mc.IndirectChecks,
			PushPullInterval:  mc.PushPullInterval.String(),
			ReconnectInterval: sc.ReconnectInterval.String(),
		},
	}
}

// Members returns serf's member list.
//
// With gossip.confirm_failures, a member whose failure is not yet confirmed
// by this agent's own pings is shown alive (see confirm.go).
func (a *Agent) Members() []serf.Member {
	ms := a.Serf().Members()
	if a.gate != nil {
		ms = a.gate.Overlay(ms)
	}
	return ms
}

// Join contacts the given addresses; replay asks for old user events.
func (a *Agent) Join(addrs []string, replay bool) (int, error) {
	return a.joinCounted(addrs, replay)
}

// ForceLeave marks a failed member as left; prune removes it entirely.
func (a *Agent) ForceLeave(node string, prune bool) error {
	if prune {
		return a.sa.ForceLeavePrune(node)
	}
	return a.sa.ForceLeave(node)
}

// UserEvent broadcasts a user event.
func (a *Agent) UserEvent(name string, payload []byte, coalesce bool) error {
	return a.sa.UserEvent(name, payload, coalesce)
}

// Query starts a query; read the responses from the returned value.
func (a *Agent) Query(name string, payload []byte, params *serf.QueryParam) (*serf.QueryResponse, error) {
	return a.sa.Query(name, payload, params)
}

// UpdateTags sets and deletes user tags, persists them when a tags file is
// configured, and gossips the change. It returns the new user tag set.
// shoal's own keys (role, cluster, maint, sh) cannot be changed this way.
func (a *Agent) UpdateTags(set map[string]string, del []string) (map[string]string, error) {
	user := userTags(a.Serf().LocalMember().Tags)
	for k, v := range set {
		if _, _, err := config.ParseTag(k + "=" + v); err != nil {
			return nil, err
		}
		if tags.IsReserved(k) {
			return nil, fmt.Errorf("tag %q is reserved by shoal", k)
		}
		user[k] = v
	}
	for _, k := range del {
		if tags.IsReserved(k) {
			return nil, fmt.Errorf("tag %q is reserved by shoal", k)
		}
		delete(user, k)
	}
	if _, err := a.fullTags(user); err != nil {
		return nil, err
	}
	if err := a.writeTagsFile(user); err != nil {
		return nil, err
	}
	if err := a.publish(user); err != nil {
		return nil, err
	}
	return user, nil
}

// KeyOp runs a keyring operation across the cluster: install, use, remove
// or list.
func (a *Agent) KeyOp(op, key string) (*serf.KeyResponse, error) {
	if op != "list" {
		if err := config.CheckKey(key); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
	}
	if !a.Serf().EncryptionEnabled() {
		return nil, errors.New("gossip encryption is not enabled on this agent; keys can only be managed on an encrypted cluster")
	}
	switch op {
	case "install":
		return a.sa.InstallKey(key)
	case "use":
		return a.sa.UseKey(key)
	case "remove":
		return a.sa.RemoveKey(key)
	case "list":
		return a.sa.ListKeys()
	}
	return nil, fmt.Errorf("unknown key operation %q", op)
}

type monitorHandler struct{ f func(line string) }

func (m *monitorHandler) HandleLog(line string) { m.f(line) }

// Monitor streams the agent's log lines (the recent ones first) to f until
// the returned function is called. f must not block.
func (a *Agent) Monitor(f func(line string)) (stop func()) {
	h := &monitorHandler{f: f}
	a.monitor.RegisterHandler(sagent.LogHandler(h))
	return func() { a.monitor.DeregisterHandler(h) }
}
