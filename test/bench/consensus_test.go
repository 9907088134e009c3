//go:build bench

package bench

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// TestConsensusTerms (suite 8) measures the consensus layer of issue 26 on
// 3 db hosts (real MariaDB) and 1 app host in network namespaces, each db
// agent a voter: per trial a fresh cluster, then
//   - the first term: from the agents' start to term 1 on every voter (the
//     quorum forms with no manual step: bootstrap_expect 3);
//   - an outside promotion: from the new writer's read_only=OFF to the next
//     term on every voter;
//   - the raft leader's agent killed (kill -9): to a new leader on both
//     other voters.
//
// Times are polled from each agent's /v1/agent/self every 50 ms, so each
// carries up to 50 ms plus one API round trip. BENCH_CONSENSUS_TRIALS
// (default 10; QUICK 2) sets the trials.
func TestConsensusTerms(t *testing.T) {
	e2e.Require(t)
	trials := envInt("BENCH_CONSENSUS_TRIALS", Pick(10, 2))
	start := time.Now()
	var first, afterPool, promote, failover []float64
	for k := range trials {
		t.Run(fmt.Sprintf("trial%d", k), func(t *testing.T) {
			f, a, p, l := consensusTrial(t)
			first, afterPool, promote, failover = append(first, f), append(afterPool, a), append(promote, p), append(failover, l)
		})
	}
	var b strings.Builder
	b.WriteString("## 8. Writer terms by consensus (issue 26, slice 1)\n\n")
	b.WriteString("What: 3 db hosts (real MariaDB, GTID replication) and 1 app host in network namespaces, the db agents raft voters " +
		"(`--consensus-key`, `bootstrap_expect` 3, raft's default timeouts: heartbeat and election 1 s), a fresh cluster per trial. " +
		"Times are polled from each voter's `/v1/agent/self` every 50 ms (each carries up to 50 ms and one API round trip). " +
		"Routers do not follow the terms yet ([consensus.md](consensus.md)), so no client-side number is here.\n\n")
	fmt.Fprintf(&b, "Command: `sudo go test -tags 'bench e2e' -count=1 -v -run '^TestConsensusTerms$' ./test/bench/`. Trials: %d. This run took %s.\n\n",
		trials, time.Since(start).Round(time.Second))
	b.WriteString("| what | trials | p50 (s) | p90 | max |\n|---|---|---|---|---|\n")
	for _, r := range []struct {
		what string
		xs   []float64
	}{
		{"first term on every voter, from the agents' start", first},
		{"… of which after the pool formed", afterPool},
		{"outside promotion (read_only flipped) → next term on every voter", promote},
		{"raft leader's agent killed (kill -9) → a new leader on both other voters", failover},
	} {
		s := Summarize(r.xs)
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.2f |\n", r.what, s.N, s.P50, s.P90, s.Max)
	}
	WriteSection(t, "80-consensus", b.String())
}

// consensusTrial runs one fresh cluster: first term (from the agents'
// start, and after the pool formed), an outside promotion, a leader kill.
func consensusTrial(t *testing.T) (first, afterPool, promote, failover float64) {
	c := e2e.NewCluster(t, e2e.Options{DBHosts: 3, AppHosts: 1, DBFlags: e2e.ConsensusFlags(e2e.Keygen(t), 3)})
	var dbs []*e2e.Agent
	for _, d := range c.DBs {
		dbs = append(dbs, d.Agent)
	}
	holds := func(n uint64, writer string) func(*e2e.ConsensusInfo) bool {
		return func(ci *e2e.ConsensusInfo) bool {
			tm := ci.Term("main")
			return ci != nil && tm.Term == n && tm.Writer == writer
		}
	}
	took, last, ok := c.WaitConsensus(dbs, 60*time.Second, holds(1, "db1"))
	if !ok {
		t.Fatalf("no first term within 60s: %+v", last)
	}
	afterPool, first = took.Seconds(), (c.Formed + took).Seconds()

	flipped := c.Switchover(t, c.DBs[1])
	if _, last, ok := c.WaitConsensus(dbs, 30*time.Second, holds(2, "db2")); !ok {
		t.Fatalf("no term 2 within 30s of the flip: %+v", last)
	}
	promote = time.Since(flipped).Seconds()

	leader, rest, err := c.ConsensusLeader(dbs)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := leader.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, last, ok := c.WaitConsensus(rest, 30*time.Second, func(ci *e2e.ConsensusInfo) bool {
		return ci != nil && ci.Leader != "" && ci.Leader != leader.Name
	}); !ok {
		t.Fatalf("no new leader within 30s of killing %s: %+v", leader.Name, last)
	}
	failover = time.Since(killed).Seconds()
	t.Logf("first term %.2fs (%.2fs after the pool), promotion %.2fs, failover %.2fs", first, afterPool, promote, failover)
	return first, afterPool, promote, failover
}
