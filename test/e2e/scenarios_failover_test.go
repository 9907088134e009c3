//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFailover (issue 38): with consensus.failover on every voter, real
// MariaDB GTID replicas (MASTER_HEARTBEAT_PERIOD=1), agents in network
// namespaces, HAProxy and a client writing through each app host's
// HAProxy every 20 ms. The primary dies three ways, each on a cluster of
// its own:
//
//   - mysqld_kill: `kill -9` of its mariadbd (its agent reports it down:
//     the fast path);
//   - host_freeze: its agent and its mariadbd SIGSTOPped (the host hangs:
//     no agent, and the replicas' IO threads report Yes while they receive
//     nothing, until slave_net_timeout's 60 s);
//   - link_cut: its host cut from every other host (iptables).
//
// Every time the raft leader must replace the dead writer by itself: a
// surviving replica holds term 2 on every voter and takes the clients'
// writes through both HAProxies (the outage is logged), each write
// accepted only by the holder of the term current then, and the other
// replica replicates from it. The old primary, back (restarted, thawed,
// healed), is read-only and in no agent's writers.
//
//	go test -tags e2e -count=1 -v -run '^TestFailover$' ./test/e2e/
func TestFailover(t *testing.T) {
	Require(t)
	t.Run("mysqld_kill", func(t *testing.T) {
		testFailoverOf(t, 10*time.Second, func(t *testing.T, old *DBHost, _ *partRig) func() {
			old.Server.Kill()
			t.Logf("killed %s's mariadbd (SIGKILL)", old.Name)
			return old.Server.Restart
		})
	})
	t.Run("host_freeze", func(t *testing.T) {
		testFailoverOf(t, partLease+10*time.Second, func(t *testing.T, old *DBHost, _ *partRig) func() {
			if err := old.Agent.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			old.Server.Stop()
			t.Logf("froze %s's agent and mariadbd (SIGSTOP)", old.Name)
			thaw := func() {
				_ = old.Agent.Signal(syscall.SIGCONT)
				old.Server.Cont()
			}
			t.Cleanup(thaw)
			return thaw
		})
	})
	t.Run("link_cut", func(t *testing.T) {
		testFailoverOf(t, partLease+10*time.Second, func(t *testing.T, old *DBHost, p *partRig) func() {
			others := slices.DeleteFunc(p.allHosts(), func(h *Host) bool { return h == old.Host })
			if err := Partition([]*Host{old.Host}, others); err != nil {
				t.Fatal(err)
			}
			t.Logf("cut %s's host from every other host", old.Name)
			return func() {
				for _, h := range p.allHosts() {
					if err := h.ClearRules(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	})
}

// checkReturn: the old writer's agent judged its server once it was
// back: a replica of next when it held nothing next lacks; else diverged,
// with exactly as many lost transactions as the clients' rows on it that
// next lacks (one autocommit insert each).
func checkReturn(t *testing.T, c *Cluster, old, next *DBHost) {
	t.Helper()
	_, last, ok := c.WaitConsensus([]*Agent{old.Agent}, 30*time.Second, func(ci *ConsensusInfo) bool { return ci != nil && ci.Returned["main"] != "" })
	if !ok {
		t.Errorf("%s's agent did not judge its server within 30s of its return: %+v", old.Name, last[old.Name])
		return
	}
	said := last[old.Name].Returned["main"]
	rows := func(d *DBHost) map[string]bool {
		out := map[string]bool{}
		r, err := d.Server.DB().Query("SELECT app, DATE_FORMAT(sent, '%Y-%m-%d %H:%i:%s.%f') FROM " + InvTable)
		if err != nil {
			t.Fatalf("rows of %s: %v", d.Name, err)
		}
		defer r.Close()
		for r.Next() {
			var app, sent string
			if err := r.Scan(&app, &sent); err != nil {
				t.Fatal(err)
			}
			out[app+"@"+sent] = true
		}
		return out
	}
	onNext := rows(next)
	missing := 0
	for k := range rows(old) {
		if !onNext[k] {
			missing++
		}
	}
	t.Logf("%s's agent: %s; its rows missing on %s: %d", old.Name, said, next.Name, missing)
	switch {
	case missing == 0 && !strings.Contains(said, "replica of "+next.Name):
		t.Errorf("%s held nothing %s lacks, but its agent says %q, not that it rejoined", old.Name, next.Name, said)
	case missing == 0:
		old.Server.WaitReplicating(30 * time.Second)
		if st, err := old.Server.SlaveStatus(); err != nil || st["Master_Host"] != next.Host.IP {
			t.Errorf("%s replicates from %q (%v), want %s", old.Name, st["Master_Host"], err, next.Host.IP)
		}
	case !strings.Contains(said, fmt.Sprintf("diverged: %d transactions", missing)):
		t.Errorf("%s holds %d rows %s lacks, but its agent says %q", old.Name, missing, next.Name, said)
	}
}

// testFailoverOf builds a cluster, lets fault kill its primary (it
// returns how to bring the primary back) and checks the failover: term 2
// to a surviving replica within limit, the clients' writes on it, no
// invariant violated, the other replica re-pointed; then brings the old
// primary back and checks it stays read-only and out of the writers.
func testFailoverOf(t *testing.T, limit time.Duration, fault func(t *testing.T, old *DBHost, p *partRig) (back func())) {
	p := newPartRig(t, "--consensus-failover")
	c := p.c
	old := c.Primary()
	old.Server.PersistReadOnly(true) // read_only=ON in every file; the writer writable at runtime
	var next *DBHost
	var back func()
	r := p.window(t, func(t *testing.T) {
		killed := time.Now()
		back = fault(t, old, p)
		deadline := time.Now().Add(limit + 20*time.Second)
		for next == nil && time.Now().Before(deadline) {
			cur := p.tl.Current()
			for _, d := range c.DBs {
				if d != old && cur.Number == 2 && cur.Writer == d.Name {
					next = d
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if next == nil {
			t.Fatalf("no term 2 to a surviving replica within %s of the fault: terms %s\n%s", limit+20*time.Second, epochsString(p.tl.Epochs()), c.Describe())
		}
		took := time.Since(killed)
		t.Logf("term 2 to %s %.2fs after the fault", next.Name, took.Seconds())
		if took > limit {
			t.Errorf("term 2 %.2fs after the fault, over %s", took.Seconds(), limit)
		}
		if !p.waitAcked(t, "after the failover", next, killed, partResume+10*time.Second) {
			t.Fatalf("the clients' writes do not reach %s:\n%s", next.Name, c.Describe())
		}
		c.SetPrimary(next)
		p.term = 2
		// The old primary comes back inside the window: whatever it
		// does then is checked against the terms too.
		back()
		time.Sleep(5 * time.Second)
	})
	if next == nil {
		return
	}
	t.Logf("window: %s", r.Summary())
	for _, d := range c.DBs {
		var lines []string
		for _, l := range strings.Split(d.Agent.Log(), "\n") {
			if strings.Contains(l, "failover") || strings.Contains(l, "raft: entering leader state") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			t.Logf("%s's log, failover lines:\n%s", d.Name, strings.Join(lines[:min(len(lines), 12)], "\n"))
		}
	}
	for _, d := range c.DBs {
		if d == old || d == next {
			continue
		}
		d.Server.WaitReplicating(30 * time.Second)
		st, err := d.Server.SlaveStatus()
		if err != nil || st["Master_Host"] != next.Host.IP {
			t.Errorf("%s replicates from %q, want %s (%v)", d.Name, st["Master_Host"], next.Host.IP, err)
		}
	}
	out, code := ShoalCLI(t, next.Agent, "info")
	if code != 0 || !strings.Contains(out, "failover") {
		t.Errorf("shoal info: exit %d:\n%s", code, out)
	}
	if !readOnlyOf(t, old) {
		t.Errorf("%s came back writable", old.Name)
	}
	checkReturn(t, c, old, next)
	p.checkTerm(t, "after the dead writer came back")
	for name, s := range c.Obs.Latest() {
		for _, w := range s.Writers {
			if w != next.Name {
				t.Errorf("agent %s routes writes to %s, not %s", name, w, next.Name)
			}
		}
	}
}
