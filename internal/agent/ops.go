package agent

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"time"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/agent/leave"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/version"
	"github.com/shoaldb/shoal/internal/view"
)

// Info returns the agent's description.
func (a *Agent) Info(httpAddr string) view.Info {
	s := a.Serf()
	local := s.LocalMember()
	sc := a.mesh.sa.SerfConfig()
	mc := sc.MemberlistConfig
	join := a.join.snapshot()
	return view.Info{
		Node:         local.Name,
		Addr:         net.JoinHostPort(local.Addr.String(), strconv.Itoa(int(local.Port))),
		Tags:         local.Tags,
		Status:       s.State().String(),
		Version:      version.Version,
		GoVersion:    runtime.Version(),
		Started:      a.life.started,
		Uptime:       a.clock.Since(a.life.started).Round(time.Second),
		Profile:      a.cfg.Profile,
		Encrypted:    s.EncryptionEnabled(),
		KeyringFile:  a.cfg.KeyringFile,
		KeyWarning:   a.mesh.keyWarning,
		Snapshot:     a.cfg.Snapshot,
		HTTPAddr:     httpAddr,
		RPCAddr:      a.RPCAddr(),
		APITokenFile: a.rpc.tokenFile,
		Join:         join,
		HealthScore:  s.Memberlist().GetHealthScore(),
		EventsDrop:   a.mesh.events.dropped.Load(),
		Publish:      a.PublishStatus(),
		Serf:         view.ParseSerfStats(s.Stats()),
		Consensus:    a.consensusInfo(),
		Timings: view.Timings{
			ProbeInterval:     mc.ProbeInterval,
			ProbeTimeout:      mc.ProbeTimeout,
			SuspicionMult:     mc.SuspicionMult,
			SuspicionMaxMult:  mc.SuspicionMaxTimeoutMult,
			GossipInterval:    mc.GossipInterval,
			GossipNodes:       mc.GossipNodes,
			RetransmitMult:    mc.RetransmitMult,
			IndirectChecks:    mc.IndirectChecks,
			PushPullInterval:  mc.PushPullInterval,
			ReconnectInterval: sc.ReconnectInterval,
		},
	}
}

// Members returns serf's member list.
//
// With gossip.confirm_failures, a member whose failure is not yet confirmed
// by this agent's own pings is shown alive (see gossip.Gate).
func (a *Agent) Members() []serf.Member {
	ms := a.Serf().Members()
	if a.mesh.gate != nil {
		ms = a.mesh.gate.Overlay(ms)
	}
	return ms
}

// Join contacts the given addresses; replay asks for old user events.
// serf's error lists every address that failed, on several lines: it is
// made one line.
func (a *Agent) Join(addrs []string, replay bool) (int, error) {
	n, err := a.joinCounted(addrs, replay)
	if err != nil {
		err = flatten(err)
	}
	return n, err
}

// ForceLeave marks a failed member as left; prune removes it entirely.
// node is a member's name or its display form (see leave.PlanForce); an
// unknown node is an error wrapping view.ErrNoSuchMember. An alive member
// is never touched: the answer says so.
func (a *Agent) ForceLeave(node string, prune bool) (view.ForceLeave, error) {
	name, act, resp, err := leave.PlanForce(a.Serf().Members(), node, prune)
	switch {
	case err != nil:
		return view.ForceLeave{}, err
	case act == leave.ForcePrune:
		err = a.mesh.sa.ForceLeavePrune(name)
	case act == leave.ForceLeft:
		err = a.mesh.sa.ForceLeave(name)
	case resp.Before == serf.StatusAlive.String():
		a.log.Info("force-leave of an alive member: nothing done", "member", resp.Node, "prune", prune)
	}
	if err != nil {
		return view.ForceLeave{}, err
	}
	return resp, nil
}

// UserEvent broadcasts a user event.
func (a *Agent) UserEvent(name string, payload []byte, coalesce bool) error {
	return a.mesh.sa.UserEvent(name, payload, coalesce)
}

// Query starts a query; read the responses from the returned value.
func (a *Agent) Query(name string, payload []byte, params *serf.QueryParam) (*serf.QueryResponse, error) {
	return a.mesh.sa.Query(name, payload, params)
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
		return a.mesh.sa.InstallKey(key)
	case "use":
		return a.mesh.sa.UseKey(key)
	case "remove":
		return a.mesh.sa.RemoveKey(key)
	case "list":
		return a.mesh.sa.ListKeys()
	}
	return nil, fmt.Errorf("unknown key operation %q", op)
}

type monitorHandler struct{ f func(line string) }

func (m *monitorHandler) HandleLog(line string) { m.f(line) }

// Monitor streams the agent's log lines (the recent ones first) to f until
// the returned function is called. f must not block.
func (a *Agent) Monitor(f func(line string)) (stop func()) {
	h := &monitorHandler{f: f}
	a.rpc.monitor.RegisterHandler(sagent.LogHandler(h))
	return func() { a.rpc.monitor.DeregisterHandler(h) }
}
