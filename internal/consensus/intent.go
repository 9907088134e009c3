package consensus

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// A switchover's intent (docs/consensus.md, "Switchover") is recorded in
// the raft log before its first step: the grant it leads to requires it,
// and it ends when the switchover does. While it is recorded, the leader
// decides no other term for the cluster; should the agent that runs it
// die or pass its deadline, the leader rolls it back (before the grant:
// the intent ends first, so that no grant of it can follow, then the old
// writer is made writable again) or completes it (after the grant).

// SwitchIntent is a switchover recorded in raft.
type SwitchIntent struct {
	ID      string `json:"id"` // 16 hex digits, the switchover's ID
	Cluster string `json:"cluster"`
	From    uint64 `json:"from"` // the term the switchover starts from; Old holds it
	Old     string `json:"old"`
	Target  string `json:"target"`
	Addr    string `json:"addr"` // the target's MySQL address
	By      string `json:"by"`   // the agent that runs it
	// Started and Deadline are set by the leader before it applies the
	// intent (Apply reads no clock): past Deadline, the leader finishes it.
	Started  time.Time `json:"started"`
	Deadline time.Time `json:"deadline"`
	// Granted is set by the FSM when the intent's grant is applied: from
	// then on it can only be completed.
	Granted bool `json:"granted,omitempty"`
	// Kind is KindFailover for a failover, "" for a switchover. A
	// failover's old writer is dead: it is never demoted nor restored.
	// (A voter of an earlier release ignores the field and records the
	// intent as a switchover: the grant that follows is the same.)
	Kind string `json:"kind,omitempty"`
	// Position is a failover's promotion position: the target's GTID
	// position (gtid_current_pos) when it was chosen, and OldServerID the
	// dead writer's server_id. Once the grant is applied they are the
	// cluster's Failover record: a returning old writer's transactions
	// beyond Position were never on the new writer (lost), and it rejoins
	// only without any.
	Position    string `json:"position,omitempty"`
	OldServerID uint32 `json:"old_server_id,omitempty"`
	// Timers are the target's replication timers as a replica (from the
	// survey): the old writer rejoins with them.
	Timers *ReplTimers `json:"timers,omitempty"`
}

// Failover is the record of the latest failover of a cluster, kept in the
// FSM once its grant is applied: the term it granted, the dead writer and
// its server_id, the new writer and its GTID position at the promotion.
type Failover struct {
	Cluster     string `json:"cluster"`
	Term        uint64 `json:"term"`
	Old         string `json:"old"`
	OldServerID uint32 `json:"old_server_id,omitempty"`
	Target      string `json:"target"`
	Position    string `json:"position"`
	// Timers: the target's replication timers (nil: unknown), which a
	// rejoining old writer takes.
	Timers *ReplTimers `json:"timers,omitempty"`
}

// maxPosition bounds a promotion position: a GTID list of a few domains.
const maxPosition = 512

// validPosition: at most maxPosition bytes of digits, '-' and ','.
func validPosition(p string) bool {
	if len(p) > maxPosition {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < '0' || c > '9') && c != '-' && c != ',' {
			return false
		}
	}
	return true
}

// KindFailover marks the intent of a failover (docs/consensus.md,
// "Failover"): the raft leader runs it, after the writer's death was
// confirmed, to the most advanced replica.
const KindFailover = "failover"

// maxOutcome bounds the outcome an intent ends with.
const maxOutcome = 250

// ShortenOutcome cuts an outcome to what an end step and its raft entry
// take, on a rune boundary.
func ShortenOutcome(s string) string { return shortenTo(s, maxOutcome) }

// Check validates an intent's fields.
func (in SwitchIntent) Check() error {
	switch {
	case len(in.ID) != 16 || !isHex(in.ID):
		return fmt.Errorf("switchover ID %.40q: want 16 hex digits", in.ID)
	case !tags.ValidCluster(in.Cluster):
		return fmt.Errorf("switchover cluster %.80q: not a valid cluster name", in.Cluster)
	case in.From == 0:
		return fmt.Errorf("switchover of %q: no term to start from", in.Cluster)
	case in.Kind != "" && in.Kind != KindFailover:
		return fmt.Errorf("switchover of %q: kind %.40q unknown", in.Cluster, in.Kind)
	case in.Old == in.Target:
		return fmt.Errorf("switchover of %q: the target is the old writer", in.Cluster)
	case !validPosition(in.Position):
		return fmt.Errorf("switchover of %q: position %.80q: want a GTID list (at most %d bytes)", in.Cluster, in.Position, maxPosition)
	case !in.Deadline.After(in.Started):
		return fmt.Errorf("switchover of %q: deadline %s not after its start %s", in.Cluster, in.Deadline, in.Started)
	}
	for _, n := range []struct{ what, name string }{{"by", in.By}, {"old writer", in.Old}, {"target", in.Target}} {
		if d := member.CheckName(n.name); d != "" {
			return fmt.Errorf("switchover %s: %s", n.what, d)
		}
	}
	if _, port, err := net.SplitHostPort(in.Addr); err != nil || port == "" || len(in.Addr) > maxName {
		return fmt.Errorf("switchover target address %.80q: want host:port", in.Addr)
	}
	return nil
}

// Errors of the switchover intents (wrapped: test with errors.Is).
var (
	// ErrSwitchBusy: another switchover of the cluster is recorded.
	ErrSwitchBusy = errors.New("another switchover of the cluster is recorded")
	// ErrSwitchGranted: a rollback of a switchover whose grant is
	// applied: too late, it can only be completed.
	ErrSwitchGranted = errors.New("the switchover's term is granted already")
	// ErrNoSwitch: no switchover of that ID is recorded for the cluster.
	ErrNoSwitch = errors.New("no such switchover is recorded")
)

// switchEnd is the end of a recorded switchover.
type switchEnd struct {
	Cluster  string `json:"cluster"`
	ID       string `json:"id"`
	Outcome  string `json:"outcome,omitempty"`
	Rollback bool   `json:"rollback,omitempty"`
}

// EncodeSwitchBegin encodes a switchover's intent as a raft log entry.
func EncodeSwitchBegin(in SwitchIntent) ([]byte, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	return json.Marshal(command{V: commandVersion, Op: opSwitch, Switch: &in})
}

// EncodeSwitchEnd encodes the end of a switchover as a raft log entry:
// rolled back (rollback) or done.
func EncodeSwitchEnd(cluster, id, outcome string, rollback bool) ([]byte, error) {
	if len(outcome) > maxOutcome {
		return nil, fmt.Errorf("switchover outcome of %d bytes, more than %d", len(outcome), maxOutcome)
	}
	return json.Marshal(command{V: commandVersion, Op: opSwitchEnd, End: &switchEnd{Cluster: cluster, ID: id, Outcome: outcome, Rollback: rollback}})
}

// EncodeGrantSwitch encodes the grant of a recorded switchover.
func EncodeGrantSwitch(id string, g pool.Grant) ([]byte, error) {
	b, err := EncodeGrant(g)
	if err != nil {
		return nil, err
	}
	var c command
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	c.SwitchID = id
	return json.Marshal(c)
}

// beginSwitch records an intent (the same ID again changes nothing).
func (f *FSM) beginSwitch(in SwitchIntent) (SwitchIntent, error) {
	if err := in.Check(); err != nil {
		return SwitchIntent{}, err
	}
	in.Granted = false
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.switches[in.Cluster]; ok {
		if cur.ID == in.ID {
			return cur, nil
		}
		return SwitchIntent{}, fmt.Errorf("%w: switchover %s by %s to %s", ErrSwitchBusy, cur.ID, cur.By, cur.Target)
	}
	if t := f.terms[in.Cluster]; t.Number != in.From || t.Writer != in.Old {
		return SwitchIntent{}, fmt.Errorf("switchover of %q from term %d held by %s: %w (it is %d held by %s)", in.Cluster, in.From, in.Old, ErrStale, t.Number, t.Writer)
	}
	if len(f.switches) >= maxClusters {
		return SwitchIntent{}, fmt.Errorf("switchover of %q: already %d recorded", in.Cluster, maxClusters)
	}
	f.switches[in.Cluster] = in
	return in, nil
}

// endSwitch ends a recorded intent; a rollback only before its grant.
func (f *FSM) endSwitch(e switchEnd) (SwitchIntent, error) {
	if len(e.Outcome) > maxOutcome {
		return SwitchIntent{}, fmt.Errorf("switchover outcome of %d bytes, more than %d", len(e.Outcome), maxOutcome)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.switches[e.Cluster]
	switch {
	case !ok || cur.ID != e.ID:
		return SwitchIntent{}, fmt.Errorf("switchover %.40q of %.80q: %w", e.ID, e.Cluster, ErrNoSwitch)
	case e.Rollback && cur.Granted:
		return SwitchIntent{}, fmt.Errorf("rollback of switchover %s of %q: %w (term %d to %s)", cur.ID, cur.Cluster, ErrSwitchGranted, cur.From+1, cur.Target)
	}
	delete(f.switches, e.Cluster)
	return cur, nil
}

// checkSwitchGrant says whether a grant with a switchover's id may be
// applied (f.mu held), and returns the intent to mark granted. A grant
// without one is applied as before, intent or not: a voter of an earlier
// release, which knows no intents, applies it too, and every voter must
// hold the same terms. The leader decides no term for a cluster with a
// recorded switchover (loop.go); should such a grant land anyway, the
// switchover's own grant finds the term moved (ErrStale) and nothing is
// restored (the old writer no longer holds the term).
func (f *FSM) checkSwitchGrant(id string, g pool.Grant) (SwitchIntent, bool, error) {
	cur, ok := f.switches[g.Term.Cluster]
	switch {
	case id == "":
		return SwitchIntent{}, false, nil
	case !ok || cur.ID != id:
		return SwitchIntent{}, false, fmt.Errorf("grant of switchover %.40q in %q: %w", id, g.Term.Cluster, ErrNoSwitch)
	case cur.From != g.Expect || cur.Target != g.Term.Writer || f.terms[g.Term.Cluster].Writer != cur.Old:
		return SwitchIntent{}, false, fmt.Errorf("grant of term %d to %s in %q does not match switchover %s (term %d from %s to %s)",
			g.Term.Number, g.Term.Writer, g.Term.Cluster, cur.ID, cur.From, cur.Old, cur.Target)
	}
	return cur, true, nil
}

// Switches returns a copy of the recorded switchovers, by cluster.
func (f *FSM) Switches() map[string]SwitchIntent {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]SwitchIntent, len(f.switches))
	for c, in := range f.switches {
		out[c] = in
	}
	return out
}

// Switch returns the cluster's recorded switchover, if any.
func (f *FSM) Switch(cluster string) (SwitchIntent, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	in, ok := f.switches[cluster]
	return in, ok
}
