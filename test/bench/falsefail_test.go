//go:build bench

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// TestFalseFailures is suite 2: all hosts healthy, both CPUs saturated
// (stress-ng), 5 % loss into and 50 ms delay out of every host, for the
// window: every member-failed is a false failure. The four agents run at
// N = 15 at the same time, under the same load.
func TestFalseFailures(t *testing.T) {
	e2e.Require(t)
	key := e2e.Keygen(t)
	Tools(t)
	const n = 15
	window := Pick(10*time.Minute, 40*time.Second)
	delay := 50 * time.Millisecond
	// Formed one after the other in this test, so that they live until
	// its end (a subtest's cleanups would stop them).
	var clusters []*GCluster
	for _, impl := range Impls {
		clusters = append(clusters, NewGCluster(t, impl, n, key))
	}
	var delayers []*e2e.Delayer
	defer func() {
		for _, d := range delayers {
			d.Stop()
		}
	}()
	for _, c := range clusters {
		for _, node := range c.Nodes {
			d, err := node.Host.StartDelay(delay)
			if err != nil {
				t.Fatal(err)
			}
			delayers = append(delayers, d)
			if err := node.Host.SetLoss(0.05); err != nil {
				t.Fatal(err)
			}
		}
	}
	rtt, err := clusters[0].Nodes[0].Host.MeasureRTT(fmt.Sprintf("%s:%d", clusters[0].Nodes[1].Host.IP, e2e.GossipPort))
	if err != nil {
		t.Logf("rtt check: %v", err)
	}
	dir := t.TempDir()
	stress, err := e2e.StartProc("stress-ng", "", filepath.Join(dir, "stress-ng.log"), nil,
		"stress-ng", "--cpu", "2", "--timeout", fmt.Sprintf("%ds", int(window.Seconds())+5))
	if err != nil {
		t.Fatal(err)
	}
	defer stress.Kill()
	cpu0 := procStat()
	t0 := time.Now()
	t.Logf("load on: 5%% loss, %s delay per host (TCP connect %s), stress-ng --cpu 2, for %s", delay, rtt, window)
	time.Sleep(window)
	t1 := time.Now()
	cpu1 := procStat()
	stress.Kill()
	busy := 0.0
	if total := cpu1[0] - cpu0[0]; total > 0 {
		busy = 100 * float64(total-(cpu1[1]-cpu0[1])) / float64(total)
	}
	var rows [][]string
	for _, c := range clusters {
		failed, joins := 0, 0
		members := map[string]bool{}
		for _, s := range c.Stamps() {
			if s.At.Before(t0) || s.At.After(t1) {
				continue
			}
			switch s.Event {
			case "member-failed":
				failed++
				members[s.Member] = true
			case "member-join":
				joins++
			}
		}
		var names []string
		for m := range members {
			names = append(names, m)
		}
		slices.Sort(names)
		rows = append(rows, []string{c.Impl.Name, fmt.Sprint(n), window.String(), fmt.Sprintf("**%d**", failed), fmt.Sprint(len(names)), fmt.Sprint(joins)})
		t.Logf("%s: %d false member-failed events (%v), %d member-join", c.Impl.Name, failed, names, joins)
	}
	var b strings.Builder
	b.WriteString("## 2. False failures under load\n\n")
	fmt.Fprintf(&b, "All %d hosts of each agent healthy; every host drops 5 %% of incoming packets (iptables `statistic`) and delays every outgoing packet by %s "+
		"(NFQUEUE; TCP connect between two hosts measured %s), and `stress-ng --cpu 2` saturates both CPUs (measured %.0f %% busy). "+
		"The four agents run at N = %d at the same time for %s. Every `member-failed` an agent's event handler receives is a false failure: no host failed.\n\n",
		n*len(Impls), delay, rtt.Round(time.Millisecond), busy, n, window)
	b.WriteString("Command: " + Command("TestFalseFailures") + "\n\n")
	b.WriteString(Table([]string{"agent", "N", "window", "false member-failed events", "members affected", "member-join events (recoveries)"}, rows))
	b.WriteString("\nTarget: zero.\n")
	WriteSection(t, "20-false-failures", b.String())
}

// procStat returns total and idle (idle+iowait) jiffies from /proc/stat.
func procStat() [2]uint64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]uint64{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var out [2]uint64
	for i, v := range strings.Fields(line)[1:] {
		if i >= 8 {
			break
		}
		var x uint64
		fmt.Sscan(v, &x)
		out[0] += x
		if i == 3 || i == 4 {
			out[1] += x
		}
	}
	return out
}
