package probe

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// TestMeasureDeadConnDetection compares ways to notice a kill -9 between
// checks. It is a measurement, not a regression test: it runs only with
// SHOAL_PROBE_MEASURE=1 and reports numbers with t.Logf.
//
//   - watch: the probe as shipped (idle socket watched with MSG_PEEK).
//   - tick: the probe without the watch (notices at the next check).
//   - sleep: a loop that keeps the connection busy with DO SLEEP(interval)
//     between checks, so a crash interrupts the running statement.
func TestMeasureDeadConnDetection(t *testing.T) {
	if os.Getenv("SHOAL_PROBE_MEASURE") != "1" {
		t.Skip("measurement; run with SHOAL_PROBE_MEASURE=1")
	}
	mariadbtest.Require(t)
	n := trials(20)

	t.Run("tick", func(t *testing.T) {
		srv := mariadbtest.Start(t, mariadbtest.Options{})
		createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
		_, rec := startProbe(t, srv, nil, func(p *Probe) { p.noIdleWatch = true })
		detect, _ := killTrials(t, srv, rec, n)
		t.Logf("tick only: kill -9 -> critical: %s", distribution(detect))
	})

	t.Run("sleep", func(t *testing.T) {
		srv := mariadbtest.Start(t, mariadbtest.Options{})
		createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
		l := &sleepLoop{srv: srv, interval: DefaultInterval, timeout: DefaultTimeout, failed: make(chan time.Time, 100)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		waitHealthy := func() {
			deadline := time.Now().Add(10 * time.Second)
			for l.healthy.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("sleep loop not healthy")
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		waitHealthy()
		s0 := globalStatus(t, srv, "Questions")
		time.Sleep(3 * time.Second)
		s1 := globalStatus(t, srv, "Questions")
		t.Logf("sleep loop: %.1f statements/s with a 1-statement check (the probe's 2-statement check would make it %.1f/s)",
			float64(s1["Questions"]-s0["Questions"]-1)/3, float64(s1["Questions"]-s0["Questions"]-1)/3*1.5)

		var detect []time.Duration
		for i := range n {
			time.Sleep(time.Duration(37*i%250) * time.Millisecond)
			for len(l.failed) > 0 {
				<-l.failed
			}
			t0 := time.Now()
			srv.Kill()
			select {
			case at := <-l.failed:
				detect = append(detect, at.Sub(t0))
			case <-time.After(10 * time.Second):
				t.Fatal("sleep loop did not notice the kill")
			}
			srv.Restart()
			waitHealthy()
		}
		t.Logf("DO SLEEP: kill -9 -> error: %s", distribution(detect))
	})
}

// sleepLoop is the alternative design: check, then DO SLEEP(interval) on the
// same connection, so the connection is never idle.
type sleepLoop struct {
	srv               *mariadbtest.Server
	interval, timeout time.Duration
	healthy           atomic.Int32
	failed            chan time.Time
}

func (l *sleepLoop) run(ctx context.Context) {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = probeUser, probePassword, "tcp", l.srv.Addr()
	c.Timeout = l.timeout
	c.ReadTimeout = l.interval + l.timeout // must outlast the sleep
	c.Logger = &mysql.NopLogger{}
	connector, _ := mysql.NewConnector(c)
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	sleep := fmt.Sprintf("DO SLEEP(%g)", l.interval.Seconds())
	var conn *sql.Conn
	for ctx.Err() == nil {
		if conn == nil {
			var err error
			if conn, err = db.Conn(ctx); err != nil {
				conn = nil
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		var ro int
		err := conn.QueryRowContext(cctx, "SELECT @@read_only").Scan(&ro)
		cancel()
		if err == nil {
			l.healthy.Store(1)
			cctx, cancel = context.WithTimeout(ctx, l.interval+l.timeout)
			_, err = conn.ExecContext(cctx, sleep)
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			l.healthy.Store(0)
			l.failed <- time.Now()
			conn.Raw(func(any) error { return driver.ErrBadConn })
			conn.Close()
			conn = nil
		}
	}
	if conn != nil {
		conn.Close()
	}
}

// TestMeasureOverload runs two probes side by side against one real
// mariadbd while stress-ng overloads the host: the probe as shipped (a
// timeout during a host stall counts once) and the same probe without PSI
// (every timeout weighs as a hung server). The server is healthy the whole
// time, so every transition to critical is a false removal. Then, under the
// same overload, the server is hung (SIGSTOP) a few times and both probes'
// detection times are reported. A measurement: SHOAL_PROBE_MEASURE=1;
// SHOAL_OVERLOAD (stress-ng arguments) and SHOAL_OVERLOAD_FOR (duration)
// change the load.
func TestMeasureOverload(t *testing.T) {
	if os.Getenv("SHOAL_PROBE_MEASURE") != "1" {
		t.Skip("measurement; run with SHOAL_PROBE_MEASURE=1")
	}
	mariadbtest.Require(t)
	stress, err := exec.LookPath("stress-ng")
	if err != nil {
		t.Fatal("stress-ng not installed (bash test/install-deps.sh installs it)")
	}
	if _, err := readPressure(DefaultPressureDir); err != nil {
		t.Fatalf("this host does not publish PSI: %v", err)
	}
	load := strings.Fields(cmp.Or(os.Getenv("SHOAL_OVERLOAD"), "--cpu 24 --vm 4 --vm-bytes 512M --io 4"))
	dur, err := time.ParseDuration(cmp.Or(os.Getenv("SHOAL_OVERLOAD_FOR"), "60s"))
	if err != nil {
		t.Fatal(err)
	}

	srv := mariadbtest.Start(t, mariadbtest.Options{})
	createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
	_, shipped := startProbe(t, srv, nil)
	_, nopsi := startProbe(t, srv, nil, func(p *Probe) { p.stall.dir = "" })
	for _, r := range []*recorder{shipped, nopsi} {
		r.await(t, 0, 10*time.Second, "state passing", isState(StatePassing))
	}

	overload := func(d time.Duration) *exec.Cmd {
		cmd := exec.Command(stress, append(load, "--timeout", fmt.Sprintf("%ds", int(d.Seconds())+1))...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	type tally struct {
		checks, timeouts, stalled, critical int
		durs                                []time.Duration
	}
	count := func(r *recorder, from int) tally {
		var c tally
		for _, e := range r.since(from) {
			last := e.Status.Last
			c.checks++
			c.durs = append(c.durs, last.Duration)
			if last.Reason == ReasonTimeout {
				c.timeouts++
				if last.HostStalled() {
					c.stalled++
				}
			}
			if e.StateChanged && e.Status.State == StateCritical {
				c.critical++
			}
		}
		return c
	}

	t.Logf("overload: stress-ng %s for %s", strings.Join(load, " "), dur)
	m1, m2 := shipped.mark(), nopsi.mark()
	cmd := overload(dur)
	time.Sleep(dur)
	for name, c := range map[string]tally{"shipped (PSI)": count(shipped, m1), "without PSI": count(nopsi, m2)} {
		t.Logf("%s: %d checks, duration %s; %d timeouts (%d during a host stall); %d false removals (healthy server went critical)",
			name, c.checks, distribution(c.durs), c.timeouts, c.stalled, c.critical)
	}
	cmd.Process.Kill()
	cmd.Wait()

	// Hung server under the same overload.
	cmd = overload(2 * time.Minute)
	var hungShipped, hungNoPSI []time.Duration
	for i := range trials(5) {
		for _, r := range []*recorder{shipped, nopsi} {
			r.await(t, r.mark(), 30*time.Second, "state passing", isState(StatePassing))
		}
		time.Sleep(time.Duration(37*i%250) * time.Millisecond)
		m1, m2 := shipped.mark(), nopsi.mark()
		t0 := time.Now()
		srv.Stop()
		e1 := shipped.await(t, m1, 10*time.Second, "state critical", isState(StateCritical))
		e2 := nopsi.await(t, m2, 10*time.Second, "state critical", isState(StateCritical))
		srv.Cont()
		hungShipped = append(hungShipped, e1.at.Sub(t0))
		hungNoPSI = append(hungNoPSI, e2.at.Sub(t0))
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Logf("SIGSTOP under overload -> critical: shipped (PSI) %s; without PSI %s", distribution(hungShipped), distribution(hungNoPSI))
}
