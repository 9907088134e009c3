//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// stabilityWindow is $SHOAL_E2E_STABILITY (a Go duration) or 3 minutes.
func stabilityWindow(s *S) time.Duration {
	v := os.Getenv("SHOAL_E2E_STABILITY")
	if v == "" {
		return 3 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		s.Fatalf("SHOAL_E2E_STABILITY=%q: want a positive duration such as 60s", v)
	}
	return d
}

// stabilityDelay is $SHOAL_E2E_DELAY (a Go duration, 0 for none) or 50 ms.
func stabilityDelay(s *S) time.Duration {
	v := os.Getenv("SHOAL_E2E_DELAY")
	if v == "" {
		return 50 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		s.Fatalf("SHOAL_E2E_DELAY=%q: want a duration such as 50ms, or 0", v)
	}
	return d
}

// 9. Stability: 5 % packet loss into every host, every packet a host sends
// delayed by 50 ms (so 100 ms more round trip, like netem on every host's
// interface), and both CPUs saturated for a bounded window: no member
// falsely marked failed, no false pool removal.
func testStability(t *testing.T) {
	s := Scenario(t, "stability")
	window, delay := stabilityWindow(s), stabilityDelay(s)
	c := NewCluster(s, Options{})
	hosts := []*Host{}
	for _, a := range c.Agents() {
		hosts = append(hosts, a.Host)
	}
	from, to := c.DBs[0].Host, c.DBs[1].Agent.HTTPAddr()
	rtt0, err := from.MeasureRTT(to)
	if err != nil {
		s.Fatal(err)
	}
	var delayers []*Delayer
	if delay > 0 {
		for _, h := range hosts {
			d, err := h.StartDelay(delay)
			if err != nil {
				s.Fatal(err)
			}
			delayers = append(delayers, d)
			defer d.Stop()
		}
		rtt, err := from.MeasureRTT(to)
		if err != nil {
			s.Fatal(err)
		}
		s.Note("TCP connect %s → %s: %s before the delay, %s with it", from.NS, to, rtt0.Round(time.Microsecond), rtt.Round(time.Microsecond))
		if rtt < 2*delay*9/10 {
			s.Fatalf("the delay is not applied: round trip %s with %s each way", rtt, delay)
		}
	}
	stress, err := StartProc("stress-ng", "", filepath.Join(c.Dir, "stress-ng.log"), nil,
		"stress-ng", "--cpu", "2", "--timeout", fmt.Sprintf("%ds", int(window.Seconds())+5))
	if err != nil {
		s.Fatal(err)
	}
	defer stress.Kill()
	for _, h := range hosts {
		if err := h.SetLoss(0.05); err != nil {
			s.Fatal(err)
		}
	}
	cpu0 := cpuTimes()
	t0 := time.Now()
	s.Note("5%% loss into %d hosts, %s delay out of each, stress-ng --cpu 2, for %s", len(hosts), delay, window)
	time.Sleep(window)
	t1 := time.Now()
	cpu1 := cpuTimes()
	if total := cpu1[0] - cpu0[0]; total > 0 {
		busy := 100 * float64(total-(cpu1[1]-cpu0[1])) / float64(total)
		s.Count("cpu_busy_percent", int(busy))
		if busy < 80 {
			s.Errorf("CPUs only %.0f%% busy during the window: the saturation was not applied", busy)
		}
	}
	var dropped int64
	for _, h := range hosts {
		n, err := h.LossDrops()
		if err != nil {
			s.Error(err)
		}
		dropped += n
		if err := h.ClearRules(); err != nil {
			s.Error(err)
		}
	}
	stress.Kill()
	var delayed, verdictFailures int64
	for _, d := range delayers {
		d.Stop()
		delayed += d.Packets.Load()
		verdictFailures += d.Failures.Load()
	}
	s.Count("packets_delayed", int(delayed))
	if verdictFailures > 0 {
		s.Count("delay_verdict_failures", int(verdictFailures))
	}
	s.Count("packets_dropped_by_loss_rules", int(dropped))
	if dropped == 0 {
		s.Error("the loss rules dropped nothing: the fault was not applied")
	}

	healthy := c.HealthyPool()
	memberFailures, poolRemovals, pollErrors, samples := 0, 0, 0, 0
	for _, a := range c.AgentNames() {
		var prev *Snap
		for _, sn := range c.Obs.Snaps(a, t0, t1) {
			samples++
			if !sn.OK() {
				pollErrors++
				continue
			}
			if prev != nil {
				for m, st := range sn.Members {
					if prev.Members[m] == "alive" && st != "alive" {
						memberFailures++
						s.Errorf("%s saw %s go %s at +%s", a, m, st, sn.At.Sub(t0).Round(time.Millisecond))
					}
				}
				for _, d := range c.DBs {
					if prev.Role(d.Name) != "out" && sn.Role(d.Name) == "out" {
						poolRemovals++
						s.Errorf("%s removed %s (%s) at +%s", a, d.Name, sn.Out[d.Name], sn.At.Sub(t0).Round(time.Millisecond))
					}
				}
			} else if sn.Pool() != healthy {
				s.Errorf("%s: pool %s at the start of the window", a, sn.Pool())
			}
			p := sn
			prev = &p
		}
	}
	hxChanges := 0
	for _, h := range c.Obs.HXSnaps(c.Apps[0].Name, t0, t1) {
		if h.Err == "" && !c.HealthyHAProxy(h) {
			hxChanges++
		}
	}
	s.Measure("window", t1.Sub(t0), 0, true)
	s.Count("samples", samples)
	s.Count("unanswered_samples", pollErrors)
	s.Count("false_member_failures", memberFailures)
	s.Count("false_pool_removals", poolRemovals)
	s.Count("haproxy_samples_off_healthy", hxChanges)
	if hxChanges > 0 {
		s.Errorf("HAProxy left the healthy state in %d samples", hxChanges)
	}
	if r := c.WaitHealthy(t1, 30*time.Second); !r.OK {
		failWithState(s, c, "cluster not healthy after the window")
	}
}

// 12. A member-failed hook that hangs (sleep 1000) on the app host, during a
// storm of member failures: the app's pool still drops a killed replica
// within scenario 2's bound.
func testHungHook(t *testing.T) {
	s := Scenario(t, "hung_hook")
	c := NewCluster(s, Options{AppConfig: "event_handlers:\n  - member-failed=/bin/sleep 1000\n"})
	app := c.Apps[0]

	// The storm: three extra agents (few enough that losing them is not
	// isolation: 3 of 7 members), killed at once.
	h := c.AddHost(s)
	var storm []*Agent
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Agent.GossipAddr())
	}
	for i := range 3 {
		storm = append(storm, c.AddAgent(s, h, AgentSpec{Name: fmt.Sprintf("storm%d", i+1), Role: "app", Key: c.Key,
			Join: seeds, GossipPort: GossipPort + 10 + i, HTTPPort: -1}))
	}
	r := c.Obs.WaitAgents([]string{app.Name}, time.Now(), 30*time.Second, func(sn Snap) bool {
		return memberIs("storm1", "alive")(sn) && memberIs("storm2", "alive")(sn) && memberIs("storm3", "alive")(sn)
	})
	if !r.OK {
		s.Fatalf("storm agents did not join; latest:\n%s", c.Describe())
	}
	t0 := time.Now()
	for _, a := range storm {
		a.Kill()
	}
	r = c.Obs.WaitAgents([]string{app.Name}, t0, 20*time.Second, func(sn Snap) bool {
		return memberIs("storm1", "failed")(sn) && memberIs("storm2", "failed")(sn) && memberIs("storm3", "failed")(sn)
	})
	info(s, "storm_failed_on_app", r)
	var hooks client.HooksResponse
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Get(app.Agent, "/v1/hooks", &hooks)
		if err == nil && len(hooks.Handlers) == 1 && hooks.Handlers[0].Running {
			break
		}
		if time.Now().After(deadline) {
			s.Fatalf("the member-failed hook is not running (err %v): %+v", err, hooks.Handlers)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Count("hook_queue_depth_at_fault", hooks.Handlers[0].QueueDepth)

	victim := c.Replicas()[0]
	t1 := time.Now()
	victim.Server.Kill()
	const bound = 3 * time.Second
	r = c.Obs.WaitAgents([]string{app.Name}, t1, limitFor(bound), isOut(victim.Name))
	if !within(s, "app_pool_removal_with_hung_hook", r, bound) {
		failWithState(s, c, victim.Name+" not out on "+app.Name)
	}
	r = c.Obs.WaitAgents(c.AgentNames(), t1, limitFor(bound), isOut(victim.Name))
	within(s, "out_on_every_agent", r, bound)
	within(s, "haproxy_maint", c.Obs.WaitHAProxy(app.Name, t1, limitFor(bound), func(h HXSnap) bool {
		return h.States[ROBackend+"/"+victim.Name] == "maint"
	}), bound)
	if err := c.Get(app.Agent, "/v1/hooks", &hooks); err != nil || len(hooks.Handlers) != 1 || !hooks.Handlers[0].Running {
		s.Errorf("the hook should still hang after the removal (err %v): %+v", err, hooks.Handlers)
	}
}

// cpuTimes returns the machine's total and idle (idle+iowait) jiffies from
// /proc/stat.
func cpuTimes() [2]uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]uint64{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var out [2]uint64
	for i, v := range f[1:] {
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		var n uint64
		fmt.Sscan(v, &n)
		out[0] += n
		if i == 3 || i == 4 {
			out[1] += n
		}
	}
	return out
}
