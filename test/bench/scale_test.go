//go:build bench

package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/test/e2e"
)

// Suite 5 (scale) and the `shoal members` part of suite 6.
//
// Environment, besides BENCH_QUICK:
//
//	BENCH_SCALE_SIZES=100,300,1000   cluster sizes (full default; QUICK: 100)
//	BENCH_SCALE_PROFILES=fast,lan    profiles (default fast only: lan at every
//	                                 size doubles the run, past the 14-minute budget)
//	BENCH_SCALE_WINDOW=5m            observation window per size (full 5m, QUICK 20s)

// scaleTarget is the project's target at 1,000 members.
const (
	scaleTargetSize = 1000
	scaleTargetP99  = 3.0 // seconds, failure known to all
)

// scaleMembersDone is set when TestScale measured `shoal members` on its
// own cluster, so that TestMembersLatency in the same run need not form
// another one.
var scaleMembersDone *membersResult

// scaleNotFormed records, per profile, the smallest size TestScale could
// not form in this process, so that TestMembersLatency does not spend
// minutes trying a larger one on the same machine.
var scaleNotFormed = map[string]int{}

type scaleRun struct {
	profile string
	size    int
	c       *scaleCluster

	window             time.Duration
	trials             []detectTrial
	liveStart, liveEnd int
	cnt                counterSnap
	cpu, peak          cpuUse
	rss                float64
	falseEv, falseMem  int
	flaps              int
	dropped            uint64
	fallback           bool // run because fast did not form at this size
	memHit             *atomic.Bool
}

func envList(name string, def []string) []string {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func scaleSizes(t *testing.T) []int {
	var sizes []int
	for _, s := range envList("BENCH_SCALE_SIZES", Pick([]string{"100", "300", "1000"}, []string{"100"})) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("BENCH_SCALE_SIZES: bad size %q", s)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

func scaleProfiles(t *testing.T) []string {
	ps := envList("BENCH_SCALE_PROFILES", []string{"fast"})
	for _, p := range ps {
		if _, ok := gossip.Profiles[p]; !ok {
			t.Fatalf("BENCH_SCALE_PROFILES: unknown profile %q (have %v)", p, gossip.ProfileNames())
		}
	}
	return ps
}

func scaleWindow(t *testing.T) time.Duration {
	if v := os.Getenv("BENCH_SCALE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BENCH_SCALE_WINDOW: %v", err)
		}
		return d
	}
	return Pick(5*time.Minute, 20*time.Second)
}

// detectLimit bounds one detection trial: well past the profile's Lifeguard
// maximum suspicion timeout at 1,000 members.
func detectLimit(profile string) time.Duration {
	if profile == "fast" {
		return 30 * time.Second
	}
	return 150 * time.Second
}

// formLimit bounds the wait for convergence (QUICK: shorter, to keep to
// its 3-minute budget).
func formLimit(n int) time.Duration {
	return Pick(max(60*time.Second, time.Duration(n)*240*time.Millisecond), max(30*time.Second, time.Duration(n)*100*time.Millisecond))
}

// TestScale: clusters of 100, 300 and 1,000 in-process agents; failure
// detection, false failures, bandwidth and CPU per size.
func TestScale(t *testing.T) {
	sizes := scaleSizes(t)
	profiles := scaleProfiles(t)
	window := scaleWindow(t)
	trials := Pick(10, 2)
	counters := installGossipCounters(t)
	defer startMemGuard("TestScale")()
	key, err := agent.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	bin := e2e.ShoalBin(t) // built before any cluster runs
	suiteStart := time.Now()
	// The suite keeps to its time budget: when formation took long or runs
	// were added (fallbacks), the remaining windows shrink (never below
	// minWindow); the tables give each window's real length.
	budget := Pick(14*time.Minute, 100*time.Second)
	membersReserve := Pick(100*time.Second, 15*time.Second)
	type plan struct {
		prof     string
		n        int
		fallback bool
	}
	var queue []plan
	for _, prof := range profiles {
		for _, n := range sizes {
			queue = append(queue, plan{prof, n, false})
		}
	}
	var runs []scaleRun
	var skipped []string
	failedAt := map[string]int{} // profile → smallest size that did not form
	type formedAt struct {
		n    int
		peak float64 // the process's peak cores while it ran
	}
	lastFormed := map[string]formedAt{}
	for qi := 0; qi < len(queue); qi++ {
		p := queue[qi]
		if f := failedAt[p.prof]; f != 0 && p.n > f {
			skipped = append(skipped, fmt.Sprintf("`%s` × %d: not attempted, `%s` did not form at %d", p.prof, p.n, p.prof, f))
			continue
		}
		remaining := 0
		for _, q := range queue[qi:] {
			if f := failedAt[q.prof]; f == 0 || q.n <= f {
				remaining++
			}
		}
		left := budget - time.Since(suiteStart)
		if scaleMembersDone == nil {
			left -= membersReserve
		}
		allot := left / time.Duration(max(1, remaining))
		if lf, ok := lastFormed[p.prof]; ok {
			// In one process the agents share the machine's cores; a size
			// whose CPU would be several times what the machine has does
			// not form (measured: the scheduler starves the agents'
			// goroutines for minutes), and trying costs the suite's whole
			// budget. Predict from the last size that formed.
			if need := lf.peak * float64(p.n) / float64(lf.n); need > 2*float64(runtime.NumCPU()) {
				skipped = append(skipped, fmt.Sprintf("`%s` × %d: not attempted: `%s` × %d peaked at %.2f cores, so %d agents would need about %.1f cores on this %d-core machine",
					p.prof, p.n, p.prof, lf.n, lf.peak, p.n, need, runtime.NumCPU()))
				failedAt[p.prof] = p.n
				if old, ok := scaleNotFormed[p.prof]; !ok || p.n < old {
					scaleNotFormed[p.prof] = p.n
				}
				continue
			}
		}
		r := runScale(t, counters, p.prof, p.n, key, window, allot, trials)
		r.fallback = p.fallback
		if r.c.formed {
			lastFormed[p.prof] = formedAt{p.n, r.peak.procCores}
		}
		if !r.c.formed {
			failedAt[p.prof] = p.n
			if old, ok := scaleNotFormed[p.prof]; !ok || p.n < old {
				scaleNotFormed[p.prof] = p.n
			}
			if p.prof == "fast" && !slices.Contains(profiles, "lan") {
				// What does work where fast cannot form: lan at that size and up.
				for _, n := range sizes {
					if n >= p.n {
						queue = append(queue, plan{"lan", n, true})
					}
				}
			}
		}
		// `shoal members` is measured on the largest cluster that formed
		// (the target size when it does).
		if r.c.formed && (scaleMembersDone == nil || p.n > scaleMembersDone.size) && len(r.c.nodes) > 0 && len(r.c.nodes[0].a.Members()) >= p.n {
			runtime.GC()
			m := measureMembers(t, bin, r.c.nodes[0].a, p.n, p.prof, Pick(200, 20), Pick(30, 5))
			m.formed = r.c.formed
			scaleMembersDone = &m
			if m.err != nil {
				t.Logf("members: %v (reported in the section)", m.err)
			}
			t.Logf("members: %d listed, API p50 %.3f s, CLI p50 %.3f s", m.listed, Summarize(m.api).P50, Summarize(m.cliTable).P50)
		}
		if r.c.hung {
			go r.c.shutdown() // may block on the agents' locks: do not wait
		} else {
			r.c.shutdown()
		}
		runs = append(runs, r)
		time.Sleep(2 * time.Second) // let sockets close before the next cluster
	}
	elapsed := time.Since(suiteStart)
	WriteSection(t, "50-scale", scaleSection(runs, skipped, sizes, profiles, window, trials, elapsed, scaleMembersDone))
}

// runScale forms one cluster, observes it for the window with detection
// trials inside, and returns the measurements. The caller shuts it down.
func runScale(t *testing.T, counters *gossipCounters, prof string, n int, key string, window, allot time.Duration, trials int) scaleRun {
	t.Helper()
	t.Logf("%s × %d: forming", prof, n)
	runStart := time.Now()
	c, err := formScaleCluster(t, n, prof, key, formLimit(n), counters)
	r := scaleRun{profile: prof, size: n, c: c, memHit: new(atomic.Bool)}
	if err != nil {
		go c.shutdown()
		t.Fatalf("%s × %d: %v", prof, n, err)
	}
	if !c.formed {
		t.Logf("%s × %d: did NOT form: %s", prof, n, c.note)
		r.rss = rssMiB()
		return r
	}
	t.Logf("%s × %d: formed in %s (joined %s, %d batches)", prof, n, c.formedIn.Round(time.Millisecond), c.joinedIn.Round(time.Millisecond), c.batches)
	settle := Pick(10*time.Second, 3*time.Second)
	time.Sleep(settle)
	window = min(window, max(Pick(60*time.Second, 20*time.Second), allot-time.Since(runStart)))
	c.subscribe()
	r.liveStart = len(c.live())
	cnt0, cpu0 := counters.snap(), takeCPU()
	sampler := startCPUSampler(5 * time.Second)
	memStop := make(chan struct{})
	go memWatch(r.memHit, memStop)
	defer close(memStop)
	winStart := time.Now()
	for i := 0; i < trials && !r.memHit.Load(); i++ {
		tr, err := c.killAndWait(detectLimit(prof), r.memHit)
		if err != nil {
			t.Fatalf("%s × %d: %v", prof, n, err)
		}
		tr.killedAfter = time.Since(winStart)
		r.trials = append(r.trials, tr)
		if tr.complete {
			t.Logf("%s × %d trial %d: %s failed: first %s, all %d %s", prof, n, i, tr.victim, tr.first.Round(time.Millisecond), tr.observers, tr.all.Round(time.Millisecond))
		} else {
			t.Logf("%s × %d trial %d: %s failed: only %d of %d knew after %s", prof, n, i, tr.victim, tr.knew, tr.observers, tr.all)
		}
		time.Sleep(time.Second + rand.N(time.Second))
	}
	for time.Now().Before(winStart.Add(window)) && !r.memHit.Load() {
		time.Sleep(time.Second)
	}
	if r.memHit.Load() {
		t.Logf("%s × %d: RSS passed %d MiB: window cut short", prof, n, memLimitMiB)
	}
	cpu1, cnt1 := takeCPU(), counters.snap()
	r.peak = sampler.Stop()
	r.window = cpu1.at.Sub(winStart)
	r.cpu = cpuBetween(cpu0, cpu1)
	r.cnt = cnt1.sub(cnt0)
	r.liveEnd = len(c.live())
	r.falseEv, r.falseMem, r.flaps = c.ev.falseFailures()
	r.dropped = c.dropped()
	r.rss = rssMiB()
	t.Logf("%s × %d: window %s: process %.2f cores (peak %.2f), machine %.2f cores; false failures %d (members %d), flaps %d; sent %.0f B/s per member",
		prof, n, r.window.Round(time.Second), r.cpu.procCores, r.peak.procCores, r.cpu.machineCores, r.falseEv, r.falseMem, r.flaps, r.perMember(r.cnt.udpSent+r.cnt.tcpSent))
	return r
}

// perMember converts a byte count over the window into bytes/s per member
// (live members averaged over the window's start and end).
func (r scaleRun) perMember(b uint64) float64 {
	live := float64(r.liveStart+r.liveEnd) / 2
	if live == 0 || r.window <= 0 {
		return 0
	}
	return float64(b) / r.window.Seconds() / live
}

func (r scaleRun) label() string {
	s := fmt.Sprintf("`%s`", r.profile)
	if r.fallback {
		s += " (fallback)"
	}
	return s
}

// saturated reports whether the machine's 2 cores were the bottleneck.
func (r scaleRun) saturated() bool {
	ncpu := float64(runtime.NumCPU())
	return r.cpu.procCores >= 0.85*ncpu || (r.cpu.machineOK && r.cpu.machineCores >= 0.9*ncpu)
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

func scaleSection(runs []scaleRun, skipped []string, sizes []int, profiles []string, window time.Duration, trials int, elapsed time.Duration, mem *membersResult) string {
	var b strings.Builder
	ncpu := runtime.NumCPU()
	b.WriteString("## 5. Scale\n\n")
	if Quick() {
		b.WriteString("**QUICK run (BENCH_QUICK=1): few trials and a short window — a check that the suite runs, not numbers to publish.**\n\n")
	}
	fmt.Fprintf(&b, `What: clusters of %s shoal agents in ONE process on this machine (%d cores, %s, GOMAXPROCS %d): real
serf %s / memberlist v0.7.0 agents (package internal/agent), each on its own 127.0.0.1 port (UDP +
TCP), app role (no MySQL), gossip encryption ON with one key, logs at warn level discarded, no HTTP
API and no Serf RPC (except the one agent serving the API for `+"`shoal members`"+`). Profiles: %s
(when `+"`fast`"+` does not form at a size, larger sizes are not attempted with it and `+"`lan`"+` runs at
that size and up instead, marked "fallback").

How:
- **Formation**: agents start in growing batches (1, 2, 4, … up to 50 at a time); each new agent
  joins 3 random agents of earlier batches (its `+"`--join`"+`), and the next batch starts once all of
  them have joined. Formation time = first agent started → every agent's memberlist counts all N
  alive, checked again in serf's member list (what `+"`shoal members`"+` shows).
- **Detection**: after a settle pause, every agent is subscribed to its own serf events (bounded
  buffer of 1,024, drained by one goroutine per agent that stamps arrival times). A trial stops a
  random live member with `+"`Agent.Shutdown()`"+` and no leave (gossip stops, as in a crash) and
  waits until every other live member has received member-failed for it (limit: %s for `+"`fast`"+`,
  %s otherwise). Victims are **not replaced**: each trial kills a different member, so a cluster of
  N ends the window with N − %d. "known to all" = last arrival − kill; "first knows" = first arrival − kill.
- **False failures**: over a window of up to %s per size (shorter when the suite's 14-minute budget
  requires it: the tables give each window's length) (the detection trials run inside it, starting
  at its beginning), every member-failed event for a member that had not been killed (at the time
  of the event) is false; a member-join at the same observer after such an event is a failed→join
  flap. serf's own flap counter (`+"`serf.member.flap`"+`) and memberlist's suspicion counters are
  reported too.
- **Bandwidth**: memberlist v0.7.0 and serf v0.11.0 emit telemetry through
  `+"`github.com/hashicorp/go-metrics`"+` (not armon/go-metrics); the suite installs an in-memory
  counting sink as go-metrics' global for the run and reads `+"`memberlist.udp.sent`"+`,
  `+"`memberlist.tcp.sent`"+` (bytes after encryption) and `+"`memberlist.udp.received`"+` over the
  window. shoal sets no per-node metric labels, so these are cluster totals; per member = total /
  window / live members (mean of the window's start and end). The transport is not wrapped.
- **CPU**: this process's rusage (user + system) / wall over the window = cores used by all N
  agents together, and the peak over 5-second intervals; and /proc/stat for the whole machine
  (all processes: other test runs were sharing this machine, so it is an upper bound of what
  shoal needed). Where either is near %d cores, the machine — not shoal's protocol — is the limit.

Command: %s. Trials per size: %d. This run took %s. Code measured: %s.

`, joinInts(sizes), ncpu, runtime.Version(), runtime.GOMAXPROCS(0), SerfVersion, strings.Join(profiles, ", "),
		detectLimit("fast"), detectLimit("lan"), trials, window, ncpu, Command("TestScale|TestMembersLatency"), trials, elapsed.Round(time.Second), codeVersion())

	// Formation.
	b.WriteString("### Formation\n\n")
	var rows [][]string
	for _, r := range runs {
		c := r.c
		formed := "yes"
		all := fmt.Sprintf("%.1f s", c.formedIn.Seconds())
		if !c.formed {
			formed = "**NO**: " + c.note
			all = "–"
		}
		mach := "–"
		if c.formCPU.machineOK {
			mach = fmt.Sprintf("%.2f", c.formCPU.machineCores)
		}
		// Suspect messages per second over the time the cluster spent
		// forming: until it formed, or the whole formation limit.
		formWall := formLimit(r.size)
		if c.formed {
			formWall = c.formedIn
		}
		rows = append(rows, []string{r.label(), strconv.Itoa(r.size), formed, fmt.Sprintf("%.1f s", c.joinedIn.Seconds()), all,
			strconv.Itoa(c.batches), strconv.Itoa(c.startFails), fmt.Sprintf("%.2f", c.formCPU.procCores), mach,
			fmt.Sprintf("%.0f", float64(c.formSusp)/max(formWall.Seconds(), 1))})
	}
	b.WriteString(Table([]string{"profile", "members", "formed", "all started and joined", "every agent sees all alive", "batches", "port retries",
		"shoal process CPU while forming (cores)", "machine CPU busy while forming (cores)", "suspect msgs handled /s while forming"}, rows))
	for _, s := range skipped {
		b.WriteString("\n- " + s + ".")
	}
	if len(skipped) > 0 {
		b.WriteString("\n")
	}

	// Detection.
	b.WriteString("\n### Detection: kill → member-failed (s)\n\n")
	rows = nil
	for _, r := range runs {
		if !r.c.formed {
			continue
		}
		var all, first []float64
		incomplete := 0
		for _, tr := range r.trials {
			all = append(all, tr.all.Seconds())
			first = append(first, tr.first.Seconds())
			if !tr.complete {
				incomplete++
			}
		}
		sa, sf := Summarize(all), Summarize(first)
		target := "–"
		if r.size == scaleTargetSize {
			target = fmt.Sprintf("p99 ≤ %.0f s: **%s**", scaleTargetP99, metOrNot(incomplete == 0 && sa.N > 0 && sa.P99 <= scaleTargetP99))
		}
		trialsCell := strconv.Itoa(len(r.trials))
		if incomplete > 0 {
			trialsCell += fmt.Sprintf(" (%d never known to all within the limit: counted as the limit, a lower bound)", incomplete)
		}
		rows = append(rows, []string{r.label(), strconv.Itoa(r.size), trialsCell, sa.Cells(), sf.Cells(), target})
	}
	b.WriteString(Table([]string{"profile", "members", "trials", "known to all: p50", "p90", "p99", "max", "first member knows: p50", "p90", "p99", "max", "target at 1,000"}, rows))

	// False failures.
	b.WriteString("\n### False failures over the window\n\n")
	rows = nil
	for _, r := range runs {
		if !r.c.formed {
			continue
		}
		target := "–"
		if r.size == scaleTargetSize {
			target = "zero: **" + metOrNot(r.falseEv == 0) + "**"
		}
		rows = append(rows, []string{r.label(), strconv.Itoa(r.size), fmt.Sprintf("%.0f s", r.window.Seconds()),
			strconv.Itoa(r.falseEv), strconv.Itoa(r.falseMem), strconv.Itoa(r.flaps), strconv.FormatUint(r.cnt.serfFlap, 10),
			fmt.Sprintf("%.1f", float64(r.cnt.suspect)/r.window.Seconds()), strconv.FormatUint(r.cnt.degradedTime, 10),
			strconv.FormatUint(r.dropped, 10), target})
	}
	b.WriteString(Table([]string{"profile", "members", "window", "false member-failed events (observer × member)", "healthy members accused",
		"failed→join flaps", "serf flap counter", "suspect msgs handled /s (all agents)", "suspicions refuted (Lifeguard)", "events dropped by the buffers", "target at 1,000"}, rows))

	// Cost.
	b.WriteString("\n### Bandwidth and CPU over the window\n\n")
	rows = nil
	for _, r := range runs {
		if !r.c.formed {
			continue
		}
		mach := "–"
		if r.cpu.machineOK {
			mach = fmt.Sprintf("%.2f / %.2f", r.cpu.machineCores, r.peak.machineCores)
		}
		rows = append(rows, []string{r.label(), strconv.Itoa(r.size),
			fmtBytes(r.perMember(r.cnt.udpSent)) + "/s + " + fmtBytes(r.perMember(r.cnt.tcpSent)) + "/s = " + fmtBytes(r.perMember(r.cnt.udpSent+r.cnt.tcpSent)) + "/s",
			fmtBytes(r.perMember(r.cnt.udpRecv)) + "/s",
			fmt.Sprintf("%.2f / %.2f (%.1f %% of a core per agent)", r.cpu.procCores, r.peak.procCores, 100*r.cpu.procCores/(float64(r.liveStart+r.liveEnd)/2)),
			mach, fmt.Sprintf("%.0f MiB", r.rss)})
	}
	b.WriteString(Table([]string{"profile", "members", "sent per member: UDP + TCP = total", "UDP received per member",
		fmt.Sprintf("shoal process CPU, cores of %d: mean / peak 5 s", ncpu), fmt.Sprintf("machine CPU busy, cores of %d: mean / peak 5 s", ncpu), "RSS (all agents)"}, rows))

	// Plain statements.
	b.WriteString("\n### Where this machine is the limit\n\n")
	flagged := false
	for _, r := range runs {
		if !r.c.formed {
			fmt.Fprintf(&b, "- %s × %d **did not form a cluster** on this machine: %s.\n", r.label(), r.size, r.c.note)
			flagged = true
			continue
		}
		var notes []string
		if r.saturated() {
			notes = append(notes, fmt.Sprintf("the %d cores are saturated (shoal process %.2f cores, machine %.2f cores): the numbers at this size measure this machine's CPU, not the protocol; on real hosts each agent has its own CPU", ncpu, r.cpu.procCores, r.cpu.machineCores))
		}
		if r.falseEv > 0 {
			notes = append(notes, fmt.Sprintf("%d false member-failed events for %d healthy members", r.falseEv, r.falseMem))
		}
		var all []float64
		for _, tr := range r.trials {
			all = append(all, tr.all.Seconds())
		}
		if s := Summarize(all); s.N > 0 && s.P99 > scaleTargetP99 {
			notes = append(notes, fmt.Sprintf("failure known to all p99 %.2f s (> %.0f s)", s.P99, scaleTargetP99))
		}
		if r.memHit.Load() {
			notes = append(notes, fmt.Sprintf("**the process's memory passed %d MiB and the window was cut short** (%.0f MiB at the end)", memLimitMiB, r.rss))
		}
		if r.dropped > 0 {
			notes = append(notes, fmt.Sprintf("the suite's own event buffers dropped %d events (detection times may be missing)", r.dropped))
		}
		if len(notes) > 0 {
			flagged = true
			fmt.Fprintf(&b, "- %s × %d: %s.\n", r.label(), r.size, strings.Join(notes, "; "))
		} else {
			fmt.Fprintf(&b, "- %s × %d: CPU below saturation, no false failures, detection within target.\n", r.label(), r.size)
		}
	}
	if !flagged {
		b.WriteString("\nNo run hit the machine's limits.\n")
	}
	if !slices.Contains(profiles, "lan") {
		b.WriteString("\n`lan` (serf's default) was not run at every size in this run: with a 5-minute window per size it would double the suite's time past its 14-minute budget; `BENCH_SCALE_PROFILES=fast,lan` runs it (it runs automatically at a size where `fast` cannot form).\n")
	}

	b.WriteString("\n" + membersSection(mem, slices.Max(sizes), "###"))
	return b.String()
}

// codeVersion names the commit the agents were built from, and whether
// internal/ had uncommitted changes.
func codeVersion() string {
	root, err := e2e.RepoRoot()
	if err != nil {
		return "unknown"
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (no git)"
	}
	v := "commit " + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "internal", "go.mod").Output(); err == nil && len(st) > 0 {
		v += " plus uncommitted changes in internal/"
	}
	return v
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%d", x)
	}
	return strings.Join(s, ", ")
}

// membersSection renders the `shoal members` results.
func membersSection(m *membersResult, size int, h string) string {
	var b strings.Builder
	if m != nil {
		size = m.size
	}
	fmt.Fprintf(&b, "%s shoal members at %s members\n\n", h, commaInt(size))
	if m == nil {
		b.WriteString("Not measured in this run: no cluster of this size had its API agent listing every member. See `TestMembersLatency`.\n")
		return b.String()
	}
	if Quick() {
		b.WriteString("**QUICK run: fewer calls and a smaller cluster than the full run.**\n\n")
	}
	fmt.Fprintf(&b, `One agent of a %d-member `+"`%s`"+` cluster (in-process, as above, still gossiping) serves the real HTTP
API (package internal/api, as `+"`shoal agent`"+` does). `+"`GET /v1/members`"+`: Go HTTP client with keep-alive,
one untimed warm-up, then %d timed calls (request → body read). CLI: `+"`shoal --http-addr ADDR members`"+`
and `+"`... members --format json`"+`, the binary built once from ./cmd/shoal, a fresh process per run
(exec → exit), %d runs each. The response listed %d members. CPU during these calls: shoal
process (all %d agents) %.2f cores, machine %.2f cores of %d.

`, m.size, m.profile, len(m.api), len(m.cliTable), m.listed, m.size, m.cpu.procCores, m.cpu.machineCores, runtime.NumCPU())
	if !m.formed {
		b.WriteString("**The cluster had not fully converged** (not every agent saw every other alive), but this agent listed every member, which is what `shoal members` returns; the CPU above shows how loaded the machine was.\n\n")
	}
	if m.err != nil {
		fmt.Fprintf(&b, "**The measurement broke off: %v** (results below are the calls before it).\n\n", m.err)
	}
	b.WriteString(Table([]string{"what", "runs", "p50 (s)", "p90", "p99", "max", "output size"}, [][]string{
		{"`GET /v1/members`", strconv.Itoa(len(m.api)), Summarize(m.api).Cells(), fmtBytes(float64(m.apiBytes))},
		{"`shoal members`", strconv.Itoa(len(m.cliTable)), Summarize(m.cliTable).Cells(), fmtBytes(float64(m.tableBytes))},
		{"`shoal members --format json`", strconv.Itoa(len(m.cliJSON)), Summarize(m.cliJSON).Cells(), fmtBytes(float64(m.jsonByte))},
	}))
	return b.String()
}

func commaInt(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return strconv.Itoa(n)
}

// TestMembersLatency: `shoal members` against one agent of a 1,000-member
// cluster (QUICK: 100). When TestScale ran in the same process and measured
// it on its own cluster, this reuses that result (it is in section 50-scale).
func TestMembersLatency(t *testing.T) {
	if scaleMembersDone != nil {
		t.Skipf("measured on TestScale's %d-member cluster in this run: see section 50-scale", scaleMembersDone.size)
	}
	defer startMemGuard("TestMembersLatency")()
	n := Pick(1000, 100)
	// lan by default: `fast` does not form 1,000 in-process agents on a
	// 2-core machine (see section 50-scale); the listing does not depend on
	// the timings.
	prof := os.Getenv("BENCH_MEMBERS_PROFILE")
	if prof == "" {
		prof = "lan"
	}
	if _, ok := gossip.Profiles[prof]; !ok {
		t.Fatalf("BENCH_MEMBERS_PROFILE: unknown profile %q", prof)
	}
	if f, ok := scaleNotFormed[prof]; ok && f <= n {
		WriteSection(t, "55-members-latency", fmt.Sprintf("### shoal members at %s members\n\nNot measured: in this run TestScale could not form "+
			"%d in-process `%s` agents on this machine (section 5), so %d cannot form either. Command: %s.\n", commaInt(n), f, prof, n, Command("TestMembersLatency")))
		t.Skipf("TestScale could not form %d %s agents here", f, prof)
	}
	key, err := agent.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	bin := e2e.ShoalBin(t)
	c, err := formScaleCluster(t, n, prof, key, formLimit(n), nil)
	defer func() {
		if c.hung {
			go c.shutdown() // may block on the agents' locks: do not wait
		} else {
			c.shutdown()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	var body string
	listed := 0
	if len(c.nodes) > 0 {
		listed = len(c.nodes[0].a.Members())
	}
	if listed < n {
		body = fmt.Sprintf("## shoal members at %s members\n\nThe %d-member `%s` cluster did not form on this machine (%s) and the API agent listed only %d members. Nothing measured.\n", commaInt(n), n, prof, c.note, listed)
	} else {
		t.Logf("formed=%v %d in %s", c.formed, n, c.formedIn.Round(time.Millisecond))
		time.Sleep(Pick(10*time.Second, 3*time.Second))
		m := measureMembers(t, bin, c.nodes[0].a, n, prof, Pick(200, 20), Pick(30, 5))
		m.formed = c.formed
		formed := fmt.Sprintf("Cluster formed in %.1f s.", c.formedIn.Seconds())
		if !c.formed {
			formed = "Cluster did not fully converge: " + c.note + "."
		}
		if m.err != nil {
			t.Errorf("members: %v", m.err)
		}
		body = membersSection(&m, n, "##") + fmt.Sprintf("\n%s Command: %s.\n", formed, Command("TestMembersLatency"))
	}
	WriteSection(t, "55-members-latency", body)
}
