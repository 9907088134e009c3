//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// Issue 27, isolation: an agent cut off from the fleet must keep its sinks
// as they were, and heal without harm; an agent that can still reach the
// fleet must take out what really failed, however many members failed
// before.
//
// One cluster (3 db + 2 app) serves the app host cuts and then the rack
// loss; the scale-in case builds its own (3 db + 2 app + 7 extra app
// agents: 12 members). The 2|2 split is testPartition (scenarios_split_test.go).
//
//	go test -tags e2e -count=1 -v -run '^TestIsolation$' ./test/e2e/
//	go test -tags e2e -count=1 -v -run 'TestIsolation/db3_app2/app_cut_6s' ./test/e2e/
//
// SHOAL_E2E_ISO_TRIALS sets the number of 1 s and 6 s cuts (default 3 each;
// the 30 s cut runs once).
func TestIsolation(t *testing.T) {
	Require(t)
	t.Run("db3_app2", func(t *testing.T) {
		r := &isoRig{c: NewCluster(t, Options{AppHosts: 2})}
		n := isoTrials()
		t.Run("app_cut_1s", func(t *testing.T) { r.testAppCut(t, time.Second, n) })
		t.Run("app_cut_6s", func(t *testing.T) { r.testAppCut(t, 6*time.Second, n) })
		t.Run("app_cut_30s", func(t *testing.T) { r.testAppCut(t, 30*time.Second, 1) })
		t.Run("rack_loss", r.testRackLoss) // last: it kills db2 and db3
	})
	t.Run("kill7_then_hang", func(t *testing.T) { testKill7ThenHang(t, 0, false) })
	// Issue 38: the hang lands while the 7 still count in the isolation
	// window (pool.isolation_window, 10 s); with one db agent unheard by
	// app1, too.
	for _, d := range isoHangDelays() {
		t.Run("kill7_then_hang_"+d.String(), func(t *testing.T) { testKill7ThenHang(t, d, false) })
		t.Run("kill7_then_hang_"+d.String()+"_db3_unheard", func(t *testing.T) { testKill7ThenHang(t, d, true) })
	}
}

// isoTrials is the number of 1 s and 6 s cuts: $SHOAL_E2E_ISO_TRIALS or 3.
func isoTrials() int {
	if n, err := strconv.Atoi(os.Getenv("SHOAL_E2E_ISO_TRIALS")); err == nil && n > 0 {
		return n
	}
	return 3
}

const (
	// isoDetect bounds the removal of a node that really failed, seen by
	// an agent that can reach the fleet (detection is about 1 s with the
	// fast profile).
	isoDetect = 10 * time.Second
	// isoHeal bounds the return to the healthy pool everywhere after a cut
	// heals.
	isoHeal = 30 * time.Second
	// isoSettle is how long the HAProxy states are still watched once the
	// pool is healthy again after a heal: a late maint or shutdown shows.
	isoSettle = 3 * time.Second
)

type isoRig struct {
	c *Cluster
}

// testAppCut cuts app1's link (bridge side) for cut, trials times, waiting
// for the healthy cluster before each. Each time: both HAProxies keep every
// server in its pre-cut state from the cut to isoSettle after the healthy
// pool is back; no agent's HAProxy sink sends state maint, state drain or
// shutdown sessions; a write session and a read session opened through
// app1's HAProxy before the cut work on the same connection after the heal.
func (r *isoRig) testAppCut(t *testing.T, cut time.Duration, trials int) {
	s := Scenario(t, "iso_app_cut_"+cut.String())
	for i := 1; i <= trials; i++ {
		r.cutOnce(s, cut, i)
	}
}

func (r *isoRig) cutOnce(s *S, cut time.Duration, trial int) {
	c := r.c
	app := c.Apps[0]
	tag := fmt.Sprintf("t%d_", trial)
	if h := c.WaitHealthy(time.Now(), 60*time.Second); !h.OK {
		s.Fatalf("trial %d: cluster not healthy before the cut:\n%s", trial, c.Describe())
	}
	time.Sleep(time.Second) // a settled cluster, not one just healed

	primary := c.Primary()
	ws, err := OpenSession(app.Host, RWPort)
	if err != nil {
		s.Fatalf("trial %d: write session: %v", trial, err)
	}
	defer ws.Close()
	if ws.ServerID != int64(primary.Server.ServerID()) {
		s.Fatalf("trial %d: write session reached server_id %d, want %s's %d", trial, ws.ServerID, primary.Name, primary.Server.ServerID())
	}
	rs, err := OpenSession(app.Host, ROPort)
	if err != nil {
		s.Fatalf("trial %d: read session: %v", trial, err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, _, err = ws.Write(ctx)
	cancel()
	if err != nil {
		s.Fatalf("trial %d: write before the cut: %v", trial, err)
	}
	pre := map[string]map[string]string{}
	for _, a := range c.Apps {
		h, ok := latestHX(c, a.Name)
		if !ok || !c.HealthyHAProxy(h) {
			s.Fatalf("trial %d: %s's HAProxy not healthy before the cut: %s", trial, a.Name, hxString(h))
		}
		pre[a.Name] = h.States
	}

	tCut := time.Now()
	if err := app.Host.LinkDown(); err != nil {
		s.Fatal(err)
	}
	time.Sleep(cut)
	tHeal := time.Now()
	if err := app.Host.LinkUp(); err != nil {
		s.Fatalf("link up: %v", err)
	}
	back := c.WaitHealthy(tHeal, limitFor(isoHeal))
	healthy := within(s, tag+"healthy_after_heal", back, isoHeal)
	time.Sleep(isoSettle)
	tEnd := time.Now()
	if !healthy {
		failWithState(s, c, fmt.Sprintf("trial %d: no healthy pool within %s of the heal", trial, isoHeal))
	}
	r.noteAppView(s, trial, app.Name, tCut, tHeal)

	// The HAProxies keep every server as it was, during the cut and after.
	for _, a := range c.Apps {
		spans, errs := hxChanges(pre[a.Name], c.Obs.HXSnaps(a.Name, tCut, tEnd), tCut)
		s.Count(tag+"haproxy_changes_"+a.Name, len(spans))
		if errs > 0 {
			s.Note("trial %d: %d samples of %s's HAProxy failed", trial, errs, a.Name)
		}
		if len(spans) > 0 {
			s.Errorf("trial %d (cut %s, healed at +%.3fs): %s's HAProxy left its pre-cut states: %s", trial, cut,
				tHeal.Sub(tCut).Seconds(), a.Name, strings.Join(spans, "; "))
		}
	}
	// No sink took a server out or shut its sessions.
	for _, a := range c.Apps {
		// The log shows the commands that formed the cluster: if it shows
		// none, it can no longer be read for them (a changed log line).
		if all, err := a.Agent.SinkCommands(time.Time{}); err != nil || len(all) == 0 {
			s.Errorf("trial %d: %s's log shows no \"haproxy command sent\" line at all (err %v): the check of the sink's commands cannot work", trial, a.Name, err)
		}
		cmds, err := a.Agent.SinkCommands(tCut)
		if err != nil {
			s.Errorf("trial %d: %s's log: %v", trial, a.Name, err)
			continue
		}
		var bad []string
		for _, cmd := range cmds {
			if cmd.Harmful() && !cmd.At.After(tEnd) {
				bad = append(bad, fmt.Sprintf("+%.3fs %s", cmd.At.Sub(tCut).Seconds(), cmd.Command))
			}
		}
		s.Count(tag+"harmful_commands_"+a.Name, len(bad))
		if len(bad) > 0 {
			s.Errorf("trial %d (cut %s, healed at +%.3fs): %s's HAProxy sink sent: %s", trial, cut,
				tHeal.Sub(tCut).Seconds(), a.Name, strings.Join(bad, "; "))
		}
	}
	// The sessions opened before the cut still work, on the same connection.
	lost := 0
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if id, sid, err := ws.Write(ctx); err != nil || id != ws.ConnID {
		lost++
		s.Errorf("trial %d (cut %s): the write session through %s's HAProxy did not survive the heal: connection %d → %d on server_id %d, err %v",
			trial, cut, app.Name, ws.ConnID, id, sid, err)
	}
	if id, sid, err := rs.Read(ctx); err != nil || id != rs.ConnID || sid != rs.ServerID {
		lost++
		s.Errorf("trial %d (cut %s): the read session through %s's HAProxy did not survive the heal: connection %d on server_id %d → %d on %d, err %v",
			trial, cut, app.Name, rs.ConnID, rs.ServerID, id, sid, err)
	}
	s.Count(tag+"sessions_lost", lost)
}

// noteAppView notes what the cut-off agent said about itself during the
// cut: whether and when it reported isolated, and the pools it showed.
func (r *isoRig) noteAppView(s *S, trial int, name string, tCut, tHeal time.Time) {
	var pools []string
	first := time.Duration(-1)
	for _, sn := range r.c.Obs.Snaps(name, tCut, tHeal) {
		if !sn.OK() {
			continue
		}
		if sn.Isolated && first < 0 {
			first = sn.At.Sub(tCut)
		}
		if p := sn.Pool(); !slices.Contains(pools, p) {
			pools = append(pools, p)
		}
	}
	iso := "never isolated"
	if first >= 0 {
		iso = fmt.Sprintf("isolated from +%.3fs", first.Seconds())
	}
	s.Note("trial %d: %s during the cut: %s; pools shown: %s", trial, name, iso, strings.Join(pools, "  "))
}

// testRackLoss kills db2 and db3 at once (agent and mysqld, kill -9): db1,
// app1 and app2 can still reach a majority of the fleet (3 of 5), so they
// take db2 and db3 out within isoDetect, never report isolated, and db1
// stays the writer on every one of them and in both HAProxies.
func (r *isoRig) testRackLoss(t *testing.T) {
	s := Scenario(t, "iso_rack_loss")
	c := r.c
	if h := c.WaitHealthy(time.Now(), 60*time.Second); !h.OK {
		s.Fatalf("cluster not healthy before the rack loss:\n%s", c.Describe())
	}
	time.Sleep(time.Second)
	db1 := c.Primary()
	lost := c.Replicas()
	var lostNames []string
	for _, d := range lost {
		lostNames = append(lostNames, d.Name)
	}
	survivors := c.AgentNames(lostNames...)

	t0 := time.Now()
	for _, d := range lost {
		_ = d.Agent.Signal(syscall.SIGKILL)
		if pid := d.Server.PID(); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, d := range lost {
		d.Agent.Kill()
		// The mysqld got its SIGKILL above: wait for it to be gone rather
		// than kill it again (mariadbtest's Kill fails the whole test when
		// the process has already exited).
		for deadline := time.Now().Add(10 * time.Second); d.Server.PID() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if pid := d.Server.PID(); pid > 0 {
			s.Fatalf("%s's mysqld (pid %d) still runs 10 s after SIGKILL", d.Name, pid)
		}
	}
	s.Note("killed %v (agents and mysqld) in %s", lostNames, time.Since(t0).Round(time.Millisecond))

	res := c.Obs.WaitAgents(survivors, t0, limitFor(isoDetect), func(sn Snap) bool {
		if !sn.OK() || !slices.Equal(sn.Writers, []string{db1.Name}) {
			return false
		}
		for _, n := range lostNames {
			if sn.Role(n) != "out" {
				return false
			}
		}
		return true
	})
	if !within(s, "lost_out_on_survivors", res, isoDetect) {
		failWithState(s, c, fmt.Sprintf("%v not out (with %s the writer) on every survivor", lostNames, db1.Name))
	}
	for _, a := range c.Apps {
		hx := c.Obs.WaitHAProxy(a.Name, t0, limitFor(isoDetect), func(h HXSnap) bool {
			if !slices.Equal(h.Ready(RWBackend), []string{db1.Name}) {
				return false
			}
			for _, n := range lostNames {
				if h.States[RWBackend+"/"+n] == "ready" || h.States[ROBackend+"/"+n] == "ready" {
					return false
				}
			}
			return true
		})
		within(s, "lost_out_of_haproxy_"+a.Name, hx, isoDetect)
	}
	time.Sleep(2 * time.Second)
	tEnd := time.Now()

	// db1 the writer throughout, nobody isolated.
	for _, n := range survivors {
		notWriter, isolated := 0, 0
		var first string
		for _, sn := range c.Obs.Snaps(n, t0, tEnd) {
			if !sn.OK() {
				continue
			}
			if !slices.Equal(sn.Writers, []string{db1.Name}) {
				notWriter++
				if first == "" {
					first = fmt.Sprintf("+%.3fs %s", sn.At.Sub(t0).Seconds(), sn.Pool())
				}
			}
			if sn.Isolated {
				isolated++
			}
		}
		s.Count("samples_without_db1_writer_"+n, notWriter)
		s.Count("isolated_samples_"+n, isolated)
		if notWriter > 0 {
			s.Errorf("%s: %d samples without %s as the only writer, the first %s", n, notWriter, db1.Name, first)
		}
		if isolated > 0 {
			s.Errorf("%s reported isolated in %d samples after losing 2 of 5 members (it reaches 3 of 5)", n, isolated)
		}
	}
	for _, a := range c.Apps {
		spans, _ := hxChanges(map[string]string{RWBackend + "/" + db1.Name: "ready"}, c.Obs.HXSnaps(a.Name, t0, tEnd), t0)
		if len(spans) > 0 {
			s.Errorf("%s's HAProxy: %s", a.Name, strings.Join(spans, "; "))
		}
		ws, err := OpenSession(a.Host, RWPort)
		if err != nil {
			s.Errorf("%s: write session after the rack loss: %v", a.Name, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, sid, err := ws.Write(ctx)
		cancel()
		ws.Close()
		if err != nil || sid != int64(db1.Server.ServerID()) {
			s.Errorf("%s: write after the rack loss reached server_id %d (err %v), want %s's %d", a.Name, sid, err, db1.Name, db1.Server.ServerID())
		}
	}
}

// testKill7ThenHang: 3 db + 2 app + 7 extra app agents (12 members); the 7
// are killed at once (a scale-in without leave, a lost rack of app hosts).
// Losing app agents never freezes db routing: no survivor reports isolated.
// Then db2 hangs (its agent and its mysqld SIGSTOPped): every surviving
// agent takes it out (not held) and both HAProxies stop routing to it,
// within a normal detection time. The hang comes delay after the kill (at
// least once the 7 are failed everywhere), or, with delay 0, a second after
// the 7 are failed everywhere.
//
// With unheard, app1 drops the gossip packets (UDP) of the other replica
// (db3) from before the kill: memberlist still sees db3 alive through
// others (indirect probes, TCP pings) but app1's own pings get no answer
// from it. Within the window the 7 keep app1 from a majority of the
// members, so only the db agents can make it connected, and it reaches one
// of the two left directly: issue 38, the survivor held the hung host
// 14-29 s "isolated" while db1, which it reaches, saw db2 failed too. It
// must reach db3 through the peers it reaches and take db2 out.
func testKill7ThenHang(t *testing.T, delay time.Duration, unheard bool) {
	name := "iso_kill7_then_hang"
	if delay > 0 {
		name += "_" + delay.String()
	}
	if unheard {
		name += "_db3_unheard"
	}
	s := Scenario(t, name)
	c := NewCluster(s, Options{AppHosts: 2})
	h := c.AddHost(s)
	var seeds []string
	for _, d := range c.DBs {
		seeds = append(seeds, d.Agent.GossipAddr())
	}
	var extra []*Agent
	var extraNames []string
	for i := range 7 {
		name := fmt.Sprintf("app%d", len(c.Apps)+i+1)
		extra = append(extra, c.AddAgent(s, h, AgentSpec{Name: name, Role: "app", Key: c.Key, Join: seeds,
			GossipPort: GossipPort + 10 + i, HTTPPort: -1}))
		extraNames = append(extraNames, name)
	}
	allAre := func(status string) func(Snap) bool {
		return func(sn Snap) bool {
			if !sn.OK() {
				return false
			}
			for _, n := range extraNames {
				if sn.Members[n] != status {
					return false
				}
			}
			return true
		}
	}
	joined := c.Obs.WaitAgents(c.AgentNames(), time.Now(), 60*time.Second, func(sn Snap) bool { return allAre("alive")(sn) && c.AllAlive(sn) })
	info(s, "extras_joined", joined)
	if !joined.OK {
		s.Fatalf("the 7 extra agents did not join everywhere:\n%s", c.Describe())
	}
	s.Note("members: %d (%s)", len(c.Obs.Latest()[c.Apps[0].Name].Members), c.Obs.Latest()[c.Apps[0].Name].MembersString())
	hung := c.Replicas()[0]
	if unheard {
		other := c.Replicas()[1]
		if err := c.Apps[0].Host.IPTables("-A", "INPUT", "-s", other.Host.IP, "-p", "udp", "--sport", fmt.Sprint(GossipPort), "-j", "DROP"); err != nil {
			s.Fatal(err)
		}
		s.Note("%s drops the gossip packets (UDP) of %s", c.Apps[0].Name, other.Name)
	}
	time.Sleep(2 * time.Second) // members of a settled cluster, not joiners

	t0 := time.Now()
	for _, a := range extra {
		_ = a.Signal(syscall.SIGKILL)
	}
	for _, a := range extra {
		a.Kill()
	}
	seen := c.Obs.WaitAgents(c.AgentNames(), t0, 30*time.Second, allAre("failed"))
	info(s, "seven_failed_everywhere", seen)
	if !seen.OK {
		s.Fatalf("the 7 killed agents not failed everywhere:\n%s", c.Describe())
	}
	if delay > 0 {
		time.Sleep(time.Until(t0.Add(delay)))
	} else {
		time.Sleep(time.Second)
	}

	survivors := c.AgentNames(hung.Name)
	tHang := time.Now()
	s.Note("hang at +%.3fs after the kill", tHang.Sub(t0).Seconds())
	if err := hung.Agent.Signal(syscall.SIGSTOP); err != nil {
		s.Fatal(err)
	}
	hung.Server.Stop()
	s.Cleanup(func() {
		_ = hung.Agent.Signal(syscall.SIGCONT)
		if pid := hung.Server.PID(); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})

	res := c.Obs.WaitAgents(survivors, tHang, limitFor(isoDetect), func(sn Snap) bool { return sn.OK() && sn.Role(hung.Name) == "out" })
	if !within(s, "hung_out_on_every_survivor", res, isoDetect) {
		failWithState(s, c, hung.Name+" (hung) not out on every survivor")
		// How long it stayed: up to the isolation bound and a margin.
		res = c.Obs.WaitAgents(survivors, tHang, 70*time.Second, func(sn Snap) bool { return sn.OK() && sn.Role(hung.Name) == "out" })
	}
	for _, n := range survivors {
		if d, ok := res.Per[n]; ok {
			s.Note("%s: %s (hung) out %.3fs after the hang", n, hung.Name, d.Seconds())
		} else {
			s.Note("%s: %s (hung) not out %.3fs after the hang", n, hung.Name, time.Since(tHang).Seconds())
		}
	}
	for _, a := range c.Apps {
		hx := c.Obs.WaitHAProxy(a.Name, tHang, limitFor(isoDetect), func(h HXSnap) bool {
			return h.States[RWBackend+"/"+hung.Name] != "ready" && h.States[ROBackend+"/"+hung.Name] != "ready"
		})
		if !within(s, "hung_out_of_haproxy_"+a.Name, hx, isoDetect) {
			last, _ := latestHX(c, a.Name)
			s.Errorf("%s's HAProxy still routes to %s (hung) %.1fs after the hang: %s", a.Name, hung.Name, time.Since(tHang).Seconds(), hxString(last))
		}
	}
	// Not held anywhere: not in a role, no "held" detail, no frozen sink.
	for _, a := range c.Agents() {
		if a == hung.Agent {
			continue
		}
		var p client.PoolResponse
		if err := c.Get(a, "/v1/pool", &p); err != nil {
			s.Errorf("%s /v1/pool: %v", a.Name, err)
			continue
		}
		for _, n := range append(slices.Clone(p.Writers), p.Readers...) {
			if n.Name == hung.Name {
				s.Errorf("%s: %s (hung) still in the pool: reason %q detail %q", a.Name, hung.Name, n.Reason, n.Detail)
			}
		}
		for _, n := range p.Out {
			if n.Name == hung.Name && strings.Contains(n.Detail, "held") {
				s.Errorf("%s: %s (hung) out but held: reason %q detail %q", a.Name, hung.Name, n.Reason, n.Detail)
			}
		}
		for _, sk := range p.Sinks {
			if sk.Frozen {
				s.Errorf("%s: sink %s frozen (%s) %.1fs after the hang", a.Name, sk.Name, p.Isolation, time.Since(tHang).Seconds())
			}
		}
	}
	// Reads through each app host's read port answer (none goes to the
	// hung server).
	for _, a := range c.Apps {
		failed := 0
		var last error
		for range 4 {
			if _, err := QueryOnce(a.Host, ROPort, "SELECT @@server_id"); err != nil {
				failed++
				last = err
			}
		}
		s.Count("reads_failed_"+a.Name, failed)
		if failed > 0 {
			s.Errorf("%s: %d of 4 reads through HAProxy failed after the hang: %v", a.Name, failed, last)
		}
	}
	// Scale-in never freezes db routing: no survivor isolated since the kill.
	tEnd := time.Now()
	for _, n := range survivors {
		isolated, first := 0, time.Duration(-1)
		for _, sn := range c.Obs.Snaps(n, t0, tEnd) {
			if sn.OK() && sn.Isolated {
				isolated++
				if first < 0 {
					first = sn.At.Sub(t0)
				}
			}
		}
		s.Count("isolated_samples_"+n, isolated)
		if isolated > 0 {
			s.Errorf("%s reported isolated (from +%.3fs after the kill, %d samples): losing app agents froze db routing", n, first.Seconds(), isolated)
		}
	}
}

// latestHX is the latest answered sample of an HAProxy.
func latestHX(c *Cluster, name string) (HXSnap, bool) {
	hs := c.Obs.HXSnaps(name, time.Now().Add(-2*time.Second), time.Now())
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Err == "" {
			return hs[i], true
		}
	}
	return HXSnap{Err: "no sample"}, false
}

// hxChanges lists, for each server of pre, the spans of samples in which
// its state differed from pre's (absent counts as a difference), as
// "backend/server=state from +Xs for Ys" relative to t0; and how many
// samples failed (skipped).
func hxChanges(pre map[string]string, snaps []HXSnap, t0 time.Time) (spans []string, errs int) {
	keys := make([]string, 0, len(pre))
	for k := range pre {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, h := range snaps {
		if h.Err != "" {
			errs++
		}
	}
	for _, k := range keys {
		var cur string // the deviating state, "" while as pre
		var from time.Time
		closeSpan := func(at time.Time) {
			spans = append(spans, fmt.Sprintf("%s=%s from +%.3fs for %.3fs", k, cur, from.Sub(t0).Seconds(), at.Sub(from).Seconds()))
		}
		for _, h := range snaps {
			if h.Err != "" {
				continue
			}
			st, ok := h.States[k]
			if !ok {
				st = "absent"
			}
			if st == pre[k] {
				st = ""
			}
			if st == cur {
				continue
			}
			if cur != "" {
				closeSpan(h.At)
			}
			cur, from = st, h.At
		}
		if cur != "" && len(snaps) > 0 {
			spans = append(spans, fmt.Sprintf("%s=%s from +%.3fs until the end (+%.3fs)", k, cur, from.Sub(t0).Seconds(),
				snaps[len(snaps)-1].At.Sub(t0).Seconds()))
		}
	}
	return spans, errs
}

// isoHangDelays are the delays from the kill of the 7 to the hang:
// $SHOAL_E2E_ISO_DELAYS (seconds, comma-separated) or 4 and 10 s.
func isoHangDelays() []time.Duration {
	var out []time.Duration
	for _, f := range strings.Split(os.Getenv("SHOAL_E2E_ISO_DELAYS"), ",") {
		if n, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err == nil && n > 0 {
			out = append(out, time.Duration(n*float64(time.Second)))
		}
	}
	if len(out) == 0 {
		return []time.Duration{4 * time.Second, 10 * time.Second}
	}
	return out
}
