package agent

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// TestHookDelay measures the time from a membership event reaching the
// agent (its event stream) to the start of the handler script, which stamps
// bash's $EPOCHREALTIME as its first act. A measurement, not a check: it
// runs only with SHOAL_MEASURE=1 (make bench does not run it); SHOAL_MEASURE_TRIALS sets
// the join/leave cycles (default 20, so 40 events).
func TestHookDelay(t *testing.T) {
	if os.Getenv("SHOAL_MEASURE") != "1" {
		t.Skip("measurement: run it with SHOAL_MEASURE=1 go test -run TestHookDelay ./internal/agent/ (make bench does not)")
	}
	trials := 20
	if v, err := strconv.Atoi(os.Getenv("SHOAL_MEASURE_TRIALS")); err == nil && v > 0 {
		trials = max(v, 20)
	}
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	script := filepath.Join(dir, "stamp.sh")
	body := "#!/bin/bash\necho \"$EPOCHREALTIME $SERF_EVENT $(cut -f1)\" >> " + stamps + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t, "hd0", "fast", "")
	c.EventHandlers = []string{"member-join,member-leave=" + script}
	a := startNode(t, c)
	sub := a.a.Subscribe(1024)
	defer sub.Close()

	type key struct{ event, node string }
	seen := map[key]time.Time{}
	var delays []time.Duration
	waitEvent := func(typ serf.EventType, node string) time.Time {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case e := <-sub.C:
				if me, ok := e.(serf.MemberEvent); ok && me.Type == typ {
					for _, m := range me.Members {
						if m.Name == node {
							return time.Now()
						}
					}
				}
			case <-deadline:
				t.Fatalf("no %s for %s", typ, node)
			}
		}
	}
	for i := range trials {
		name := fmt.Sprintf("hd%d", i+1)
		b := startNode(t, testConfig(t, name, "fast", "", c.Bind))
		seen[key{"member-join", name}] = waitEvent(serf.EventMemberJoin, name)
		if err := b.a.Leave(); err != nil {
			t.Fatal(err)
		}
		seen[key{"member-leave", name}] = waitEvent(serf.EventMemberLeave, name)
		b.a.Shutdown()
	}
	testkit.WaitFor(t, 30*time.Second, "every hook ran", func() bool {
		data, _ := os.ReadFile(stamps)
		return strings.Count(string(data), "\n") >= 2*trials+1 // +1: hd0's own join
	})
	f, err := os.Open(stamps)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		sec, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			t.Fatal(err)
		}
		at, ok := seen[key{fields[1], fields[2]}]
		if !ok {
			continue
		}
		hook := time.Unix(0, int64(sec*1e9))
		delays = append(delays, hook.Sub(at))
	}
	if len(delays) != 2*trials {
		t.Fatalf("%d delays for %d events", len(delays), 2*trials)
	}
	slices.Sort(delays)
	q := func(p float64) time.Duration { return delays[int(p*float64(len(delays)-1)+0.5)] }
	report := fmt.Sprintf("| events | p50 | p90 | p99 | max |\n|---|---|---|---|---|\n| %d | %.1f ms | %.1f ms | %.1f ms | %.1f ms |\n",
		len(delays), ms(q(0.5)), ms(q(0.9)), ms(q(0.99)), ms(delays[len(delays)-1]))
	t.Logf("membership event → handler script started:\n%s", report)
	if out := os.Getenv("SHOAL_MEASURE_OUT_HOOKS"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
