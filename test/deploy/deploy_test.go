// Package deploy_test checks the files under deploy/ (systemd unit, example
// configurations, HAProxy configurations, container and Kubernetes files,
// Prometheus rules, Grafana dashboard) with the tools that consume them:
// `shoal agent --config-check` on a freshly built binary, promtool (Debian
// package prometheus), haproxy, systemd-analyze, and, for what cannot run
// here (Docker, Kubernetes, Grafana), by parsing them.
//
// promtool and haproxy are optional outside CI: without them their tests
// skip; under CI=true they fail with the apt-get hint. systemd-analyze
// verify skips wherever it is missing or cannot work (no systemd in the
// container); the unit's required keys are checked in Go everywhere.
package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// repoPath returns the absolute path of a file of the repository.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// requireTool returns the path of a command. Without it the test skips, or
// fails under CI=true, naming the Debian package that provides it.
func requireTool(t *testing.T, name, aptPackage string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err == nil {
		return bin
	}
	msg := fmt.Sprintf("%s not found in PATH: apt-get install -y %s", name, aptPackage)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the deploy checks must not be skipped)", msg)
	}
	t.Skip(msg)
	return ""
}

// cleanEnv is the test's environment without SHOAL_* and SERF_* variables,
// so that nothing of the machine's own setup changes what is checked.
func cleanEnv(extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SHOAL_") || strings.HasPrefix(kv, "SERF_")
	})
	return append(env, extra...)
}

// run runs a command in dir with a clean environment and returns its
// combined output.
func run(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// shoalBin builds ./cmd/shoal once per test run; TestMain removes it.
func shoalBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "shoal-deploy-test-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "shoal"), "./cmd/shoal")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/shoal: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "shoal")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// knownMetrics are the metric names shoal exports, read from the table in
// docs/observability.md (internal/agent's TestMetricsDocumented checks that
// table against what a running agent exports, both ways). Rules and
// dashboards may use only these (histograms also with _bucket, _sum and
// _count).
var knownMetrics, histograms = documentedMetrics()

// documentedMetrics returns every name in the table's rows, and those whose
// type column says histogram.
func documentedMetrics() (names, histograms map[string]bool) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		panic(err)
	}
	names, histograms = map[string]bool{}, map[string]bool{}
	for _, row := range regexp.MustCompile("(?m)^\\| `[^|]*\\|[^|]*\\|").FindAllString(string(b), -1) {
		cols := strings.Split(row, "|")
		for _, n := range regexp.MustCompile("`(shoal_[a-z_]+)[`{]").FindAllStringSubmatch(cols[1], -1) {
			names[n[1]] = true
			if strings.TrimSpace(cols[2]) == "histogram" {
				histograms[n[1]] = true
			}
		}
	}
	return names, histograms
}

var metricRe = regexp.MustCompile(`shoal_[a-z_]+`)

// metricsIn returns the shoal metric names an expression uses, and those
// that shoal does not export.
func metricsIn(expr string) (used, unknown []string) {
	for _, name := range metricRe.FindAllString(expr, -1) {
		used = append(used, name)
		if knownMetrics[name] {
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok {
				base = b
				break
			}
		}
		if !histograms[base] {
			unknown = append(unknown, name)
		}
	}
	return used, unknown
}

func TestMetricsIn(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		unknown []string
	}{
		{`shoal_members{status="failed"} > 0`, nil},
		{`histogram_quantile(0.99, rate(shoal_mysql_check_duration_seconds_bucket[5m]))`, nil},
		{`shoal_hook_run_duration_seconds_sum / shoal_hook_run_duration_seconds_count`, nil},
		{`shoal_pool_nodes_bucket`, []string{"shoal_pool_nodes_bucket"}},
		{`shoal_mysql_lag_seconds + shoal_mysql_up`, []string{"shoal_mysql_lag_seconds"}},
	} {
		if _, unknown := metricsIn(tc.expr); !slices.Equal(unknown, tc.unknown) {
			t.Errorf("metricsIn(%q) unknown = %q, want %q", tc.expr, unknown, tc.unknown)
		}
	}
}

func TestDocumentedMetricsParsed(t *testing.T) {
	for _, n := range []string{"shoal_build_info", "shoal_pool_out", "shoal_member_failure_checks_total", "shoal_mysql_check_duration_seconds"} {
		if !knownMetrics[n] {
			t.Errorf("%s not read from docs/observability.md", n)
		}
	}
	if !histograms["shoal_hook_run_duration_seconds"] || histograms["shoal_pool_out"] {
		t.Errorf("histogram column misread: %v", histograms)
	}
}
