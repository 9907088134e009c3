//go:build bench

// Package bench holds shoal's benchmark suites (issue #7): shoal against
// the stock serf agent and HAProxy's own health checks, side by side in one
// run on one machine. The suites report; they never fail on a timing. Each
// writes a markdown section to build/bench/, and `make bench` assembles
// them into docs/benchmarks.md (test/bench/report).
//
//	make bench                  # everything (about 45 minutes)
//	BENCH_QUICK=1 make bench    # a few minutes, few trials
//	go test -tags 'bench e2e' -count=1 -parallel 8 -v -timeout 90m -run TestDetection ./test/bench/
package bench

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/test/e2e"
)

// SerfVersion is the stock serf agent the suites compare against; it is the
// version shoal's go.mod uses.
const SerfVersion = "v0.11.0"

// Quick reports BENCH_QUICK=1: few trials and short windows, for a check
// that the suites run, not for numbers worth publishing.
func Quick() bool { return os.Getenv("BENCH_QUICK") == "1" }

// Pick returns full, or quick under BENCH_QUICK=1.
func Pick[T any](full, quick T) T {
	if Quick() {
		return quick
	}
	return full
}

// OutDir is where sections and plots go: $BENCH_OUT, else build/bench in
// the module root.
func OutDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("BENCH_OUT")
	if dir == "" {
		root, err := e2e.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "build", "bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteSection writes a markdown section (name like "10-detection") that
// the report assembles in name order.
func WriteSection(t testing.TB, name, body string) {
	t.Helper()
	p := filepath.Join(OutDir(t), name+".md")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", p)
}

var (
	toolsOnce sync.Once
	toolsDir  string
	toolsErr  error
)

// Tools builds, once per run, the stamp event handler and the stock serf
// agent (go install ...serf@SerfVersion) into build/bench/bin, and returns
// that directory. Nothing there is committed.
func Tools(t testing.TB) (stamp, serf string) {
	t.Helper()
	toolsOnce.Do(func() {
		root, err := e2e.RepoRoot()
		if err != nil {
			toolsErr = err
			return
		}
		toolsDir = filepath.Join(root, "build", "bench", "bin")
		gobin := "go"
		if p, err := exec.LookPath("go"); err == nil {
			gobin = p
		} else if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
			gobin = "/usr/local/go/bin/go"
		}
		// Built under a temporary name and renamed: two suites may build it
		// at the same time.
		tmp := filepath.Join(toolsDir, fmt.Sprintf(".stamp-%d", os.Getpid()))
		b := exec.Command(gobin, "build", "-o", tmp, "./test/bench/stamp")
		b.Dir = root
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := b.CombinedOutput(); err != nil {
			toolsErr = fmt.Errorf("build stamp: %v\n%s", err, out)
			return
		}
		if err := os.Rename(tmp, filepath.Join(toolsDir, "stamp")); err != nil {
			toolsErr = err
			return
		}
		if _, err := os.Stat(filepath.Join(toolsDir, "serf")); err == nil {
			return
		}
		in := exec.Command(gobin, "install", "github.com/hashicorp/serf/cmd/serf@"+SerfVersion)
		in.Dir = os.TempDir() // outside the module: go install pkg@version
		in.Env = append(os.Environ(), "GOBIN="+toolsDir, "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := in.CombinedOutput(); err != nil {
			toolsErr = fmt.Errorf("go install serf@%s: %v\n%s", SerfVersion, err, out)
		}
	})
	if toolsErr != nil {
		t.Fatalf("bench tools: %v", toolsErr)
	}
	return filepath.Join(toolsDir, "stamp"), filepath.Join(toolsDir, "serf")
}

// Stats summarizes samples in seconds (nearest-rank percentiles).
type Stats struct {
	N                       int
	P50, P90, P99, Max, Min float64
}

// Summarize computes Stats of xs.
func Summarize(xs []float64) Stats {
	s := Stats{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	v := append([]float64(nil), xs...)
	sort.Float64s(v)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return v[max(0, min(i, len(v)-1))]
	}
	s.P50, s.P90, s.P99, s.Max, s.Min = rank(0.5), rank(0.9), rank(0.99), v[len(v)-1], v[0]
	return s
}

// Secs converts durations to seconds.
func Secs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// Cells formats p50 | p90 | p99 | max in seconds, or "–" cells when empty.
func (s Stats) Cells() string {
	if s.N == 0 {
		return "– | – | – | –"
	}
	return fmt.Sprintf("%s | %s | %s | %s", fmtS(s.P50), fmtS(s.P90), fmtS(s.P99), fmtS(s.Max))
}

func fmtS(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// Table renders a markdown table.
func Table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// Command is the command line that reproduces a suite, for the report.
func Command(run string) string {
	return fmt.Sprintf("`sudo go test -tags 'bench e2e' -count=1 -parallel 8 -v -timeout 90m -run '%s' ./test/bench/` (`BENCH_QUICK=1` for a short run)", run)
}
