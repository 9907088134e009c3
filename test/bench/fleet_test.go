//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// TestFleet measures shoal the way a fleet runs it, as far as this machine
// allows: one agent process per host, each host a network namespace of its
// own, at N = 15, 50 and 100 with the `lan` and `fast` profiles (issue 17).
// Per (profile, N): formation (staggered starts), an idle window (false
// failures, bandwidth from the hosts' interface counters, CPU and RSS from
// /proc), crash trials (detection by every survivor; the confirmation and
// revival pings each failure causes, from the agents' /metrics), and short
// link cuts that heal (false failures after the heal). Results accumulate in
// build/bench/fleet/results.json across runs (one row per profile and N,
// the newest wins) and build/bench/fleet/fleet.md renders them all, so the
// sizes can run one at a time. docs/scale.md holds the tables and the model.
//
//	BENCH_FLEET=1 sudo make bench-fleet
//	BENCH_FLEET=1 BENCH_FLEET_SIZES=50 BENCH_FLEET_PROFILES=fast BENCH_FLEET_IDLE=5m go test -tags 'bench e2e' -count=1 -v -timeout 90m -run TestFleet ./test/bench/
//
// Knobs: BENCH_FLEET_SIZES (15,50,100), BENCH_FLEET_PROFILES (lan,fast),
// BENCH_FLEET_IDLE (idle window, 2m), BENCH_FLEET_TRIALS (crash trials, 5),
// BENCH_FLEET_CUTS (1s,8s), BENCH_FLEET_HEAL_TRIALS (per cut length, 5),
// BENCH_FLEET_STAGGER (between two agents' starts, 200ms).
func TestFleet(t *testing.T) {
	if os.Getenv("BENCH_FLEET") != "1" {
		t.Skip("SKIPPED: TestFleet starts up to 100 agent processes in network namespaces for tens of minutes; set BENCH_FLEET=1 (make bench-fleet) to run it")
	}
	e2e.Require(t)
	key := e2e.Keygen(t)
	Tools(t)
	sizes := envList("BENCH_FLEET_SIZES", []string{"15", "50", "100"})
	profiles := envList("BENCH_FLEET_PROFILES", []string{"lan", "fast"})
	for _, ns := range sizes {
		n, err := strconv.Atoi(ns)
		if err != nil || n < 3 || n > 200 {
			t.Fatalf("BENCH_FLEET_SIZES: %q is not a size in 3..200", ns)
		}
		e2e.RaiseNeighbourLimits(t, n)
		for _, prof := range profiles {
			t.Run(fmt.Sprintf("%s/N=%d", prof, n), func(t *testing.T) {
				res := runFleetCell(t, Impl{Name: "shoal " + prof, Profile: prof}, n, key)
				saveFleetResult(t, res)
			})
		}
	}
	writeFleetReport(t)
}

// fleetResult is one (profile, N) cell, as stored in results.json.
type fleetResult struct {
	Profile string    `json:"profile"`
	N       int       `json:"n"`
	Commit  string    `json:"commit"`
	At      time.Time `json:"at"`
	Took    float64   `json:"took_s"`

	Formed   bool    `json:"formed"`
	FormSecs float64 `json:"form_s"`
	FormNote string  `json:"form_note,omitempty"`
	Stagger  float64 `json:"stagger_s"`

	IdleSecs    float64            `json:"idle_s"`
	IdleFailed  int                `json:"idle_false_failed"`
	IdleChecks  map[string]float64 `json:"idle_checks"` // gate counters summed over the agents, over the idle window
	RSSMB       []float64          `json:"rss_mb"`
	CPUPct      []float64          `json:"cpu_pct"`
	RxBps       []float64          `json:"rx_bps"`
	TxBps       []float64          `json:"tx_bps"`
	DetectLast  []float64          `json:"detect_last_s"`
	DetectFirst []float64          `json:"detect_first_s"`
	Missed      int                `json:"missed"`
	Collateral  int                `json:"collateral"`
	AliveAgain  []float64          `json:"alive_again_s"`
	// per crash: confirmation pings and second checks summed over the
	// survivors, and revival pings per second toward the dead member
	ConfirmPings []float64   `json:"confirm_pings"`
	SecondChecks []float64   `json:"second_checks"`
	RevivePerSec []float64   `json:"revive_pings_per_s"`
	Heal         []fleetHeal `json:"heal"`
	pingBase     map[string]float64
	Stuck        int    `json:"stuck"`
	Aborted      string `json:"aborted,omitempty"`
}

type fleetHeal struct {
	Cut           string    `json:"cut"`
	Trials        int       `json:"trials"`
	VictimFailed  int       `json:"victim_failed"`
	ByRest        int       `json:"by_rest"`
	TrialsWithAny int       `json:"trials_with_any"`
	ByCutHost     int       `json:"by_cut_host"`
	Refailed      int       `json:"refailed"`
	Alive         []float64 `json:"alive_s"`
}

func runFleetCell(t *testing.T, impl Impl, n int, key string) *fleetResult {
	start := time.Now()
	res := &fleetResult{Profile: impl.Profile, N: n, Commit: codeVersion(), At: start.UTC()}
	defer func() { res.Took = time.Since(start).Seconds() }()
	label := fmt.Sprintf("%s N=%d", impl.Name, n)
	stagger := envDur("BENCH_FLEET_STAGGER", 200*time.Millisecond)
	res.Stagger = stagger.Seconds()
	c, err := NewGClusterWith(t, impl, n, key, GOptions{Stagger: stagger, HTTP: true, FormLimit: 3 * time.Minute})
	res.FormSecs = time.Since(start).Seconds()
	if err != nil {
		res.FormNote = describeUnformed(c, err)
		// What the machine did meanwhile, for the report.
		res.RSSMB, res.CPUPct = c.IdleUsage(30*time.Second, nil)
		t.Logf("%s: %s", label, res.FormNote)
		return res
	}
	res.Formed = true
	t.Logf("%s formed in %.1fs (agents started %s apart)", label, res.FormSecs, stagger)

	// Idle: false failures, bandwidth, CPU, RSS, and what the gates did.
	idle := envDur("BENCH_FLEET_IDLE", Pick(2*time.Minute, 20*time.Second))
	var rx0, tx0 []uint64
	var checks0 map[string]float64
	var t0, t1 time.Time
	res.RSSMB, res.CPUPct = c.IdleUsage(idle, func(end bool) {
		rx, tx := linkBytes(t, c)
		checks := sumMetrics(c, c.Nodes, "shoal_member_failure_")
		if !end {
			rx0, tx0, checks0, t0 = rx, tx, checks, time.Now()
			return
		}
		t1 = time.Now()
		wall := t1.Sub(t0).Seconds()
		for i := range rx {
			res.RxBps = append(res.RxBps, float64(rx[i]-rx0[i])/wall)
			res.TxBps = append(res.TxBps, float64(tx[i]-tx0[i])/wall)
		}
		res.IdleChecks = map[string]float64{}
		for k, v := range checks {
			res.IdleChecks[k] = v - checks0[k]
		}
	})
	res.IdleSecs = t1.Sub(t0).Seconds()
	res.IdleFailed = countFailed(c.Stamps(), t0, t1, "", "")
	t.Logf("%s idle %.0fs: %d member-failed, CPU %% median %.2f, tx B/s median %.0f", label, res.IdleSecs, res.IdleFailed,
		Summarize(res.CPUPct).P50, Summarize(res.TxBps).P50)

	r := newCell(impl, n)
	defer func() { fillFleetResult(res, r) }()
	for k := 0; k < envInt("BENCH_FLEET_TRIALS", Pick(5, 1)); k++ {
		v := c.Nodes[(k*7+3)%n]
		res.pingBase = sumMetrics(c, c.Others(v), "shoal_member_failure_")
		if !faultTrial(t, c, r, label, "crash", k, v, func() { res.countPings(c, v) }) {
			return res
		}
		Jitter(time.Second)
	}
	for _, cs := range envList("BENCH_FLEET_CUTS", []string{"1s", "8s"}) {
		cut, err := time.ParseDuration(cs)
		if err != nil {
			t.Fatalf("BENCH_FLEET_CUTS: %v", err)
		}
		for k := 0; k < envInt("BENCH_FLEET_HEAL_TRIALS", Pick(5, 1)); k++ {
			if !healTrial(t, c, r, label, cut, k, c.Nodes[(k*5+2)%n]) {
				return res
			}
			Jitter(time.Second)
		}
	}
	return res
}

// countPings runs while v is down and every survivor has seen it failed:
// it waits for the confirmations to end, then reads the pings they sent
// (since the start of the trial: the counters before it were read at the
// previous trial's end), then holds v down for reviveHold and reads the
// revival pings sent toward it meanwhile.
func (res *fleetResult) countPings(c *GCluster, v *GNode) {
	others := c.Others(v)
	base := res.pingBase
	time.Sleep(2 * time.Second)
	mid := sumMetrics(c, others, "shoal_member_failure_")
	midAt := time.Now()
	time.Sleep(reviveHold)
	end := sumMetrics(c, others, "shoal_member_failure_")
	wall := time.Since(midAt).Seconds()
	if base != nil {
		res.ConfirmPings = append(res.ConfirmPings, mid[pingsConfirm]-base[pingsConfirm])
		res.SecondChecks = append(res.SecondChecks, mid[secondChecks]-base[secondChecks])
	}
	res.RevivePerSec = append(res.RevivePerSec, (end[pingsRevive]-mid[pingsRevive])/wall)
	res.pingBase = nil
}

// reviveHold is how long a crashed member stays down after every survivor
// saw it failed, to count the revival pings toward it.
const reviveHold = 5 * time.Second

const (
	pingsConfirm = `shoal_member_failure_pings_total{kind="confirm"}`
	pingsRevive  = `shoal_member_failure_pings_total{kind="revive"}`
	secondChecks = `shoal_member_failure_second_checks_total`
)

// sumMetrics sums the samples named with prefix over nodes (read at once).
func sumMetrics(c *GCluster, nodes []*GNode, prefix string) map[string]float64 {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]float64{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := n.Metrics(prefix)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range m {
				out[k] += v
			}
		}()
	}
	wg.Wait()
	return out
}

// linkBytes reads every host's eth0 counters.
func linkBytes(t *testing.T, c *GCluster) (rx, tx []uint64) {
	rx, tx = make([]uint64, len(c.Nodes)), make([]uint64, len(c.Nodes))
	for i, n := range c.Nodes {
		r, x, err := n.Host.LinkBytes()
		if err != nil {
			t.Fatal(err)
		}
		rx[i], tx[i] = r, x
	}
	return rx, tx
}

// describeUnformed says what an unformed cluster looked like: how many
// members each agent saw alive.
func describeUnformed(c *GCluster, err error) string {
	var seen []float64
	for _, n := range c.Nodes {
		st, err := c.MembersOf(n)
		if err != nil {
			seen = append(seen, -1)
			continue
		}
		alive := 0
		for _, s := range st {
			if s == "alive" {
				alive++
			}
		}
		seen = append(seen, float64(alive))
	}
	s := Summarize(seen)
	return fmt.Sprintf("%v; members each agent saw alive: min %.0f, median %.0f, max %.0f of %d (-1: no answer)", err, s.Min, s.P50, s.Max, len(c.Nodes))
}

func fillFleetResult(res *fleetResult, r *cellResult) {
	res.DetectLast, res.DetectFirst = r.last["crash"], r.first["crash"]
	res.Missed, res.Collateral, res.AliveAgain = r.missed["crash"], r.collateral["crash"], r.alive["crash"]
	res.Stuck, res.Aborted = r.stuck["crash"]+r.stuck["link cut"], r.aborted
	cuts := make([]time.Duration, 0, len(r.heal))
	for cut := range r.heal {
		cuts = append(cuts, cut)
	}
	slices.Sort(cuts)
	for _, cut := range cuts {
		h := r.heal[cut]
		res.Heal = append(res.Heal, fleetHeal{Cut: cut.String(), Trials: h.trials, VictimFailed: h.victimFailed, ByRest: h.byRest,
			TrialsWithAny: h.trialsWithAny, ByCutHost: h.byCutHost, Refailed: h.refailed, Alive: h.alive})
	}
}

func fleetDir(t testing.TB) string {
	dir := filepath.Join(OutDir(t), "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadFleetResults(t testing.TB) []*fleetResult {
	var out []*fleetResult
	data, err := os.ReadFile(filepath.Join(fleetDir(t), "results.json"))
	if err == nil {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("fleet results: %v", err)
		}
	}
	return out
}

// saveFleetResult stores res in results.json, replacing an older row of
// the same profile and N.
func saveFleetResult(t testing.TB, res *fleetResult) {
	all := slices.DeleteFunc(loadFleetResults(t), func(o *fleetResult) bool { return o.Profile == res.Profile && o.N == res.N })
	all = append(all, res)
	slices.SortFunc(all, func(a, b *fleetResult) int {
		if a.N != b.N {
			return a.N - b.N
		}
		return strings.Compare(a.Profile, b.Profile)
	})
	data, err := json.MarshalIndent(all, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fleetDir(t), "results.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFleetReport renders every stored cell as the tables of docs/scale.md.
func writeFleetReport(t testing.TB) {
	all := loadFleetResults(t)
	var b strings.Builder
	b.WriteString("### Formation and idle window\n\n")
	var rows [][]string
	for _, r := range all {
		if !r.Formed {
			rows = append(rows, []string{"`" + r.Profile + "`", fmt.Sprint(r.N), "**no**: " + r.FormNote, "–", "–", "–",
				fmt.Sprintf("%.2f / %.2f", Summarize(r.CPUPct).P50, Summarize(r.CPUPct).Max), fmt.Sprintf("%.1f", Summarize(r.RSSMB).P50), "–", "–"})
			continue
		}
		cpu, rss, rx, tx := Summarize(r.CPUPct), Summarize(r.RSSMB), Summarize(r.RxBps), Summarize(r.TxBps)
		rows = append(rows, []string{"`" + r.Profile + "`", fmt.Sprint(r.N), fmt.Sprintf("yes, %.0f s (starts %.1f s apart)", r.FormSecs, r.Stagger),
			fmt.Sprintf("%.0f s", r.IdleSecs), fmt.Sprintf("**%d**", r.IdleFailed), gateSummary(r.IdleChecks),
			fmt.Sprintf("%.2f / %.2f", cpu.P50, cpu.Max), fmt.Sprintf("%.1f / %.1f", rss.P50, rss.Max),
			fmt.Sprintf("%s / %s", kib(rx.P50), kib(rx.Max)), fmt.Sprintf("%s / %s", kib(tx.P50), kib(tx.Max))})
	}
	b.WriteString(Table([]string{"profile", "N", "formed", "idle window", "false member-failed", "gate over the window (all agents)",
		"CPU % of a core per agent: median / max", "RSS MB: median / max", "received per agent: median / max", "sent per agent: median / max"}, rows))
	b.WriteString("\n### Crash (kill -9): detection and the pings one failure causes\n\n")
	rows = nil
	for _, r := range all {
		if !r.Formed {
			continue
		}
		d, f, cp, sc, rv := Summarize(r.DetectLast), Summarize(r.DetectFirst), Summarize(r.ConfirmPings), Summarize(r.SecondChecks), Summarize(r.RevivePerSec)
		rows = append(rows, []string{"`" + r.Profile + "`", fmt.Sprint(r.N), fmt.Sprint(d.N + r.Missed), fmtOr(f), d.Cells(), fmt.Sprint(r.Missed),
			fmt.Sprint(r.Collateral), fmt.Sprintf("%.0f / %.0f", cp.P50, cp.Max), fmt.Sprintf("%.0f / %.0f", sc.P50, sc.Max), fmt.Sprintf("%.1f / %.1f", rv.P50, rv.Max)})
	}
	b.WriteString(Table([]string{"profile", "N", "trials", "first survivor p50 (s)", "every survivor p50", "p90", "p99", "max", "not seen by all",
		"healthy members failed", "confirmation pings per failure (all agents): median / max", "second checks per failure", "revival pings/s toward the dead member: median / max"}, rows))
	b.WriteString("\n### Short link cuts that heal: false failures\n\n")
	rows = nil
	for _, r := range all {
		for _, h := range r.Heal {
			s := Summarize(h.Alive)
			rows = append(rows, []string{"`" + r.Profile + "`", fmt.Sprint(r.N), h.Cut, fmt.Sprint(h.Trials), fmt.Sprintf("%d/%d", h.VictimFailed, h.Trials),
				fmt.Sprintf("**%d** (in %d trials)", h.ByRest, h.TrialsWithAny), fmt.Sprint(h.ByCutHost), fmt.Sprint(h.Refailed), fmtOr(s), fmtMax(s)})
		}
	}
	b.WriteString(Table([]string{"profile", "N", "cut", "trials", "cut host failed", "healthy members failed (by the rest)", "by the cut host", "cut host failed again", "alive again p50 (s)", "max"}, rows))
	b.WriteString("\nCells: ")
	var notes []string
	for _, r := range all {
		note := fmt.Sprintf("`%s` N=%d at %s, %s, %.0f s", r.Profile, r.N, r.Commit, r.At.Format("2006-01-02 15:04 UTC"), r.Took)
		if r.Aborted != "" {
			note += " (stopped early: " + r.Aborted + ")"
		}
		notes = append(notes, note)
	}
	b.WriteString(strings.Join(notes, "; ") + ".\n")
	p := filepath.Join(fleetDir(t), "fleet.md")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", p)
}

// gateSummary sums the gate's counters: failures checked (confirmed,
// refuted, expired) and second checks.
func gateSummary(m map[string]float64) string {
	get := func(k string) float64 { return m[k] }
	return fmt.Sprintf("%.0f checked: %.0f confirmed, %.0f refuted, %.0f expired; %.0f second checks; %.0f confirmation pings",
		get(`shoal_member_failure_checks_total{result="confirmed"}`)+get(`shoal_member_failure_checks_total{result="refuted"}`)+get(`shoal_member_failure_checks_total{result="expired"}`),
		get(`shoal_member_failure_checks_total{result="confirmed"}`), get(`shoal_member_failure_checks_total{result="refuted"}`),
		get(`shoal_member_failure_checks_total{result="expired"}`), get(secondChecks), get(pingsConfirm))
}

func kib(bps float64) string { return fmtBytes(bps) + "/s" }

// envDur reads a duration, def when unset or invalid.
func envDur(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
