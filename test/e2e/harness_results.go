//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Measure is one measured time of a scenario.
type Measure struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Bound is the scenario's limit for it (0: informational).
	Bound float64 `json:"bound_seconds,omitempty"`
	OK    bool    `json:"ok"`
}

// Result is one scenario's outcome.
type Result struct {
	Name     string    `json:"name"`
	Status   string    `json:"status"` // pass, fail, skip
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Measures []Measure `json:"measures"`
	Counts   []Count   `json:"counts,omitempty"`
	Errors   []string  `json:"errors,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
}

// Count is a counted event (e.g. false failures during the stability run).
type Count struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
}

// Run is one test process's results.
type Run struct {
	ID        string    `json:"id"`
	Started   time.Time `json:"started"`
	Host      string    `json:"host"`
	Scenarios []Result  `json:"scenarios"`
}

var (
	runMu  sync.Mutex
	curRun = Run{ID: NewPrefix(), Started: time.Now()}
)

// S is a scenario's test handle: a testing.TB whose failures are also
// recorded in the results file, plus measurements.
type S struct {
	testing.TB
	mu  sync.Mutex
	res Result
}

// Scenario starts recording the scenario run by t. Its result is written
// to the results file when the test ends.
func Scenario(t *testing.T, name string) *S {
	s := &S{TB: t, res: Result{Name: name, Started: time.Now(), Measures: []Measure{}}}
	t.Cleanup(func() {
		s.mu.Lock()
		res := s.res
		s.mu.Unlock()
		res.Seconds = time.Since(res.Started).Seconds()
		switch {
		case t.Failed():
			res.Status = "fail"
		case t.Skipped():
			res.Status = "skip"
		default:
			res.Status = "pass"
		}
		record(res)
	})
	return s
}

func (s *S) addError(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Errors = append(s.res.Errors, msg)
}

// Errorf records and reports a failure.
func (s *S) Errorf(format string, args ...any) {
	s.TB.Helper()
	s.addError(fmt.Sprintf(format, args...))
	s.TB.Errorf(format, args...)
}

// Fatalf records and reports a failure and stops the scenario.
func (s *S) Fatalf(format string, args ...any) {
	s.TB.Helper()
	s.addError(fmt.Sprintf(format, args...))
	s.TB.Fatalf(format, args...)
}

// Error records and reports a failure.
func (s *S) Error(args ...any) {
	s.TB.Helper()
	s.addError(fmt.Sprint(args...))
	s.TB.Error(args...)
}

// Fatal records and reports a failure and stops the scenario.
func (s *S) Fatal(args ...any) {
	s.TB.Helper()
	s.addError(fmt.Sprint(args...))
	s.TB.Fatal(args...)
}

// Note adds a line to the scenario's result and the test log.
func (s *S) Note(format string, args ...any) {
	s.TB.Helper()
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.res.Notes = append(s.res.Notes, msg)
	s.mu.Unlock()
	s.TB.Log(msg)
}

// Measure records a measured time against its bound (0: no bound) and
// fails the scenario when ok is false.
func (s *S) Measure(name string, took, bound time.Duration, ok bool) {
	s.TB.Helper()
	m := Measure{Name: name, Seconds: took.Seconds(), Bound: bound.Seconds(), OK: ok}
	s.mu.Lock()
	s.res.Measures = append(s.res.Measures, m)
	s.mu.Unlock()
	if ok {
		s.TB.Logf("%s: %.3fs (bound %s)", name, took.Seconds(), bound)
	} else {
		s.Errorf("%s: not within %s (waited %.3fs)", name, bound, took.Seconds())
	}
}

// Count records a counted event.
func (s *S) Count(name string, v int) {
	s.TB.Helper()
	s.mu.Lock()
	s.res.Counts = append(s.res.Counts, Count{name, v})
	s.mu.Unlock()
	s.TB.Logf("%s: %d", name, v)
}

func record(res Result) {
	runMu.Lock()
	defer runMu.Unlock()
	curRun.Scenarios = append(curRun.Scenarios, res)
	if err := writeResults(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: results file: %v\n", err)
	}
}

// ResultsPath is $SHOAL_E2E_RESULTS or build/e2e-results.json under the
// module root.
func ResultsPath() string {
	if p := os.Getenv("SHOAL_E2E_RESULTS"); p != "" {
		return p
	}
	root, err := RepoRoot()
	if err != nil {
		root = "."
	}
	return filepath.Join(root, "build", "e2e-results.json")
}

// keepRuns is how many runs the results file keeps, oldest dropped first.
const keepRuns = 100

// writeResults adds (or replaces) this run in the results file, a JSON
// document {"runs": [...]} that keeps the last keepRuns runs: written to a temporary
// file and renamed, so a reader never sees half a file.
func writeResults() error {
	path := ResultsPath()
	var doc struct {
		Runs []Run `json:"runs"`
	}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s exists but is not a results file (%v); move it away", path, err)
		}
	}
	if curRun.Host == "" {
		curRun.Host, _ = os.Hostname()
	}
	replaced := false
	for i := range doc.Runs {
		if doc.Runs[i].ID == curRun.ID {
			doc.Runs[i], replaced = curRun, true
		}
	}
	if !replaced {
		doc.Runs = append(doc.Runs, curRun)
	}
	if len(doc.Runs) > keepRuns {
		doc.Runs = doc.Runs[len(doc.Runs)-keepRuns:]
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// PrintSummary writes a table of this run's scenarios.
func PrintSummary(w io.Writer) {
	runMu.Lock()
	defer runMu.Unlock()
	if len(curRun.Scenarios) == 0 {
		return
	}
	fmt.Fprintf(w, "\n=== e2e summary (run %s, results in %s)\n", curRun.ID, ResultsPath())
	fmt.Fprintf(w, "%-22s %-5s %8s  %s\n", "SCENARIO", "", "TIME", "MEASURED")
	for _, r := range curRun.Scenarios {
		var ms []string
		for _, m := range r.Measures {
			flag := ""
			if !m.OK {
				flag = "!"
			}
			if m.Bound > 0 {
				ms = append(ms, fmt.Sprintf("%s=%.2fs%s(≤%gs)", m.Name, m.Seconds, flag, m.Bound))
			} else {
				ms = append(ms, fmt.Sprintf("%s=%.2fs%s", m.Name, m.Seconds, flag))
			}
		}
		for _, c := range r.Counts {
			ms = append(ms, fmt.Sprintf("%s=%d", c.Name, c.Value))
		}
		fmt.Fprintf(w, "%-22s %-5s %7.1fs  %s\n", r.Name, strings.ToUpper(r.Status), r.Seconds, strings.Join(ms, " "))
		for _, e := range r.Errors {
			fmt.Fprintf(w, "%-22s   error: %s\n", "", firstLine(e))
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
