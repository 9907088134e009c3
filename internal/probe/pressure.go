package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultPressureDir is where Linux publishes pressure stall information
// (PSI, Linux 4.20+ with CONFIG_PSI): for each of cpu, io and memory, the
// cumulative time in which at least one task on the host was runnable but
// waiting for that resource.
const DefaultPressureDir = "/proc/pressure"

// pressureResources are the PSI files read, in report order.
var pressureResources = [...]string{"cpu", "io", "memory"}

// pressure is one reading of the host's cumulative "some" stall totals, one
// per pressureResources entry.
type pressure [len(pressureResources)]time.Duration

// readPressure reads the "some" totals from dir. An error means the host
// does not publish PSI (an older kernel, psi=0, a sandbox without /proc).
func readPressure(dir string) (pressure, error) {
	var p pressure
	for i, res := range pressureResources {
		b, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			return p, err
		}
		if p[i], err = parsePressureSome(b); err != nil {
			return p, fmt.Errorf("%s: %w", filepath.Join(dir, res), err)
		}
	}
	return p, nil
}

// parsePressureSome returns the total of the "some" line of a PSI file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=123456
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// total is in microseconds.
func parsePressureSome(b []byte) (time.Duration, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 || string(f[0]) != "some" {
			continue
		}
		for _, kv := range f[1:] {
			v, ok := bytes.CutPrefix(kv, []byte("total="))
			if !ok {
				continue
			}
			us, err := strconv.ParseUint(string(v), 10, 63)
			if err != nil || us > uint64(1<<63-1)/uint64(time.Microsecond) {
				return 0, fmt.Errorf("bad total %q", v)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
		return 0, fmt.Errorf("no total in %q", sc.Bytes())
	}
	return 0, fmt.Errorf("no \"some\" line")
}

// stallSince is the longest stall of any resource between an earlier
// reading and p, and that resource's name. Counters never go backwards; a
// reading that does is treated as no stall.
func (p pressure) stallSince(earlier pressure) (time.Duration, string) {
	var worst time.Duration
	name := ""
	for i := range p {
		if d := p[i] - earlier[i]; d > worst {
			worst, name = d, pressureResources[i]
		}
	}
	return worst, name
}

// stallGauge measures host stalls around a check. Its zero value (or one
// whose first reading failed) measures nothing.
type stallGauge struct {
	dir   string
	off   bool // PSI unreadable: stop trying
	start pressure
	ok    bool // start holds a reading for the current check
}

// begin takes the reading at the start of a check. It reports an error the
// first time the host's PSI cannot be read, after which the gauge is off.
func (g *stallGauge) begin() error {
	g.ok = false
	if g.off || g.dir == "" {
		return nil
	}
	p, err := readPressure(g.dir)
	if err != nil {
		g.off = true
		return err
	}
	g.start, g.ok = p, true
	return nil
}

// end returns the stall since begin (0 and "" when nothing was measured).
func (g *stallGauge) end() (time.Duration, string) {
	if !g.ok {
		return 0, ""
	}
	g.ok = false
	p, err := readPressure(g.dir)
	if err != nil {
		return 0, ""
	}
	return p.stallSince(g.start)
}
