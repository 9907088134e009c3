//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/soakcheck"
)

// resources samples every agent process (RSS, fds, goroutines) and the
// machine's load average at a fixed interval.
type resources struct {
	c      *Cluster
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []soakcheck.Resource
	load    []soakcheck.Load
}

func startResources(t testing.TB, c *Cluster, every time.Duration) *resources {
	ctx, cancel := context.WithCancel(context.Background())
	r := &resources{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			r.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(r.Stop)
	return r
}

// Stop ends the sampling and waits for it; idempotent.
func (r *resources) Stop() {
	r.cancel()
	<-r.done
}

func (r *resources) sample(ctx context.Context) {
	now := time.Now()
	var got []soakcheck.Resource
	for _, a := range r.c.Agents() {
		p := a.Proc()
		if p == nil || p.Exited() {
			continue
		}
		s := soakcheck.Resource{At: now, Agent: a.Name, PID: p.PID()}
		var err error
		if s.RSS, err = VmRSS(s.PID); err != nil {
			continue // the process went away
		}
		if s.FDs, err = openFDs(s.PID); err != nil {
			continue
		}
		m, err := scrape(ctx, a)
		if err != nil {
			continue // not answering (stopped, starting): no sample this time
		}
		g, ok := m["go_goroutines"]
		if !ok {
			continue
		}
		s.Goroutines = int(g)
		s.Timeouts = int(m[`shoal_mysql_check_failures_total{reason="timeout"}`])
		s.StalledTimeouts = int(m["shoal_mysql_check_timeouts_host_stalled_total"])
		got = append(got, s)
	}
	l, _ := loadAvg()
	l.At = now
	r.mu.Lock()
	r.samples = append(r.samples, got...)
	r.load = append(r.load, l)
	r.mu.Unlock()
}

// Samples returns the resource samples so far.
func (r *resources) Samples() []soakcheck.Resource {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]soakcheck.Resource(nil), r.samples...)
}

// Load returns the load average samples so far.
func (r *resources) Load() []soakcheck.Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]soakcheck.Load(nil), r.load...)
}

func openFDs(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es), err
}

// scrapedMetrics are the series the soak reads from an agent's /metrics.
var scrapedMetrics = []string{
	"go_goroutines",
	`shoal_mysql_check_failures_total{reason="timeout"}`,
	"shoal_mysql_check_timeouts_host_stalled_total",
}

// scrape reads scrapedMetrics from the agent's /metrics; a series the agent
// does not have (yet) is absent from the map.
func scrape(ctx context.Context, a *Agent) (map[string]float64, error) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: a.Host.dialer.DialContext}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+a.HTTPAddr()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s's /metrics: %s", a.Name, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, name := range scrapedMetrics {
			if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
					out[name] = v
				}
			}
		}
	}
	return out, sc.Err()
}

func loadAvg() (soakcheck.Load, error) {
	var l soakcheck.Load
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l, err
	}
	_, err = fmt.Sscan(string(b), &l.Load1, &l.Load5, &l.Load15)
	return l, err
}
