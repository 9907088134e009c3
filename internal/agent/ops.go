package agent

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime"
	"strconv"
	"time"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/version"
	"github.com/shoaldb/shoal/internal/view"
)

// Info returns the agent's description.
func (a *Agent) Info(httpAddr string) view.Info {
	s := a.Serf()
	local := s.LocalMember()
	sc := a.sa.SerfConfig()
	mc := sc.MemberlistConfig
	a.mu.Lock()
	join := a.join
	join.Addrs = append([]string(nil), join.Addrs...)
	a.mu.Unlock()
	return view.Info{
		Node:         local.Name,
		Addr:         net.JoinHostPort(local.Addr.String(), strconv.Itoa(int(local.Port))),
		Tags:         local.Tags,
		Status:       s.State().String(),
		Version:      version.Version,
		GoVersion:    runtime.Version(),
		Started:      a.started,
		Uptime:       time.Since(a.started).Round(time.Second),
		Profile:      a.cfg.Profile,
		Encrypted:    s.EncryptionEnabled(),
		KeyringFile:  a.cfg.KeyringFile,
		KeyWarning:   a.keyWarning,
		Snapshot:     a.cfg.Snapshot,
		HTTPAddr:     httpAddr,
		RPCAddr:      a.RPCAddr(),
		APITokenFile: a.apiTokenFile,
		Join:         join,
		HealthScore:  s.Memberlist().GetHealthScore(),
		EventsDrop:   a.events.dropped.Load(),
		Publish:      a.PublishStatus(),
		Serf:         serfStats(s.Stats()),
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

// serfStats parses serf's counters (serf.Serf.Stats, all strings); a
// counter serf does not report (or reports unparsable) is 0.
func serfStats(m map[string]string) view.SerfStats {
	n := func(k string) int { v, _ := strconv.Atoi(m[k]); return v }
	u := func(k string) uint64 { v, _ := strconv.ParseUint(m[k], 10, 64); return v }
	return view.SerfStats{
		Members: n("members"), Failed: n("failed"), Left: n("left"), HealthScore: n("health_score"),
		MemberTime: u("member_time"), EventTime: u("event_time"), QueryTime: u("query_time"),
		IntentQueue: n("intent_queue"), EventQueue: n("event_queue"), QueryQueue: n("query_queue"),
		Encrypted: m["encrypted"] == "true", CoordinateResets: u("coordinate_resets"),
	}
}

// Members returns serf's member list.
//
// With gossip.confirm_failures, a member whose failure is not yet confirmed
// by this agent's own pings is shown alive (see gossip.Gate).
func (a *Agent) Members() []serf.Member {
	ms := a.Serf().Members()
	if a.gate != nil {
		ms = a.gate.Overlay(ms)
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
// node is a member's name or its display form (member.Escape, what
// `shoal members` shows), so that a member whose raw name cannot travel in
// a JSON string (invalid UTF-8) can still be named; serf gets the raw name.
//
// An unknown node is an error wrapping api.ErrNoSuchMember. An alive
// member is never touched (serf would mark it leaving everywhere until it
// refutes, taking it out of the pool meanwhile): the answer says so.
func (a *Agent) ForceLeave(node string, prune bool) (view.ForceLeave, error) {
	ms := a.Serf().Members()
	name, err := resolveName(ms, node)
	if err != nil {
		return view.ForceLeave{}, err
	}
	var m *serf.Member
	for i := range ms {
		if ms[i].Name == name {
			m = &ms[i]
			break
		}
	}
	if m == nil {
		return view.ForceLeave{}, fmt.Errorf("%w %q (shoal members lists the members)", api.ErrNoSuchMember, node)
	}
	resp := view.ForceLeave{Node: gossiped.Escape(name), Before: m.Status.String(), Result: view.ForceLeaveUnchanged}
	switch {
	case m.Status == serf.StatusAlive:
		a.log.Info("force-leave of an alive member: nothing done", "member", resp.Node, "prune", prune)
		return resp, nil
	case prune:
		resp.Result = view.ForceLeavePruned
		err = a.sa.ForceLeavePrune(name)
	case m.Status == serf.StatusFailed:
		resp.Result = view.ForceLeaveLeft
		err = a.sa.ForceLeave(name)
	default: // leaving or left: serf would change nothing
		return resp, nil
	}
	if err != nil {
		return view.ForceLeave{}, err
	}
	return resp, nil
}

// resolveName returns the raw name of the member node names: the member of
// that exact name, else the one whose display form is node. An unknown
// node is returned as it is.
func resolveName(ms []serf.Member, node string) (string, error) {
	var byDisplay []string
	for _, m := range ms {
		if m.Name == node {
			return node, nil
		}
		if gossiped.Escape(m.Name) == node {
			byDisplay = append(byDisplay, m.Name)
		}
	}
	switch len(byDisplay) {
	case 0:
		return node, nil
	case 1:
		return byDisplay[0], nil
	}
	return "", fmt.Errorf("node %q: the display name of %d members; remove them with the serf RPC by raw name", node, len(byDisplay))
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
// shoal's own keys (role, cluster, maint, sh) cannot be changed this way,
// and the result must fit in the user tag budget.
func (a *Agent) UpdateTags(set map[string]string, del []string) (map[string]string, error) {
	user, err := a.tagChange(set, del)
	if err != nil {
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

// CheckTagChange reports whether setting set and deleting del on the local
// user tags is allowed: no reserved key, valid keys and values, and the
// result within the user tag budget, so that the health tag always fits
// beside them. Every entry point that changes tags (HTTP API, Serf RPC)
// calls it before changing anything.
func (a *Agent) CheckTagChange(set map[string]string, del []string) error {
	_, err := a.tagChange(set, del)
	return err
}

// tagChange returns the wanted user tags with set and del applied, or why
// that is not allowed.
func (a *Agent) tagChange(set map[string]string, del []string) (map[string]string, error) {
	for _, k := range del {
		if tags.IsReserved(k) {
			return nil, fmt.Errorf("tag %q is reserved by shoal and cannot be deleted", k)
		}
	}
	user := a.wantedUserTags()
	if user == nil {
		user = map[string]string{}
	}
	maps.Copy(user, set)
	for _, k := range del {
		delete(user, k)
	}
	if err := tags.CheckUserTags(user); err != nil {
		return nil, err
	}
	// The rules every agent applies to gossiped tags (package member): an
	// agent never publishes tags that make it bad-tags everywhere else.
	if d := gossiped.CheckTags(user); d != "" {
		return nil, errors.New(d)
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
