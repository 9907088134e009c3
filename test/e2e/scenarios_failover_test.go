//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestFailover (issue 38): with consensus.failover on every voter, a
// `kill -9` of the primary's mariadbd, with real MariaDB GTID replicas,
// agents in network namespaces, HAProxy and a client writing through each
// app host's HAProxy every 20 ms. The raft leader must replace the dead
// writer by itself: a surviving replica holds term 2 on every voter and
// takes the clients' writes through both HAProxies within 30 s (the write
// outage is logged per app), each write accepted only by the holder of the
// term current then, and the other replica replicates from it. The dead
// server comes back read-only (its file says so, as the docs ask) and
// stays out of the writers.
func TestFailover(t *testing.T) {
	Require(t)
	p := newPartRig(t, "--consensus-failover")
	c := p.c
	old := c.Primary()
	old.Server.PersistReadOnly(true) // read_only=ON in every file; the writer writable at runtime
	var next *DBHost
	r := p.window(t, func(t *testing.T) {
		killed := time.Now()
		old.Server.Kill()
		t.Logf("killed %s's mariadbd (SIGKILL)", old.Name)
		deadline := time.Now().Add(30 * time.Second)
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
			t.Fatalf("no term 2 to a surviving replica within 30s of the kill: terms %s\n%s", epochsString(p.tl.Epochs()), c.Describe())
		}
		t.Logf("term 2 to %s %.2fs after the kill", next.Name, time.Since(killed).Seconds())
		if !p.waitAcked(t, "after the failover", next, killed, partResume+10*time.Second) {
			t.Fatalf("the clients' writes do not reach %s:\n%s", next.Name, c.Describe())
		}
		c.SetPrimary(next)
		p.term = 2
	})
	if next == nil {
		return
	}
	t.Logf("window: %s", r.Summary())
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
	out, code := ShoalCLI(t, c.DBs[1].Agent, "info")
	if code != 0 || !strings.Contains(out, "failover") {
		t.Errorf("shoal info: exit %d:\n%s", code, out)
	}
	old.Server.Restart()
	time.Sleep(5 * time.Second)
	if !readOnlyOf(t, old) {
		t.Errorf("%s came back writable", old.Name)
	}
	p.checkTerm(t, "after the dead writer came back")
	for name, s := range c.Obs.Latest() {
		for _, w := range s.Writers {
			if w != next.Name {
				t.Errorf("agent %s routes writes to %s, not %s", name, w, next.Name)
			}
		}
	}
}
