package probe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

func TestParsePressureSome(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"some avg10=3.12 avg60=2.66 avg300=1.21 total=7384516\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 7384516 * time.Microsecond, ""},
		{"full avg10=0.00 total=9\nsome avg10=0.00 total=42\n", 42 * time.Microsecond, ""},
		{"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0, ""},
		{"", 0, `no "some" line`},
		{"full avg10=0.00 total=1\n", 0, `no "some" line`},
		{"some avg10=0.00\n", 0, "no total"},
		{"some total=-1\n", 0, "bad total"},
		{"some total=99999999999999999999\n", 0, "bad total"},
		{"some total=18446744073709551\n", 0, "bad total"}, // over time.Duration's range in µs
	} {
		got, err := parsePressureSome([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// writePressure writes cpu, io and memory PSI files with the given "some"
// totals (µs) into dir.
func writePressure(t testing.TB, dir string, cpu, io, mem int64) {
	t.Helper()
	if err := writePressureFiles(dir, cpu, io, mem); err != nil {
		t.Fatal(err)
	}
}

// writePressureFiles replaces dir's PSI files (atomically, like the kernel's
// are read) with these "some" totals in microseconds.
func writePressureFiles(dir string, cpu, io, mem int64) error {
	for name, v := range map[string]int64{"cpu": cpu, "io": io, "memory": mem} {
		body := "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + strconv.FormatInt(v, 10) + "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func TestStallGauge(t *testing.T) {
	dir := t.TempDir()
	writePressure(t, dir, 1000, 5000, 0)
	g := stallGauge{dir: dir}
	if err := g.begin(); err != nil {
		t.Fatal(err)
	}
	writePressure(t, dir, 301000, 5000+450000, 10)
	if d, on := g.end(); d != 450*time.Millisecond || on != "io" {
		t.Errorf("end: %s on %q, want 450ms on io", d, on)
	}
	if d, on := g.end(); d != 0 || on != "" {
		t.Errorf("end without begin: %s on %q, want nothing", d, on)
	}

	// Counters that go backwards (a reset) are no stall.
	if err := g.begin(); err != nil {
		t.Fatal(err)
	}
	writePressure(t, dir, 0, 0, 0)
	if d, _ := g.end(); d != 0 {
		t.Errorf("counters went backwards: stall %s, want 0", d)
	}

	// A host without PSI: one error, then the gauge is off and quiet.
	off := stallGauge{dir: filepath.Join(dir, "missing")}
	if err := off.begin(); err == nil {
		t.Error("missing PSI: no error")
	}
	if err := off.begin(); err != nil {
		t.Errorf("second begin after PSI was found missing: %v, want nil (reported once)", err)
	}
	if d, _ := off.end(); d != 0 {
		t.Errorf("gauge off: stall %s", d)
	}
}

// TestHostPressureReadable reads this host's real PSI files, as the probe does.
func TestHostPressureReadable(t *testing.T) {
	a, err := readPressure(DefaultPressureDir)
	if err != nil {
		t.Skipf("SKIPPED: this host does not publish PSI (%v): the probe then weighs every timeout as a hung server", err)
	}
	time.Sleep(20 * time.Millisecond)
	b, err := readPressure(DefaultPressureDir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if b[i] < a[i] {
			t.Errorf("%s: total went from %s to %s", pressureResources[i], a[i], b[i])
		}
	}
	t.Logf("PSI some totals: cpu %s, io %s, memory %s", b[0], b[1], b[2])
}

// TestProbeSigstopUnderHostStall hangs a real mariadbd (SIGSTOP) while the
// probe's PSI files report the host stalled on CPU the whole time: the first
// timeout must not make the server critical on its own, the second must.
// Without the stall the first timeout is enough (the control).
func TestProbeSigstopUnderHostStall(t *testing.T) {
	mariadbtest.Require(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	createProbeUser(t, srv, probeUser, "SLAVE MONITOR")
	for _, stalled := range []bool{true, false} {
		dir := t.TempDir()
		writePressure(t, dir, 0, 0, 0)
		var stalling atomic.Bool
		done, stopped := make(chan struct{}), make(chan struct{})
		tick := time.NewTicker(5 * time.Millisecond)
		go func() { // a stalled host: cpu "some" grows with wall time
			defer close(stopped)
			defer tick.Stop()
			var cpu int64
			last := time.Now()
			for {
				select {
				case <-done:
					return
				case now := <-tick.C:
					if stalling.Load() {
						cpu += now.Sub(last).Microseconds()
					}
					last = now
					if err := writePressureFiles(dir, cpu, 0, 0); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		p, rec := startProbe(t, srv, nil, func(p *Probe) { p.stall.dir = dir })
		rec.await(t, 0, 10*time.Second, "state passing", isState(StatePassing))
		m := rec.mark()
		stalling.Store(stalled)
		srv.Stop()
		e := rec.await(t, m, 10*time.Second, "state critical", isState(StateCritical))
		srv.Cont()
		p.Close()
		close(done)
		<-stopped // before t.TempDir's cleanup removes dir

		timeouts := 0
		for _, ev := range rec.since(m) {
			if ev.Status.Last.Reason == ReasonTimeout {
				timeouts++
				// The timed-out check read nothing; what was known stays.
				if k := ev.Status.Known; !k.Reachable || k.ServerID != uint32(srv.ServerID()) || ev.Status.Last.FactsRead {
					t.Errorf("after a timeout: known facts %+v, facts read %v", k, ev.Status.Last.FactsRead)
				}
			}
			if ev.Status.State == StateCritical {
				break
			}
		}
		want := 1
		if stalled {
			want = 2
		}
		t.Logf("host stalled %v: critical after %d timeouts: %s", stalled, timeouts, e.Status.Message)
		if timeouts != want {
			t.Errorf("host stalled %v: critical after %d timeouts, want %d", stalled, timeouts, want)
		}
		if got := strings.Contains(e.Status.Message, "the host stalled on cpu"); got != stalled {
			t.Errorf("host stalled %v: message %q", stalled, e.Status.Message)
		}
		if stalled && e.Status.Last.HostStall < e.Status.Last.Duration/2 {
			t.Errorf("host stall %s over a %s check, want most of it", e.Status.Last.HostStall, e.Status.Last.Duration)
		}
	}
}
