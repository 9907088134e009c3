//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConsensus: the db agents of a 3-server cluster, given a consensus
// key, form a raft quorum with no manual step and grant the first writer
// term to the only writable server; a key holder that claims role=db
// with a writable server of its own and another consensus key is never
// admitted and never gets the term; a stranger's bytes to the raft port
// are refused; an outside promotion (read_only flipped) moves the term;
// every agent, the app agent (which has the key but is no voter)
// included, routes writes to the new writer within 2 s of the flip; with
// the raft leader SIGSTOPped the other two elect a new one, keep the
// terms and grant the next.
func TestConsensus(t *testing.T) {
	Require(t)
	ckey := Keygen(t)
	start := time.Now()
	c := NewCluster(t, Options{DBHosts: 3, AppHosts: 1, DBFlags: ConsensusFlags(ckey, 3), AppFlags: ConsensusAppFlags(ckey)})
	var dbs []*Agent
	for _, d := range c.DBs {
		dbs = append(dbs, d.Agent)
	}
	holds := func(n uint64, writer string) func(*ConsensusInfo) bool {
		return func(ci *ConsensusInfo) bool {
			tm := ci.Term("main")
			return ci != nil && ci.Voter && ci.Bootstrapped && tm.Term == n && tm.Writer == writer
		}
	}
	took, last, ok := c.WaitConsensus(dbs, 30*time.Second, func(ci *ConsensusInfo) bool {
		return holds(1, "db1")(ci) && len(ci.Voters) == 3 && ci.Leader != ""
	})
	if !ok {
		t.Fatalf("no quorum with term 1 to db1 on every voter within 30s: %s", describeConsensus(last))
	}
	t.Logf("first term on every voter %.1fs after the pool formed (the pool formed %.1fs after the agents started; the test %.1fs ago)",
		took.Seconds(), c.Formed.Seconds(), time.Since(start).Seconds())
	if ci, err := c.Consensus(c.Apps[0].Agent); err != nil || ci == nil || ci.Voter {
		t.Errorf("app agent with the consensus key: consensus = %+v, %v; want one, not a voter", ci, err)
	}

	t.Run("stranger_with_gossip_key", func(t *testing.T) { consensusStranger(t, c, dbs) })

	t.Run("outside_promotion", func(t *testing.T) {
		flipped := c.Switchover(t, c.DBs[1])
		took, last, ok := c.WaitConsensus(dbs, 10*time.Second, holds(2, "db2"))
		if !ok {
			t.Fatalf("term 2 to db2 not on every voter within 10s of the flip: %s", describeConsensus(last))
		}
		t.Logf("term 2 to db2 on every voter %.2fs after db2 became writable, %.2fs of polling (why: %s)", time.Since(flipped).Seconds(), took.Seconds(), last["db2"].Term("main").Why)
		// Every agent's pool, the app agent's included, follows within 2 s
		// (the observer's samples since the flip).
		w := c.Obs.WaitAgents(c.AgentNames(), flipped, 5*time.Second, func(s Snap) bool { return s.OK() && slices.Equal(s.Writers, []string{"db2"}) })
		if !w.OK || w.Took > 2*time.Second {
			t.Errorf("not every agent routes writes to db2 within 2s of the flip (ok %v, took %.2fs, per agent %v):\n%s", w.OK, w.Took.Seconds(), w.Per, c.Describe())
		} else {
			t.Logf("every agent's pool shows writer db2 %.2fs after the flip (per agent %v)", w.Took.Seconds(), w.Per)
		}
	})

	t.Run("leader_stopped", func(t *testing.T) {
		leader, rest, err := c.ConsensusLeader(dbs)
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = leader.Signal(syscall.SIGCONT) }()
		took, last, ok := c.WaitConsensus(rest, 15*time.Second, func(ci *ConsensusInfo) bool {
			return ci != nil && ci.Leader != "" && ci.Leader != leader.Name && ci.Term("main").Term == 2
		})
		if !ok {
			t.Fatalf("no new leader with term 2 within 15s of SIGSTOP to %s: %s", leader.Name, describeConsensus(last))
		}
		t.Logf("new leader %s %.1fs after %s was stopped", last[rest[0].Name].Leader, took.Seconds(), leader.Name)
		// The next promotion is granted by the two that are left. An
		// outside tool flips read_only (out before in), talking to the
		// servers, not to the stopped agent; the replicas are not
		// re-pointed (the next server may be the original primary, whose
		// own transactions MASTER_GTID_WAIT does not count).
		var next *DBHost
		for _, d := range c.DBs {
			if d != c.Primary() && d.Name != leader.Name {
				next = d
			}
		}
		c.Primary().Server.SetReadOnly(true)
		next.Server.MustExec("STOP SLAVE")
		next.Server.SetReadOnly(false)
		want := fmt.Sprint(next.Name)
		if _, last, ok := c.WaitConsensus(rest, 10*time.Second, holds(3, want)); !ok {
			t.Fatalf("term 3 to %s not granted by the two voters left: %s", want, describeConsensus(last))
		}
	})
}

// consensusStranger: a host with the gossip key and a writable MariaDB of
// its own starts a db agent of cluster main with another consensus key.
func consensusStranger(t *testing.T, c *Cluster, dbs []*Agent) {
	h, seeds := c.intruderHost(t, "dbx")
	x := c.AddAgent(t, h, AgentSpec{Name: "dbx", Role: "db", Key: c.Key, Join: seeds, Extra: ConsensusFlags(Keygen(t), 3)})
	// Wait until the voters see dbx's voter tag and the leader tried to
	// admit it (the leader tries a refused peer again only after 30 s).
	deadline := time.Now().Add(20 * time.Second)
	for {
		ci, err := c.Consensus(x)
		if err == nil && ci != nil && sumRefused(ci.Refused) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader never tried to admit dbx (its refused raft connections: %+v, %v); dbx's log:\n%s", ci, err, x.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A stranger without any key writes raft-looking bytes to db1's raft port.
	before, _ := c.Consensus(dbs[0])
	conn, err := h.dialer.DialContext(context.Background(), "tcp", fmt.Sprintf("%s:%d", c.DBs[0].Host.IP, 7950))
	if err != nil {
		t.Fatalf("dial db1's raft port from the stranger's host: %v", err)
	}
	_, _ = conn.Write([]byte("\x00\x01\x02forged append entries"))
	time.Sleep(500 * time.Millisecond)
	conn.Close()
	_, last, ok := c.WaitConsensus(dbs, 10*time.Second, func(ci *ConsensusInfo) bool {
		return ci != nil && len(ci.Voters) == 3 && ci.Term("main").Writer == "db1"
	})
	if !ok {
		t.Fatalf("the voters changed with a stranger around: %s", describeConsensus(last))
	}
	for _, v := range last["db1"].Voters {
		if v.ID == "dbx" {
			t.Fatalf("dbx was admitted as a voter: %s", describeConsensus(last))
		}
	}
	if got := sumRefused(last["db1"].Refused); got <= sumRefused(before.Refused) {
		t.Errorf("db1 did not count the stranger's raft connection as refused: %v before, %v after", before.Refused, last["db1"].Refused)
	}
	x.Stop(10 * time.Second)
}

func sumRefused(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

func describeConsensus(m map[string]*ConsensusInfo) string {
	var b strings.Builder
	for name, ci := range m {
		if ci == nil {
			fmt.Fprintf(&b, "\n  %s: none", name)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: voter=%v state=%s leader=%q bootstrapped=%v voters=%d refused=%v terms=%+v", name, ci.Voter, ci.State, ci.Leader, ci.Bootstrapped, len(ci.Voters), ci.Refused, ci.Terms)
	}
	return b.String()
}
