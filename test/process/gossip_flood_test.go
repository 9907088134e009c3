package process

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// vmRSS is the resident set size of process pid in bytes, from
// /proc/<pid>/status (as test/e2e's harness reads it).
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return kb << 10
			}
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// floodStreams has workers TCP connections at addr at a time, each sending
// a memberlist stream header (encryptMsg, 10, and a 4-byte length) that
// declares declared bytes, then garbage as fast as the agent reads it, for
// d. A connection the agent closes is opened again. It returns the
// connections opened.
func floodStreams(addr string, workers int, declared uint32, d time.Duration) int64 {
	var opened atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	junk := make([]byte, 64<<10)
	for i := range junk {
		junk[i] = byte(i * 7)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				opened.Add(1)
				hdr := []byte{10, 0, 0, 0, 0}
				binary.BigEndian.PutUint32(hdr[1:], declared)
				c.SetWriteDeadline(end)
				_, err = c.Write(hdr)
				for err == nil && time.Now().Before(end) {
					_, err = c.Write(junk)
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	return opened.Load()
}

// TestGossipStreamFloodBoundsMemory reproduces the report: a stranger
// without the gossip key opened 40 TCP connections to the gossip port,
// each declaring a ~20 MB encrypted stream and sending it; memberlist
// buffered every one before it could tell the bytes were not sealed with
// the key, and the agent's RSS went from 32 MB to 904 MB. Now the
// transport bounds the streams it accepts and the bytes each may send
// before it authenticates: the RSS stays bounded, the agent keeps
// answering, the rejections are counted, and a member still joins.
func TestGossipStreamFloodBoundsMemory(t *testing.T) {
	key := newKey(t)
	a := startAnswering(t, "flood1", key)
	pid := a.cmd.Process.Pid
	base := vmRSS(t, pid)

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					if f := strings.Fields(rest); len(f) == 2 {
						if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb<<10 > peak.Load() {
							peak.Store(kb << 10)
						}
					}
				}
			}
		}
	}()
	opened := floodStreams(a.bind, 40, 20<<20, 3*time.Second)
	opened += floodStreams(a.bind, 40, 3<<20, 3*time.Second)
	close(stop)
	<-sampled

	// Measured: 70 MB over the start with both rounds (memberlist's read
	// buffer doubling inside the per-address budget, plus GC slack); the
	// unbounded transport went over 1 GB. 200 MB keeps the test clear of
	// noise and still far from the failure.
	const allowance = 200 << 20
	t.Logf("RSS before %d MB, peak during the flood %d MB, %d connections opened", base>>20, peak.Load()>>20, opened)
	if peak.Load() > base+allowance {
		t.Errorf("RSS peaked at %d MB during the flood, from %d MB: more than %d MB over", peak.Load()>>20, base>>20, allowance>>20)
	}
	select {
	case <-a.done:
		t.Fatalf("the agent exited during the flood: %v", a.err)
	default:
	}
	if _, errOut, code := shoal(t, "info", "--http-addr", a.http); code != 0 {
		t.Fatalf("the agent does not answer its API after the flood: exit %d %s", code, errOut)
	}
	if m := scrape(t, a.http); !strings.Contains(m, "shoal_memberlist_stream_rejected_total{") {
		t.Errorf("no shoal_memberlist_stream_rejected_total after the flood")
	}
	b := startAgent(t, "flood2", key, "--join", a.bind)
	testkit.WaitFor(t, 30*time.Second, "flood2 joins", func() bool {
		m := members(t, b.http)
		return m["flood1"].Status == "alive" && m["flood2"].Status == "alive"
	})
}

// TestGossipGarbageUDPLogThrottled reproduces the report: 20,000 garbage
// UDP datagrams to the gossip port made memberlist log 9,404 ERROR lines in
// 2 s. Now lines of one kind are logged a few times a window and a summary
// says how many were suppressed.
func TestGossipGarbageUDPLogThrottled(t *testing.T) {
	key := newKey(t)
	a := startAnswering(t, "udp1", key)
	c, err := net.Dial("udp", a.bind)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	garbage := []byte("this is not a memberlist packet, and not sealed with the key either")
	for i := range 20000 {
		garbage[0] = byte(i)
		c.Write(garbage)
		if i%500 == 0 {
			time.Sleep(time.Millisecond) // let the socket buffer drain
		}
	}
	// The summaries come at the end of the throttle's window (10 s).
	summary := regexp.MustCompile(`level=WARN msg="suppressed (\d+) similar log lines`)
	suppressed, errorLines := 0, 0
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		suppressed, errorLines = 0, 0
		for _, line := range strings.Split(a.log.String(), "\n") {
			if m := summary.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				suppressed += n
			}
			if strings.Contains(line, "level=ERROR") {
				errorLines++
			}
		}
		if suppressed > 0 {
			break
		}
	}
	t.Logf("%d ERROR lines, %d suppressed", errorLines, suppressed)
	if errorLines > 20 {
		t.Errorf("%d ERROR lines for 20,000 garbage datagrams, want at most 20", errorLines)
	}
	if suppressed == 0 {
		t.Errorf("no WARN line says how many lines were suppressed")
	}
	if m := scrape(t, a.http); !strings.Contains(m, "shoal_memberlist_log_suppressed_total") {
		t.Errorf("no shoal_memberlist_log_suppressed_total after the flood")
	}
	if _, errOut, code := shoal(t, "info", "--http-addr", a.http); code != 0 {
		t.Fatalf("the agent does not answer its API after the flood: exit %d %s", code, errOut)
	}
}
