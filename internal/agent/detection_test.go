package agent

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestDetectionTimes measures, per profile, the time from stopping an agent
// without a leave until every survivor has received member-failed for it.
// It is a measurement, not a check: it runs only with SHOAL_MEASURE=1
// (make bench does not run it). SHOAL_MEASURE_TRIALS sets the trials per profile
// (default 10), SHOAL_MEASURE_PROFILES the profiles (default all).
func TestDetectionTimes(t *testing.T) {
	if os.Getenv("SHOAL_MEASURE") != "1" {
		t.Skip("measurement: run it with SHOAL_MEASURE=1 go test -run TestDetectionTimes ./internal/agent/ (make bench does not)")
	}
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("SHOAL_MEASURE_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	profiles := gossip.ProfileNames()
	if v := os.Getenv("SHOAL_MEASURE_PROFILES"); v != "" {
		profiles = strings.Split(v, ",")
	}
	const size = 5
	var report strings.Builder
	fmt.Fprintf(&report, "| profile | agents | trials | p50 | p90 | max |\n|---|---|---|---|---|---|\n")
	for _, prof := range profiles {
		nodes := startCluster(t, size, prof, "")
		var times []time.Duration
		for trial := 0; trial < trials; trial++ {
			victim := nodes[len(nodes)-1]
			survivors := nodes[:len(nodes)-1]
			subs := make([]*Subscription, len(survivors))
			for i, s := range survivors {
				subs[i] = s.a.Subscribe(1024)
			}
			start := time.Now()
			victim.a.Shutdown()
			var last time.Duration
			for i, sub := range subs {
				d, ok := waitFailed(sub, victim.cfg.Node, start, 5*time.Minute)
				sub.Close()
				if !ok {
					t.Fatalf("%s: survivor %s never saw %s failed", prof, survivors[i].cfg.Node, victim.cfg.Node)
				}
				last = max(last, d)
			}
			times = append(times, last)
			t.Logf("%s trial %d: %s", prof, trial, last.Round(time.Millisecond))
			// Replace the victim with a fresh member to keep the size.
			name := fmt.Sprintf("%s-t%d", prof, trial)
			nodes = append(survivors, startNode(t, testConfig(t, name, prof, "", nodes[0].cfg.Bind)))
			testkit.WaitFor(t, time.Minute, "replacement joined", func() bool {
				for _, n := range nodes {
					if statusOf(n.a, name) != serf.StatusAlive {
						return false
					}
				}
				return true
			})
		}
		for _, n := range nodes {
			n.a.Shutdown()
		}
		slices.Sort(times)
		q := func(p float64) time.Duration { return times[int(p*float64(len(times)-1)+0.5)] }
		fmt.Fprintf(&report, "| %s | %d | %d | %.2f s | %.2f s | %.2f s |\n", prof, size, len(times),
			q(0.5).Seconds(), q(0.9).Seconds(), times[len(times)-1].Seconds())
	}
	t.Logf("kill (gossip stopped, no leave) → every survivor received member-failed:\n%s", report.String())
	if out := os.Getenv("SHOAL_MEASURE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFailed(sub *Subscription, name string, start time.Time, limit time.Duration) (time.Duration, bool) {
	timeout := time.After(limit)
	for {
		select {
		case e := <-sub.C:
			me, ok := e.(serf.MemberEvent)
			if !ok || me.Type != serf.EventMemberFailed {
				continue
			}
			for _, m := range me.Members {
				if m.Name == name {
					return time.Since(start), true
				}
			}
		case <-timeout:
			return 0, false
		}
	}
}
