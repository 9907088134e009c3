package agent

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// removalWatch records, per agent, when a node last left the pool.
type removalWatch struct {
	mu     sync.Mutex
	victim string
	out    map[string]time.Time // agent → when its pool first moved victim out
}

func (w *removalWatch) listener(agent string) routing.Listener {
	return func(u routing.Update) {
		now := time.Now()
		for _, c := range u.Changes {
			if c.To != pool.RoleOut || (c.From != pool.RoleReader && c.From != pool.RoleWriter) {
				continue
			}
			w.mu.Lock()
			if c.Node == w.victim && w.out != nil {
				if _, ok := w.out[agent]; !ok {
					w.out[agent] = now
				}
			}
			w.mu.Unlock()
		}
	}
}

func (w *removalWatch) arm(victim string) {
	w.mu.Lock()
	w.victim, w.out = victim, map[string]time.Time{}
	w.mu.Unlock()
}

// last returns when the last of n agents moved the victim out, once all have.
func (w *removalWatch) last(n int) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.out) < n {
		return time.Time{}, false
	}
	var last time.Time
	for _, at := range w.out {
		if at.After(last) {
			last = at
		}
	}
	return last, true
}

// TestPoolRemovalTimes measures, over real servers, the time from killing
// (kill -9) or hanging (SIGSTOP) a replica's mysqld until every agent's
// pool has moved it out, and the probe's query load on a server. It is a
// measurement, not a check: it runs only with SHOAL_MEASURE=1 (make bench
// does not run it; it has the namespace version against HAProxy's checks).
// SHOAL_MEASURE_TRIALS sets the trials per fault (default 20).
func TestPoolRemovalTimes(t *testing.T) {
	if os.Getenv("SHOAL_MEASURE") != "1" {
		t.Skip("measurement: run it with SHOAL_MEASURE=1 go test -run TestPoolRemovalTimes ./internal/agent/ (make bench does not)")
	}
	trials := 20
	if v, err := strconv.Atoi(os.Getenv("SHOAL_MEASURE_TRIALS")); err == nil && v > 0 {
		trials = max(v, 20)
	}
	primary, r1, r2 := replicatedServers(t)
	var agents []*testNode
	watch := &removalWatch{}
	start := func(name string, s *mariadbtest.Server) *testNode {
		var join []string
		if len(agents) > 0 {
			join = []string{agents[0].cfg.Bind}
		}
		c := testConfig(t, name, "fast", "", join...)
		if s != nil {
			c.MySQL.Addr, c.MySQL.User = s.Addr(), "shoal"
		}
		// The same replica leaves and returns every few seconds: flapping by
		// the damping rule, which only ever holds re-entry and would make
		// each trial wait minutes for it.
		c.Pool.Damping = false
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		n := startNode(t, c)
		n.a.Router().Listen(watch.listener(name))
		agents = append(agents, n)
		return n
	}
	start("db1", primary)
	start("db2", r1)
	start("db3", r2)
	start("app1", nil)
	const healthy = "db1|db2,db3|"
	allHealthy := func() bool {
		for _, n := range agents {
			if poolOf(n.a) != healthy {
				return false
			}
		}
		return true
	}
	testkit.WaitFor(t, time.Minute, "healthy pool everywhere", allHealthy)

	// Probe load: queries the probe sends to one server in 10 s.
	questions := func() int {
		var v int
		row := r2.DB().QueryRow("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='QUESTIONS'")
		if err := row.Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	q0 := questions()
	time.Sleep(10 * time.Second)
	qps := float64(questions()-q0-1) / 10 // minus our own first query
	_, h := agents[2].a.LocalHealth()
	t.Logf("probe load on one server: %.1f queries/s, %d connection(s) opened by the probe so far", qps, h.Connects)

	type fault struct {
		name      string
		do, after func(s *mariadbtest.Server)
	}
	faults := []fault{
		{"kill -9", (*mariadbtest.Server).Kill, (*mariadbtest.Server).Restart},
		{"SIGSTOP", (*mariadbtest.Server).Stop, (*mariadbtest.Server).Cont},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "| fault | agents | trials | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|\n")
	for _, f := range faults {
		var times []time.Duration
		for trial := 0; trial < trials; trial++ {
			victim, srv := "db2", r1
			if trial%2 == 1 {
				victim, srv = "db3", r2
			}
			watch.arm(victim)
			// Start at a random phase of the probe interval.
			time.Sleep(time.Duration(trial*37%250) * time.Millisecond)
			at := time.Now()
			f.do(srv)
			var last time.Time
			testkit.WaitFor(t, 30*time.Second, f.name+": "+victim+" out on every agent", func() bool {
				var ok bool
				last, ok = watch.last(len(agents))
				return ok
			})
			d := last.Sub(at)
			times = append(times, d)
			t.Logf("%s trial %d (%s): out everywhere after %s", f.name, trial, victim, d.Round(time.Millisecond))
			f.after(srv)
			testkit.WaitFor(t, time.Minute, "healthy again", allHealthy)
		}
		slices.Sort(times)
		q := func(p float64) time.Duration { return times[int(p*float64(len(times)-1)+0.5)] }
		fmt.Fprintf(&report, "| %s | %d | %d | %d ms | %d ms | %d ms | %d ms |\n", f.name, len(agents), len(times),
			q(0.5).Milliseconds(), q(0.9).Milliseconds(), q(0.99).Milliseconds(), times[len(times)-1].Milliseconds())
	}
	fmt.Fprintf(&report, "\nProbe load: %.1f queries/s on one server, one persistent connection (%d opened in the run before the faults).\n", qps, h.Connects)
	t.Logf("mysqld fault → out of the pool on every agent:\n%s", report.String())
	if out := os.Getenv("SHOAL_MEASURE_OUT_POOL"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
