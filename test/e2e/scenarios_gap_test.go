//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// TestSurvivorsAgreeOnFailure is issue 27's finding 5 at CI size: 4 app
// hosts with the default `lan` profile; one host's link is cut; the 3
// survivors must act on the failure (member-failed, as their event handler
// sees it) within a short time of each other. On the code of the issue,
// the confirmation pings sent toward the dead host piggybacked the queued
// "dead" broadcast and used up its retransmissions (4 at `lan` with 4
// members), so one survivor was left to find the failure by its own probe
// and suspicion timeout: 7.4 s after the others in 3 of 11 trials.
//
// Bound: the largest gap must stay within gapBound (2 s). Why that number:
// gossip spreads "dead" to 3 survivors within a few 200 ms gossip rounds
// (the stock serf agent's largest gap in suite 1 of the benchmarks is a few
// tenths of a second); issue 27 asks for no more than stock serf + 0.2 s.
// The fault this test is after costs a survivor its own detection, at least
// one suspicion timeout (4 × log10(4) × 1 s = 2.4 s at `lan` with 4 members,
// measured 7.4 s). 2 s leaves over 1 s of margin for scheduling noise on a
// loaded CI machine and still catches any gap of that kind. The comparison
// with stock serf in the same run is the benchmark's (make bench, suite 1,
// N = 4 and 15, 20 trials each).
//
// SHOAL_E2E_GAP_TRIALS sets the number of trials (default 10: with the
// issue's rate of 3 in 11, 10 trials miss the fault with probability
// (8/11)^10 ≈ 4 %).
//
// What fixed it: own pings (nothing piggybacked: TestOwnPingSpendsNoBroadcasts)
// removed the cause the issue found, but a gap of 8-11 s remained in about 1
// trial of 7 to 10, also with --confirm-failures=false (SHOAL_E2E_GAP_CONFIRM
// =false: 1 of 14), in trials that came right after a heal: a survivor left
// with an older incarnation number of the next victim had its suspicions
// ignored. The gate's state exchange 2 s after a member comes back
// (Gate.scheduleSync) ended that: 16 of 16 trials within 0.2 s here, and 20
// of 20 link cuts within 0.28 s in suite 1 (docs/benchmarks.md, 1c).
// SHOAL_E2E_GAP_LOG_LEVEL=debug keeps each late survivor's log lines about
// the victim in the failure message.
func TestSurvivorsAgreeOnFailure(t *testing.T) {
	Require(t)
	const n = 4
	const gapBound = 2 * time.Second
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("SHOAL_E2E_GAP_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	key := Keygen(t)
	stamp := buildStamp(t)
	net := NewNet(t)
	dir := t.TempDir()
	var agents []*Agent
	var hosts []*Host
	for i := 1; i <= n; i++ {
		hosts = append(hosts, net.AddHost(t, i))
	}
	for i, h := range hosts {
		name := fmt.Sprintf("app%d", i+1)
		var join []string
		for j := range hosts {
			if j != i && len(join) < 2 {
				join = append(join, fmt.Sprintf("%s:%d", hosts[j].IP, GossipPort))
			}
		}
		stamps := filepath.Join(dir, name+".stamps")
		a := NewAgent(t, h, dir, AgentSpec{Name: name, Role: "app", Key: key, Join: join,
			Extra: []string{"--profile", "lan", "--log-level", cmpOr(os.Getenv("SHOAL_E2E_GAP_LOG_LEVEL"), "info"), "--confirm-failures=" + cmpOr(os.Getenv("SHOAL_E2E_GAP_CONFIRM"), "true"), "--event-handler", fmt.Sprintf("member-failed,member-join=%s %s", stamp, stamps)}})
		agents = append(agents, a)
	}
	t.Cleanup(func() {
		for _, a := range agents {
			a.Kill()
		}
	})
	for _, a := range agents {
		a.Start(t, true)
	}
	if err := waitAllAlive(agents, agents, time.Minute); err != nil {
		t.Fatalf("cluster did not form: %v", err)
	}
	stampsOf := func(a *Agent) string { return filepath.Join(dir, a.Name+".stamps") }

	var gaps []time.Duration
	var lines []string
	for k := 0; k < trials; k++ {
		v := agents[(k*3+1)%n]
		var others []*Agent
		for _, a := range agents {
			if a != v {
				others = append(others, a)
			}
		}
		t0 := time.Now()
		if err := v.Host.LinkDown(); err != nil {
			t.Fatal(err)
		}
		seen, err := waitStamped(others, stampsOf, "member-failed", v.Name, t0, 40*time.Second)
		if err2 := v.Host.LinkUp(); err2 != nil {
			t.Fatal(err2)
		}
		if err != nil {
			t.Fatalf("trial %d (%s cut): %v", k+1, v.Name, err)
		}
		var ats []time.Duration
		var who []string
		for _, o := range others {
			ats = append(ats, seen[o.Name].Sub(t0))
			who = append(who, fmt.Sprintf("%s %.2fs", o.Name, seen[o.Name].Sub(t0).Seconds()))
		}
		gap := slices.Max(ats) - slices.Min(ats)
		gaps = append(gaps, gap)
		if gap > gapBound {
			// What each survivor's log says of the victim, to tell why.
			for _, o := range others {
				t.Logf("trial %d: %s's log lines about %s:\n%s", k+1, o.Name, v.Name, linesAbout(o.LogPath(), v.Name, 60))
			}
		}
		line := fmt.Sprintf("trial %d: %s cut: %s; gap %.3fs", k+1, v.Name, strings.Join(who, ", "), gap.Seconds())
		lines = append(lines, line)
		t.Log(line)
		if err := waitAllAlive(agents, agents, 60*time.Second); err != nil {
			t.Fatalf("trial %d: cluster not whole again after the link came back: %v", k+1, err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
	}
	if worst := slices.Max(gaps); worst > gapBound {
		over := 0
		for _, g := range gaps {
			if g > gapBound {
				over++
			}
		}
		t.Errorf("finding 5: in %d of %d trials one survivor acted on the failure more than %s after the first (largest gap %.3fs):\n%s",
			over, len(gaps), gapBound, worst.Seconds(), strings.Join(lines, "\n"))
	}
}

// buildStamp builds the benchmarks' event handler (test/bench/stamp: one
// "<unix-nanos> <event> <member>" line per member, stamped when it starts).
func buildStamp(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "stamp")
	cmd := exec.Command("go", "build", "-o", out, "./test/bench/stamp")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build stamp: %v\n%s", err, b)
	}
	return out
}

// waitStamped waits until every observer's handler logged event for member
// at or after since, and returns when each did.
func waitStamped(obs []*Agent, file func(*Agent) string, event, member string, since time.Time, limit time.Duration) (map[string]time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		got := map[string]time.Time{}
		for _, o := range obs {
			if at, ok := firstStamp(file(o), event, member, since); ok {
				got[o.Name] = at
			}
		}
		if len(got) == len(obs) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("only %d of %d survivors logged %s for %s within %s", len(got), len(obs), event, member, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func firstStamp(path, event, member string, since time.Time) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 || fs[1] != event || fs[2] != member {
			continue
		}
		ns, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		if at := time.Unix(0, ns); !at.Before(since) {
			return at, true
		}
	}
	return time.Time{}, false
}

// waitAllAlive waits until every observer's API lists every member alive.
func waitAllAlive(obs, members []*Agent, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := ""
	for {
		ok := true
		for _, o := range obs {
			c, err := o.Client()
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			ms, err := c.Members(ctx, client.MemberFilter{})
			cancel()
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			st := map[string]string{}
			for _, m := range ms {
				st[m.Name] = m.Status
			}
			for _, m := range members {
				if st[m.Name] != "alive" {
					ok, last = false, fmt.Sprintf("%s sees %s %q", o.Name, m.Name, st[m.Name])
					break
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not all alive after %s: %s", limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// linesAbout returns the last n lines of the file at path that mention
// name.
func linesAbout(path, name string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
