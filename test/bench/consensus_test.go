//go:build bench

package bench

import (
	"fmt"
	"slices"
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
	var first, formed, promote, routed, fresh, failover, death []float64
	for k := range trials {
		t.Run(fmt.Sprintf("trial%d", k), func(t *testing.T) {
			r := consensusTrial(t)
			first, formed, promote, failover = append(first, r.first), append(formed, r.formed), append(promote, r.promote), append(failover, r.failover)
			routed, fresh = append(routed, r.routed), append(fresh, r.fresh)
			if r.writerDeath >= 0 {
				death = append(death, r.writerDeath)
			}
		})
	}
	var b strings.Builder
	b.WriteString("## 8. Writer terms by consensus (issue 26)\n\n")
	b.WriteString("What: 3 db hosts (real MariaDB, GTID replication) and 1 app host in network namespaces, the db agents raft voters " +
		"(`--consensus-key`, `bootstrap_expect` 3, raft's default timeouts: heartbeat and election 1 s), a fresh cluster per trial. " +
		"The app agent has the consensus key too (no voter) and routes by the term ([consensus.md](consensus.md)). " +
		"Voter times are polled from each voter's `/v1/agent/self` every 50 ms (each carries up to 50 ms and one API round trip); " +
		"pool times come from the harness's observer, which samples every agent's `/v1/pool`.\n\n")
	fmt.Fprintf(&b, "Command: `sudo go test -tags 'bench e2e' -count=1 -v -run '^TestConsensusTerms$' ./test/bench/`. Trials: %d. This run took %s.\n\n",
		trials, time.Since(start).Round(time.Second))
	b.WriteString("| what | trials | p50 (s) | p90 | max |\n|---|---|---|---|---|\n")
	for _, r := range []struct {
		what string
		xs   []float64
	}{
		{"first term on every voter, from the agents' start (an upper bound: seen at the first poll after the pool formed)", first},
		{"the healthy pool on every agent, the writer by the term, from the agents' start", formed},
		{"outside promotion (read_only flipped) → next term on every voter", promote},
		{"outside promotion → writer db2 in every agent's pool, the app agent's included", routed},
		{"a fresh app agent started → the writer in its pool (it learns the term)", fresh},
		{"raft leader's agent killed (kill -9) → a new leader on both other voters", failover},
		{"writer's agent killed (kill -9, its mysqld runs on) → no writer on every other agent (trials where the killed leader was not the writer)", death},
	} {
		s := Summarize(r.xs)
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.2f |\n", r.what, s.N, s.P50, s.P90, s.Max)
	}
	WriteSection(t, "80-consensus", b.String())
}

// trialResult is one trial's times, in seconds.
type trialResult struct {
	first, formed, promote, routed, fresh, failover float64
	writerDeath                                     float64 // -1: not measured (the killed leader was the writer)
}

// consensusTrial runs one fresh cluster: first term (from the agents'
// start, and after the pool formed), an outside promotion (to the next
// term on the voters, and to the new writer in every agent's pool), a
// fresh app agent learning the term, a leader kill.
func consensusTrial(t *testing.T) (r trialResult) {
	key := e2e.Keygen(t)
	c := e2e.NewCluster(t, e2e.Options{DBHosts: 3, AppHosts: 1, DBFlags: e2e.ConsensusFlags(key, 3), AppFlags: e2e.ConsensusAppFlags(key)})
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
	// The pool is healthy only with a writer, which needs the term: the
	// cluster forms after the first term, and took is the rest of the
	// polling.
	r.formed, r.first = c.Formed.Seconds(), (c.Formed + took).Seconds()

	flipped := c.Switchover(t, c.DBs[1])
	if _, last, ok := c.WaitConsensus(dbs, 30*time.Second, holds(2, "db2")); !ok {
		t.Fatalf("no term 2 within 30s of the flip: %+v", last)
	}
	r.promote = time.Since(flipped).Seconds()
	w := c.Obs.WaitAgents(c.AgentNames(), flipped, 30*time.Second, func(s e2e.Snap) bool { return s.OK() && slices.Equal(s.Writers, []string{"db2"}) })
	if !w.OK {
		t.Fatalf("not every agent routes writes to db2 within 30s of the flip:\n%s", c.Describe())
	}
	r.routed = w.Took.Seconds()

	ws := c.StartWatched(t, "fresh", 1, e2e.ConsensusAppFlags(key), 20*time.Millisecond, 30*time.Second,
		func(s e2e.RouteSample) bool { return s.OK() && s.Writer() == "db2" })
	samples := ws[0].Wait()
	if n := len(samples); n == 0 || samples[n-1].Writer() != "db2" {
		t.Fatalf("a fresh app agent did not route writes to db2 within 30s (%d samples)", n)
	}
	r.fresh = samples[len(samples)-1].At.Sub(ws[0].Started).Seconds()

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
	r.failover = time.Since(killed).Seconds()

	// The writer's agent killed while its mysqld runs on (when the raft
	// leader just killed was not it): no writer on every other agent.
	r.writerDeath = -1
	if writer := c.DBs[1].Agent; leader != writer {
		var others []string
		for _, a := range c.Agents() {
			if a != writer && a != leader {
				others = append(others, a.Name)
			}
		}
		killed := time.Now()
		if err := writer.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		w := c.Obs.WaitAgents(others, killed, 30*time.Second, func(s e2e.Snap) bool { return s.OK() && len(s.Writers) == 0 })
		if !w.OK {
			t.Fatalf("a writer still routed 30s after its agent was killed:\n%s", c.Describe())
		}
		r.writerDeath = w.Took.Seconds()
	}
	t.Logf("first term %.2fs (pool healthy everywhere %.2fs), promotion %.2fs on the voters, %.2fs in every pool, fresh app agent %.2fs, failover %.2fs, writer's agent killed to no writer %.2fs",
		r.first, r.formed, r.promote, r.routed, r.fresh, r.failover, r.writerDeath)
	return r
}
