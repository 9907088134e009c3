package agent

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestReplicaMissingChecksStaysReader: a replica whose checks fail (here:
// time out, its mysqld stopped for 600 ms) fewer times in a row than fall
// is still passing, and must still be published as what it was, a
// read-only replica. A failed check reads no facts; publishing its empty
// ones made the replica look writable, and every agent took it out of the
// pool as a second writer ("conflict") for as long as the failures lasted
// (seen under CPU load, where the host-stall rule keeps a timeout from
// making the server critical at once) and, with no writer left, could have
// made it the writer.
func TestReplicaMissingChecksStaysReader(t *testing.T) {
	t.Setenv("SHOAL_MYSQL_PASSWORD", probePW)
	primary, rs := mariadbtest.StartReplicated(t, 1, probeUser)
	replica := rs[0]
	db1 := startNode(t, dbConfig(t, "db1", primary))
	c := dbConfig(t, "db2", replica, db1.cfg.Bind)
	// Every timeout weighs one failure (timeout < interval), and six are
	// needed: a 600 ms stop leaves the state passing.
	c.MySQL.Interval, c.MySQL.Timeout, c.MySQL.Fall = 250*time.Millisecond, 200*time.Millisecond, 6
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	db2 := startNode(t, c)
	const healthy = "db1|db2|"
	testkit.WaitFor(t, 30*time.Second, "db1 and db2: the writer and a reader", func() bool {
		return poolOf(db1.a) == healthy && poolOf(db2.a) == healthy
	})

	replica.Stop()
	stopped := time.Now()
	resumed := false
	failedWhilePassing := 0
	var bad []string
	for time.Since(stopped) < 3*time.Second {
		if !resumed && time.Since(stopped) >= 600*time.Millisecond {
			replica.Cont()
			resumed = true
		}
		if st, ok := db2.a.ProbeStatus(); ok {
			if st.State != probe.StatePassing {
				t.Fatalf("db2's state left passing after %s: %s (%s); the test needs fewer failures than fall",
					time.Since(stopped).Round(time.Millisecond), st.State, st.Message)
			}
			if st.Last.Outcome == probe.OutcomeFail {
				failedWhilePassing++
			}
		}
		for _, n := range []*testNode{db1, db2} {
			if p := poolOf(n.a); p != healthy && len(bad) < 10 {
				bad = append(bad, n.cfg.Node+" at +"+time.Since(stopped).Round(time.Millisecond).String()+": "+p)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if failedWhilePassing == 0 {
		t.Fatal("no failed check was seen while db2 stayed passing: the test did not exercise the case")
	}
	if len(bad) > 0 {
		t.Errorf("the pool moved while db2 only missed checks (%d samples of a failed check):\n%v", failedWhilePassing, bad)
	}
	if st, _ := db2.a.ProbeStatus(); !st.Known.ReadOnly || !st.Known.Replication.IsReplica() {
		t.Errorf("db2's known facts: %+v", st.Known)
	}
}
