package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

// The conversions from the agent's read models (package view) to the
// public wire types (pkg/client): the one place where the two meet. They
// keep nil and empty apart (a nil list stays null or omitted, an empty one
// stays []), so that the JSON is what the agent's values say. A test
// (convert_test.go) fills every field of each view and checks that every
// field of its client type is set.

// each converts a slice with f, nil staying nil.
func each[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// durationText is d as the API shows it: "" for none.
func durationText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

func toInfo(in view.Info) client.Info {
	t := in.Timings
	return client.Info{
		Node: in.Node, Addr: in.Addr, Tags: in.Tags, Status: in.Status,
		Version: in.Version, GoVersion: in.GoVersion, Started: in.Started, Uptime: in.Uptime.String(),
		Profile: in.Profile,
		Timings: client.Timings{
			ProbeInterval: t.ProbeInterval.String(), ProbeTimeout: t.ProbeTimeout.String(),
			SuspicionMult: t.SuspicionMult, SuspicionMaxMult: t.SuspicionMaxMult,
			GossipInterval: t.GossipInterval.String(), GossipNodes: t.GossipNodes,
			RetransmitMult: t.RetransmitMult, IndirectChecks: t.IndirectChecks,
			PushPullInterval: t.PushPullInterval.String(), ReconnectInterval: t.ReconnectInterval.String(),
		},
		Encrypted: in.Encrypted, KeyringFile: in.KeyringFile, KeyWarning: in.KeyWarning,
		Snapshot: in.Snapshot, HTTPAddr: in.HTTPAddr, RPCAddr: in.RPCAddr, APITokenFile: in.APITokenFile,
		Join:        toJoin(in.Join),
		HealthScore: in.HealthScore, EventsDrop: in.EventsDrop,
		Publish:   toPublish(in.Publish),
		Serf:      toSerfStats(in.Serf),
		Consensus: toConsensus(in.Consensus),
	}
}

// toConsensus converts the consensus layer; nil (no consensus key) stays
// nil. Its lists and map are never null on the wire: a voter that knows
// no term has []. The raft state is lower case on the wire (leader,
// follower, candidate, shutdown), whatever case raft names it in.
func toConsensus(c *view.Consensus) *client.Consensus {
	if c == nil {
		return nil
	}
	out := &client.Consensus{
		Voter: c.Voter, ID: c.ID, Addr: c.Addr, BootstrapExpect: c.BootstrapExpect, State: strings.ToLower(c.State),
		Leader: c.Leader, LeaderAddr: c.LeaderAddr, Bootstrapped: c.Bootstrapped,
		RaftTerm: c.RaftTerm, LastIndex: c.LastIndex, AppliedIndex: c.AppliedIndex, LastContact: c.LastContact,
		Voters: make([]client.ConsensusVoter, 0, len(c.Voters)), Refused: make(map[string]uint64, len(c.Refused)),
		Terms: make([]client.Term, 0, len(c.Terms)), TermKeys: append([]string{}, c.TermKeys...),
	}
	for _, v := range c.Voters {
		out.Voters = append(out.Voters, client.ConsensusVoter{ID: v.ID, Addr: v.Addr, Leader: v.Leader, Failing: v.Failing, LastContact: v.LastContact})
	}
	maps.Copy(out.Refused, c.Refused)
	out.Failover, out.Failovers = c.Failover, make(map[string]string, len(c.Failovers))
	for k, v := range c.Failovers {
		out.Failovers[k] = v
	}
	if len(c.Returned) > 0 {
		out.Returned = maps.Clone(c.Returned)
	}
	out.Group, out.Groups = c.Group, make([]client.ConsensusGroup, 0, len(c.Groups))
	for _, g := range c.Groups {
		out.Groups = append(out.Groups, client.ConsensusGroup{ID: g.ID, Voters: append([]string{}, g.Voters...)})
	}
	for _, t := range c.Terms {
		out.Terms = append(out.Terms, *toTerm(&t))
	}
	return out
}

func toJoin(j view.JoinStatus) client.JoinStatus {
	return client.JoinStatus{
		Addrs: j.Addrs, Joined: j.Joined, JoinedNodes: j.JoinedNodes, Attempts: j.Attempts,
		LastAttempt: j.LastAttempt, LastError: j.LastError,
	}
}

func toSerfStats(s view.SerfStats) client.SerfStats {
	return client.SerfStats{
		Members: s.Members, Failed: s.Failed, Left: s.Left, HealthScore: s.HealthScore,
		MemberTime: s.MemberTime, EventTime: s.EventTime, QueryTime: s.QueryTime,
		IntentQueue: s.IntentQueue, EventQueue: s.EventQueue, QueryQueue: s.QueryQueue,
		Encrypted: s.Encrypted, CoordinateResets: s.CoordinateResets,
	}
}

func toPublish(p view.PublishStatus) client.PublishStatus {
	return client.PublishStatus{
		OK: p.OK, Error: p.Error, WithheldTags: p.WithheldTags, MinimalHealth: p.MinimalHealth,
		Failures: p.Failures, Since: p.Since,
	}
}

func toForceLeave(f view.ForceLeave) client.ForceLeaveResponse {
	return client.ForceLeaveResponse{Node: f.Node, Before: f.Before, Result: f.Result}
}

func toPoolNode(n view.PoolNode) client.PoolNode {
	return client.PoolNode{Cluster: n.Cluster, Name: n.Name, Addr: n.Addr, Reason: n.Reason, Detail: n.Detail, Until: n.Until,
		Lag: toLag(n.Lag)}
}

func toClusterPool(c view.ClusterPool) client.ClusterPool {
	return client.ClusterPool{
		Name: c.Name, Writers: each(c.Writers, toPoolNode), Readers: each(c.Readers, toPoolNode),
		Out: each(c.Out, toPoolNode), Conflict: c.Conflict, Term: toTerm(c.Term), Unsafe: c.Unsafe,
	}
}

// toTerm is a cluster's writer term; nil when it requires none.
func toTerm(t *view.Term) *client.Term {
	if t == nil {
		return nil
	}
	return &client.Term{Cluster: t.Cluster, Term: t.Number, Writer: t.Writer, Addr: t.Addr, Granted: t.Granted, Why: t.Why}
}

func toSinkStatus(s view.SinkStatus) client.SinkStatus {
	return client.SinkStatus{
		Name: s.Name, Target: s.Target, State: s.State, LastSuccess: s.LastSuccess,
		LastError: s.LastError, LastErrorAt: s.LastErrorAt, Failures: s.Failures, Frozen: s.Frozen, Notes: s.Notes,
		AppliedGeneration: s.AppliedGeneration,
	}
}

// ToPool is the pool as GET /v1/pool serves it.
func ToPool(p view.Pool) client.PoolResponse {
	return client.PoolResponse{
		Clusters: each(p.Clusters, toClusterPool),
		Writers:  each(p.Writers, toPoolNode), Readers: each(p.Readers, toPoolNode), Out: each(p.Out, toPoolNode),
		Isolated: p.Isolated, Isolation: p.Isolation, Held: p.Held, UpdatedAt: p.UpdatedAt, Generation: p.Generation,
		Sinks: each(p.Sinks, toSinkStatus),
	}
}

// showFacts sets the fields of dst (a *client.MemberHealth or
// *client.LocalHealth) that the fact schema names (tags.Facts' JSON names)
// to h's facts: the one mapping from the facts to the API, so that a fact
// added to the schema and to the client types needs none here.
// TestFactsReachTheAPI checks that every fact lands in both types; a fact
// whose type does not fit its client field is a bug and panics.
func showFacts(dst any, h tags.Health) {
	b, err := json.Marshal(tags.Show(h))
	if err == nil {
		err = json.Unmarshal(b, dst)
	}
	if err != nil {
		panic(fmt.Sprintf("show health facts as %T: %v", dst, err))
	}
}

// memberHealth is a valid db member's decoded health tag as the API shows it.
func memberHealth(h tags.Health) *client.MemberHealth {
	out := &client.MemberHealth{}
	showFacts(out, h)
	return out
}

// toLocalHealth converts the probe's state; nil (an app agent) stays nil.
// Its facts are those it publishes; state and reason are the probe's (a
// passing probe says why: ok).
func toLocalHealth(h *view.LocalHealth) *client.LocalHealth {
	if h == nil {
		return nil
	}
	out := &client.LocalHealth{}
	showFacts(out, h.Health)
	out.State, out.Reason, out.Message, out.Since, out.Target = h.State, h.Reason, h.Message, h.Since, h.Target
	out.LastCheck, out.LastDuration, out.Checks, out.Connects = h.LastCheck, durationText(h.LastDuration), h.Checks, h.Connects
	out.Reachable, out.Version, out.LastIOError, out.LastSQLError = h.Reachable, h.Version, h.LastIOError, h.LastSQLError
	out.Published, out.GTIDPositionNote = h.Published, h.PositionNote
	if f := h.Fence; f != nil {
		out.Fence = &client.FenceStatus{Time: f.Time, Why: f.Why, Result: f.Result, Error: f.Error, Killed: f.Killed, Attempt: f.Attempt, Retry: f.Retry}
	}
	return out
}

func toMaint(m view.Maint) client.MaintStatus {
	return client.MaintStatus{
		Node: m.Node, Enabled: m.Enabled, Reason: m.Reason, Persisted: m.Persisted, Warning: m.Warning,
		Damped: m.Damped, DampedUntil: m.DampedUntil, DampDetail: m.DampDetail,
	}
}

func toHistoryEntry(e history.Entry) client.HistoryEntry {
	return client.HistoryEntry{
		Seq: e.Seq, Time: e.Time, Kind: string(e.Kind), Cluster: e.Cluster, Node: e.Node,
		From: e.From, To: e.To, Reason: e.Reason, Detail: e.Detail,
	}
}

func toHistory(h view.History) client.HistoryResponse {
	return client.HistoryResponse{
		Entries: each(h.Entries, toHistoryEntry), Capacity: h.Capacity, Total: h.Total, Evicted: h.Evicted, File: h.File,
	}
}

// toHookStats converts the handlers' stats; the list is never null.
func toHookStats(hs []hooks.HandlerStats) []client.HookStats {
	out := make([]client.HookStats, 0, len(hs))
	for _, h := range hs {
		out = append(out, client.HookStats{
			Spec: h.Spec, QueueDepth: h.QueueDepth, QueueMax: h.QueueMax, QueueHigh: h.QueueHigh,
			Queued: h.Queued, Started: h.Started, Ran: h.Ran, Failed: h.Failed, TimedOut: h.TimedOut,
			Coalesced: h.Coalesced, Dropped: h.Dropped, DroppedByReason: h.DroppedByReason, DroppedByClass: h.DroppedByClass,
			Running: h.Running, LastStart: h.LastStart, LastExitCode: h.LastExitCode,
			LastDuration: durationText(h.LastDuration), LastError: h.LastError,
		})
	}
	return out
}

func toFailover(v view.Failover) client.Failover {
	out := client.Failover{Cluster: v.Cluster, Writer: v.Writer, Term: v.Term, Dead: v.Dead, Death: v.Death, DryRun: v.DryRun,
		Candidates: []client.FailoverCandidate{}, Pick: v.Pick, Why: v.Why, Done: v.Done, NewTerm: v.NewTerm, Outcome: v.Outcome}
	for _, c := range v.Candidates {
		out.Candidates = append(out.Candidates, client.FailoverCandidate{Node: c.Node, Position: c.Position, Out: c.Out})
	}
	return out
}

func toSwitchover(v view.Switchover) client.Switchover {
	out := client.Switchover{ID: v.ID, Cluster: v.Cluster, Old: v.Old, Target: v.Target, From: v.From, Term: v.Term,
		Steps: []client.SwitchStep{}, ReadOnlySeconds: v.ReadOnly.Seconds(), Seconds: v.Took.Seconds(), Error: v.Error,
		Routers: client.RoutersApplied{Applied: append([]string{}, v.Routers.Applied...), Pending: v.Routers.Pending,
			Unreachable: v.Routers.Unreachable, Seconds: v.Routers.Took.Seconds()}}
	for _, s := range v.Steps {
		out.Steps = append(out.Steps, client.SwitchStep{Name: s.Name, Node: s.Node, OK: s.OK, Seconds: s.Took.Seconds(), Detail: s.Detail})
	}
	return out
}
