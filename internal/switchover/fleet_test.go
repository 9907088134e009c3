package switchover

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// A fake fleet for the switchover's state machines: Switchers whose
// steps go straight to each other (no serf, no signatures), one real FSM
// that every voter reads (as if raft replicated at once), and fake MySQL
// servers. Unit tests of pure logic only: the real thing is the e2e
// switchover tests and test/process's coordinator crash.

func termKeyring(t *testing.T) *consensus.Keyring {
	t.Helper()
	raw := make([]byte, consensus.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	kr, err := consensus.ParseKeyring([]string{base64.StdEncoding.EncodeToString(raw)})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// fakeServer is one node's MySQL server.
type fakeServer struct {
	mu       sync.Mutex
	readOnly bool
	ops      []string
	// catchUp, when set, is CatchUp's result; block makes CatchUp wait
	// until its ctx ends or the wait passes.
	catchUp error
	block   bool
	// survey is Survey's answer; resumed counts ResumeReplication.
	survey  fence.Survey
	resumed int
	timers  fence.Timers // the last repoint's
	// positions is Positions' answer (posErr its error); former: the
	// last repoint's FormerWriter.
	positions fence.Survey
	posErr    error
	former    bool
}

func (f *fakeServer) did(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
}

func (f *fakeServer) state() (bool, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readOnly, append([]string(nil), f.ops...)
}

func (f *fakeServer) Demote(context.Context) (fence.Result, string, error) {
	f.did("demote")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOnly = true
	return fence.Result{Killed: 2}, "0-1-7", nil
}

func (f *fakeServer) Unfence(context.Context) error {
	f.did("restore")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOnly = false
	return nil
}

func (f *fakeServer) CatchUp(ctx context.Context, _ string, wait time.Duration) error {
	f.did("catchup")
	f.mu.Lock()
	err, block := f.catchUp, f.block
	f.mu.Unlock()
	if block {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		return errors.New("did not catch up")
	}
	return err
}

func (f *fakeServer) Promote(context.Context) (string, fence.Timers, error) {
	f.did("promote")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOnly = false
	return "", fence.Timers{ConnectRetry: 1, HeartbeatPeriod: 1.5}, nil
}

func (f *fakeServer) Repoint(_ context.Context, src fence.Source) error {
	f.did("repoint")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timers, f.former = src.Timers, src.FormerWriter
	return nil
}

func (f *fakeServer) Positions(context.Context) (fence.Survey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.positions, f.posErr
}

func (f *fakeServer) Survey(context.Context, time.Duration) (fence.Survey, error) {
	f.did("survey")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.survey, nil
}

func (f *fakeServer) ResumeReplication(context.Context) error {
	f.did("resume")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumed++
	return nil
}

// fakeRaft is the fleet's one FSM, applied at once, and who leads.
type fakeRaft struct {
	mu     sync.Mutex
	fsm    *consensus.FSM
	index  uint64
	leader string
	voters map[string]string
}

func (r *fakeRaft) apply(b []byte, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index++
	switch res := r.fsm.Apply(&raft.Log{Index: r.index, Type: raft.LogCommand, Data: b}).(type) {
	case error:
		return nil, res
	default:
		return res, nil
	}
}

// fakeVoter is one voter's view of fakeRaft.
type fakeVoter struct {
	r    *fakeRaft
	name string
}

func (v fakeVoter) IsLeader() bool {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	return v.r.leader == v.name
}

func (v fakeVoter) Status() consensus.Status {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	return consensus.Status{ID: v.name, Leader: v.r.leader}
}

func (v fakeVoter) Voters() map[string]string                    { return v.r.voters }
func (v fakeVoter) FSM() *consensus.FSM                          { return v.r.fsm }
func (v fakeVoter) ProveWriter(context.Context, pool.Term) error { return nil }

func (v fakeVoter) BeginSwitch(_ context.Context, in consensus.SwitchIntent) (consensus.SwitchIntent, error) {
	b, err := consensus.EncodeSwitchBegin(in)
	res, err := v.r.apply(b, err)
	if err != nil {
		return consensus.SwitchIntent{}, err
	}
	return res.(consensus.SwitchIntent), nil
}

func (v fakeVoter) EndSwitch(_ context.Context, cluster, id, outcome string, rollback bool) (consensus.SwitchIntent, error) {
	b, err := consensus.EncodeSwitchEnd(cluster, id, outcome, rollback)
	res, err := v.r.apply(b, err)
	if err != nil {
		return consensus.SwitchIntent{}, err
	}
	return res.(consensus.SwitchIntent), nil
}

func (v fakeVoter) GrantSwitch(_ context.Context, id string, g pool.Grant) (pool.Term, error) {
	b, err := consensus.EncodeGrantSwitch(id, g)
	res, err := v.r.apply(b, err)
	if err != nil {
		return pool.Term{}, err
	}
	return res.(pool.Term), nil
}

// fakeTerms is a node's term book: the FSM's terms.
type fakeTerms struct {
	r      *fakeRaft
	signer *consensus.Keyring
	verify []ed25519.PublicKey
}

func (t *fakeTerms) View() pool.TermView         { return pool.TermView{Terms: t.r.fsm.Terms()} }
func (t *fakeTerms) OwnGroup() string            { return t.r.fsm.Group() }
func (t *fakeTerms) Signer() *consensus.Keyring  { return t.signer }
func (t *fakeTerms) Verify() []ed25519.PublicKey { return t.verify }
func (t *fakeTerms) Publish([]pool.Term)         {}

// fakeGossip is the member list; queries fail (steps go through ask).
type fakeGossip struct {
	mu    sync.Mutex
	alive map[string]bool
}

func (g *fakeGossip) Query(string, []byte, *serf.QueryParam) (*serf.QueryResponse, error) {
	return nil, errors.New("no serf in this test")
}

func (g *fakeGossip) Members() []serf.Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []serf.Member
	for name, alive := range g.alive {
		st := serf.StatusAlive
		if !alive {
			st = serf.StatusFailed
		}
		out = append(out, serf.Member{Name: name, Status: st})
	}
	return out
}

func (g *fakeGossip) kill(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.alive[name] = false
}

// fleet is db1 (the writer, term 1), db2 and db3, all voters.
type fleet struct {
	raft    *fakeRaft
	gossip  *fakeGossip
	clock   *clockwork.FakeClock
	servers map[string]*fakeServer
	sw      map[string]*Switcher
	down    map[string]bool // switchers that no longer answer
	// health and status override what members says of a node.
	health map[string]*tags.Health
	status map[string]pool.Status
	mu     sync.Mutex
}

const group = "0a1b2c3d"

func newFleet(t *testing.T, fakeClock bool) *fleet {
	t.Helper()
	fsm := consensus.NewFSM(nil)
	f := &fleet{
		raft:    &fakeRaft{fsm: fsm, leader: "db2", voters: map[string]string{"db1": "a1", "db2": "a2", "db3": "a3"}},
		gossip:  &fakeGossip{alive: map[string]bool{"db1": true, "db2": true, "db3": true}},
		servers: map[string]*fakeServer{"db1": {}, "db2": {readOnly: true}, "db3": {readOnly: true}},
		sw:      map[string]*Switcher{},
		down:    map[string]bool{},
	}
	b, err := consensus.EncodeGroup(group)
	mustApply(t, f.raft, b, err)
	b, err = consensus.EncodeGrant(pool.Grant{Expect: 0, Term: pool.Term{Cluster: "main", Number: 1, Writer: "db1", Addr: "db1:3306", Granted: time.Now()}})
	mustApply(t, f.raft, b, err)
	var clk clockwork.Clock = clockwork.NewRealClock()
	if fakeClock {
		f.clock = clockwork.NewFakeClockAt(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
		clk = f.clock
	}
	kr := termKeyring(t)
	for _, name := range []string{"db1", "db2", "db3"} {
		s := New(Config{
			Node: name, Gossip: f.gossip, Terms: &fakeTerms{r: f.raft, signer: kr, verify: kr.TermPublicKeys()},
			Voter:    func() Voter { return fakeVoter{f.raft, name} },
			Actuator: f.servers[name],
			Pool:     f.pool,
			Members:  f.members,
			Clock:    clk,
			Log:      slog.New(slog.DiscardHandler),
		})
		s.ask = f.ask
		f.sw[name] = s
	}
	return f
}

func mustApply(t *testing.T, r *fakeRaft, b []byte, err error) {
	t.Helper()
	if _, err := r.apply(b, err); err != nil {
		t.Fatal(err)
	}
}

// ask hands a step to its node's switcher, as serf would.
func (f *fleet) ask(ctx context.Context, st consensus.SwitchStep, timeout time.Duration) (consensus.SwitchAnswer, error) {
	f.mu.Lock()
	to, down := f.sw[st.Node], f.down[st.Node]
	f.mu.Unlock()
	if to == nil || down {
		return consensus.SwitchAnswer{}, fmt.Errorf("%w within %s", errNoAnswer, timeout)
	}
	return to.takeSafely(ctx, st), nil
}

// pool is what every agent computes: the holder writable is the writer.
func (f *fleet) pool() *pool.Pool {
	t := f.raft.fsm.Term("main")
	c := pool.Cluster{Name: "main", Term: &t}
	for _, name := range []string{"db1", "db2", "db3"} {
		n := pool.Node{Name: name, Addr: name + ":3306"}
		if ro, _ := f.servers[name].state(); !ro && t.Writer == name {
			c.Writers = append(c.Writers, n)
		} else {
			c.Readers = append(c.Readers, n)
		}
	}
	return &pool.Pool{Clusters: []pool.Cluster{c}}
}

func (f *fleet) members() []pool.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pool.Member
	for _, name := range []string{"db1", "db2", "db3"} {
		ro, _ := f.servers[name].state()
		m := pool.Member{Name: name, Addr: name + ":3306", Status: pool.StatusAlive,
			Tags: map[string]string{tags.KeyRole: tags.RoleDB, tags.KeyCluster: "main"}, Health: &tags.Health{ReadOnly: ro}}
		if h, ok := f.health[name]; ok {
			m.Health = h
		}
		if st, ok := f.status[name]; ok {
			m.Status = st
		}
		out = append(out, m)
	}
	return out
}

// setMember sets what the gossip says of a member (nil health: keep).
func (f *fleet) setMember(name string, st pool.Status, h *tags.Health) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.health == nil {
		f.health, f.status = map[string]*tags.Health{}, map[string]pool.Status{}
	}
	if h != nil {
		f.health[name] = h
	}
	f.status[name] = st
}
