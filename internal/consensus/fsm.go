package consensus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// command is one raft log entry of shoal's: a versioned JSON object, so
// that a later release can add operations an older one refuses by name
// rather than misreads.
type command struct {
	V     int         `json:"v"`
	Op    string      `json:"op"`
	Grant *pool.Grant `json:"grant,omitempty"`
	// Group is the raft group's ID (opGroup): set once, by the first
	// leader, before any grant.
	Group string `json:"group,omitempty"`
	// Switch is a switchover's intent (opSwitch), End its end
	// (opSwitchEnd); SwitchID names the switchover a grant belongs to.
	Switch   *SwitchIntent `json:"switch,omitempty"`
	End      *switchEnd    `json:"end,omitempty"`
	SwitchID string        `json:"switch_id,omitempty"`
}

const (
	commandVersion = 1
	opGrant        = "grant"
	opGroup        = "group"
	opSwitch       = "switch"
	opSwitchEnd    = "switch-end"
	// maxCommand bounds an entry the FSM decodes: a grant is a few hundred
	// bytes.
	maxCommand = 4096
	// maxClusters bounds the terms the FSM keeps (one per cluster).
	maxClusters = 10_000
)

// EncodeGrant encodes a grant as a raft log entry.
func EncodeGrant(g pool.Grant) ([]byte, error) {
	if err := pool.CheckTerm(g.Term); err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	if g.Term.Number != g.Expect+1 {
		return nil, fmt.Errorf("grant of %q: term %d does not follow %d", g.Term.Cluster, g.Term.Number, g.Expect)
	}
	return json.Marshal(command{V: commandVersion, Op: opGrant, Grant: &g})
}

// EncodeGroup encodes the raft group's ID as a raft log entry.
func EncodeGroup(group string) ([]byte, error) {
	if !tags.ValidGroup(group) {
		return nil, fmt.Errorf("raft group %q: want %d lowercase hex digits", group, tags.GroupLen)
	}
	return json.Marshal(command{V: commandVersion, Op: opGroup, Group: group})
}

// ErrNoGroup is what Apply returns for a grant before the raft group has
// an ID: every term names the group that granted it.
var ErrNoGroup = errors.New("the raft group has no ID yet")

// ErrStale is what Apply returns for a grant whose expected term is no
// longer the cluster's: another grant came first.
var ErrStale = errors.New("the cluster's term changed since the grant was decided")

// FSM is the replicated state: the raft group's ID and each cluster's
// current writer term. Every voter applies the same log in the same
// order, so every voter holds the same terms. Safe for concurrent use.
type FSM struct {
	mu       sync.RWMutex // guards terms, group, switches
	terms    map[string]pool.Term
	group    string
	switches map[string]SwitchIntent // recorded switchovers, by cluster
	// failovers: each cluster's latest failover whose grant is applied.
	failovers map[string]Failover
	// onApply, when set, is called (outside the lock) with each term that
	// an applied grant made current.
	onApply func(pool.Term)
}

// NewFSM returns an empty FSM; onApply may be nil. onApply is called
// inline from Apply, on raft's apply goroutine, with each term an applied
// grant made current (also when the log is replayed after a restart; not
// for a snapshot restored): while it runs this voter applies nothing
// more, and a leader's grants wait. It must not block nor do I/O (sign,
// save, broadcast): hand the term on, for example to a TermQueue's Put,
// and do the work on a goroutine of the caller's.
func NewFSM(onApply func(pool.Term)) *FSM {
	return &FSM{terms: map[string]pool.Term{}, switches: map[string]SwitchIntent{}, failovers: map[string]Failover{}, onApply: onApply}
}

// Apply applies one log entry. It returns nil, the granted pool.Term, the
// group's ID (a string) or an error (ErrStale, ErrNoGroup, or what is
// wrong with the entry); a bad entry changes nothing.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var c command
	if len(l.Data) > maxCommand {
		return fmt.Errorf("log entry %d: %d bytes, more than %d", l.Index, len(l.Data), maxCommand)
	}
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("log entry %d: %w", l.Index, err)
	}
	var res any
	var err error
	switch {
	case c.V != commandVersion:
		err = fmt.Errorf("unknown command v%d %q", c.V, c.Op)
	case c.Op == opGroup:
		res, err = f.setGroup(c.Group)
	case c.Op == opSwitch && c.Switch != nil:
		res, err = f.beginSwitch(*c.Switch)
	case c.Op == opSwitchEnd && c.End != nil:
		res, err = f.endSwitch(*c.End)
	case c.Op == opGrant && c.Grant != nil:
		return f.applyGrant(l.Index, *c.Grant, c.SwitchID)
	default:
		err = fmt.Errorf("unknown command v%d %q", c.V, c.Op)
	}
	if err != nil {
		return fmt.Errorf("log entry %d: %w", l.Index, err)
	}
	return res
}

// applyGrant applies a grant and hands its term to onApply.
func (f *FSM) applyGrant(index uint64, g pool.Grant, switchID string) any {
	t, err := f.grant(g, switchID)
	if err != nil {
		return fmt.Errorf("log entry %d: %w", index, err)
	}
	if f.onApply != nil {
		f.onApply(t)
	}
	return t
}

// setGroup sets the group's ID once: a second entry changes nothing and
// returns the ID the group has.
func (f *FSM) setGroup(g string) (string, error) {
	if !tags.ValidGroup(g) {
		return "", fmt.Errorf("raft group %q: want %d lowercase hex digits", g, tags.GroupLen)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.group == "" {
		f.group = g
	}
	return f.group, nil
}

// grant makes a grant's term current, stamped with the group's ID; with
// switchID, that switchover's recorded intent is marked granted.
func (f *FSM) grant(g pool.Grant, switchID string) (pool.Term, error) {
	if err := pool.CheckTerm(g.Term); err != nil {
		return pool.Term{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g.Term.Group = f.group
	cur := f.terms[g.Term.Cluster]
	switch {
	case f.group == "":
		return pool.Term{}, fmt.Errorf("grant of term %d in %q: %w", g.Term.Number, g.Term.Cluster, ErrNoGroup)
	case cur.Number != g.Expect:
		return pool.Term{}, fmt.Errorf("grant of term %d to %s in %q: %w (it is %d)", g.Term.Number, g.Term.Writer, g.Term.Cluster, ErrStale, cur.Number)
	case g.Term.Number != g.Expect+1:
		return pool.Term{}, fmt.Errorf("grant of term %d in %q does not follow %d", g.Term.Number, g.Term.Cluster, g.Expect)
	case cur.Number == 0 && len(f.terms) >= maxClusters:
		return pool.Term{}, fmt.Errorf("grant in %q: already %d clusters", g.Term.Cluster, maxClusters)
	}
	in, mark, err := f.checkSwitchGrant(switchID, g)
	if err != nil {
		return pool.Term{}, err
	}
	if mark {
		in.Granted = true
		f.switches[g.Term.Cluster] = in
		if in.Kind == KindFailover {
			f.failovers[g.Term.Cluster] = Failover{Cluster: in.Cluster, Term: g.Term.Number, Old: in.Old, OldServerID: in.OldServerID,
				Target: in.Target, Position: in.Position, Timers: in.Timers}
		}
	}
	f.terms[g.Term.Cluster] = g.Term
	return g.Term, nil
}

// Term returns the cluster's current term (Number 0: none).
func (f *FSM) Term(cluster string) pool.Term {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.terms[cluster]
}

// Group returns the raft group's ID, "" before the first leader set it.
func (f *FSM) Group() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.group
}

// Failovers returns a copy of each cluster's latest failover record.
func (f *FSM) Failovers() map[string]Failover {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.failovers)
}

// Terms returns a copy of every cluster's current term.
func (f *FSM) Terms() map[string]pool.Term {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.terms)
}

// snapshotFormat is a snapshot's content.
type snapshotFormat struct {
	V        int            `json:"v"`
	Group    string         `json:"group,omitempty"`
	Terms    []pool.Term    `json:"terms"`
	Switches []SwitchIntent `json:"switches,omitempty"`
	// Failovers: each cluster's latest failover (a snapshot of an
	// earlier release has none).
	Failovers []Failover `json:"failovers,omitempty"`
}

// Snapshot captures the terms.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	terms := f.Terms()
	s := snapshotFormat{V: commandVersion, Group: f.Group()}
	for _, c := range slices.Sorted(maps.Keys(terms)) {
		s.Terms = append(s.Terms, terms[c])
	}
	sw := f.Switches()
	for _, c := range slices.Sorted(maps.Keys(sw)) {
		s.Switches = append(s.Switches, sw[c])
	}
	fo := f.Failovers()
	for _, c := range slices.Sorted(maps.Keys(fo)) {
		s.Failovers = append(s.Failovers, fo[c])
	}
	return &fsmSnapshot{s}, nil
}

// Restore replaces the terms with a snapshot's. A snapshot with a bad
// term is refused whole.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	var s snapshotFormat
	if err := json.NewDecoder(io.LimitReader(r, maxClusters*2*maxCommand)).Decode(&s); err != nil {
		return fmt.Errorf("restore terms: %w", err)
	}
	if s.V != commandVersion {
		return fmt.Errorf("restore terms: snapshot version %d, this release reads %d", s.V, commandVersion)
	}
	if s.Group != "" && !tags.ValidGroup(s.Group) {
		return fmt.Errorf("restore terms: raft group %q: want %d lowercase hex digits", s.Group, tags.GroupLen)
	}
	terms := map[string]pool.Term{}
	for _, t := range s.Terms {
		if err := pool.CheckTerm(t); err != nil {
			return fmt.Errorf("restore terms: %w", err)
		}
		terms[t.Cluster] = t
	}
	switches := map[string]SwitchIntent{}
	for _, in := range s.Switches {
		if err := in.Check(); err != nil {
			return fmt.Errorf("restore switchovers: %w", err)
		}
		switches[in.Cluster] = in
	}
	failovers := map[string]Failover{}
	for _, r := range s.Failovers {
		if !tags.ValidCluster(r.Cluster) || !validPosition(r.Position) || member.CheckName(r.Old) != "" || member.CheckName(r.Target) != "" {
			return fmt.Errorf("restore failovers: a bad record of %.80q", r.Cluster)
		}
		failovers[r.Cluster] = r
	}
	f.mu.Lock()
	f.terms, f.group, f.switches, f.failovers = terms, s.Group, switches, failovers
	f.mu.Unlock()
	return nil
}

type fsmSnapshot struct{ s snapshotFormat }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist terms: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
