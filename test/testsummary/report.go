package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output events
}

// Bounds: a test's kept output, the longest line read, and the lines of
// a failed test repeated in the closing recap.
const (
	maxTestLines  = 400
	maxLine       = 4 << 20
	maxRecapLines = 20
)

type testKey struct{ pkg, test string }

// skip is one skipped test and the reason it logged.
type skip struct {
	testKey
	reason string
}

// report turns the event stream into plain go test output and a summary.
type report struct {
	w       io.Writer
	out     map[testKey][]string // each running test's output, the last maxTestLines lines
	skips   []skip
	passed  int
	failed  int // failed tests, or packages failing without a failed test
	pkgFail map[string]bool
	failedT map[string]bool // packages with a failed test
	recap   []failure       // failed tests in the order they ended
	verbose bool            // print every line as it comes (go test -v)
}

// failure is a failed test and the last lines it printed: the run's last
// lines repeat them, since a long run's log is often read from its end.
type failure struct {
	testKey
	tail []string
}

func newReport(w io.Writer) *report {
	return &report{w: w, out: map[testKey][]string{}, pkgFail: map[string]bool{}, failedT: map[string]bool{}}
}

// read consumes the stream; lines that are not JSON are printed as they are.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(r.w, "%s\n", line)
			continue
		}
		r.handle(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("go test -json stream: %w", err)
	}
	return nil
}

func (r *report) handle(e event) {
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.w, e.Output)
	case e.Test == "":
		r.packageEvent(e)
	default:
		r.testEvent(e)
	}
}

// packageEvent prints what plain go test prints for a package: its result
// line (ok, FAIL, ?) and anything it printed outside a test.
func (r *report) packageEvent(e event) {
	switch e.Action {
	case "output":
		if e.Output == "PASS\n" || strings.HasPrefix(e.Output, "=== ") {
			return
		}
		fmt.Fprint(r.w, e.Output)
	case "fail":
		r.pkgFail[e.Package] = true
	}
}

func (r *report) testEvent(e event) {
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		if r.verbose {
			fmt.Fprint(r.w, e.Output)
		}
		if strings.HasPrefix(e.Output, "=== ") {
			return // -json's framing (=== RUN, PAUSE, CONT, NAME): plain go test prints none
		}
		lines := append(r.out[k], e.Output)
		if len(lines) > maxTestLines {
			lines = append(lines[:1:1], lines[len(lines)-maxTestLines+1:]...)
			lines[0] = fmt.Sprintf("    [testsummary: earlier output dropped; kept the last %d lines]\n", maxTestLines-1)
		}
		r.out[k] = lines
	case "pass":
		r.passed++
		delete(r.out, k)
	case "skip":
		r.skips = append(r.skips, skip{k, skipReason(r.out[k])})
		delete(r.out, k)
	case "fail":
		r.failed++
		r.failedT[e.Package] = true
		if !r.verbose {
			fmt.Fprint(r.w, strings.Join(r.out[k], ""))
		}
		lines := r.out[k]
		r.recap = append(r.recap, failure{k, slices.Clone(lines[max(0, len(lines)-maxRecapLines):])})
		delete(r.out, k)
	}
}

// printRecap repeats, once the run is over, the last lines of every failed
// test that has no failed subtest of its own (a parent's failure is its
// subtests'; its output is mostly theirs).
func (r *report) printRecap() {
	var leaves []failure
	for _, f := range r.recap {
		leaf := true
		for _, g := range r.recap {
			if g.pkg == f.pkg && strings.HasPrefix(g.test, f.test+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			leaves = append(leaves, f)
		}
	}
	if len(leaves) == 0 {
		return
	}
	fmt.Fprintf(r.w, "\nFAILED (%d), the last lines of each:\n", len(leaves))
	for _, f := range leaves {
		fmt.Fprintf(r.w, "--- %s %s\n%s", f.pkg, f.test, strings.Join(f.tail, ""))
	}
}

// skipReason is what a skipped test logged: its t.Skip message (and any
// t.Log before it), without go test's framing lines.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}

// summary prints the counts and every skipped test with its reason.
func (r *report) summary() {
	for pkg := range r.pkgFail {
		if !r.failedT[pkg] {
			r.failed++ // a build failure, a panic outside a test, a timeout
		}
	}
	r.printRecap()
	fmt.Fprintf(r.w, "\ntests: %d passed, %d failed, %d skipped\n", r.passed, r.failed, len(r.skips))
	if len(r.skips) == 0 {
		fmt.Fprintln(r.w, "no test skipped")
		return
	}
	sort.Slice(r.skips, func(i, j int) bool {
		if r.skips[i].pkg != r.skips[j].pkg {
			return r.skips[i].pkg < r.skips[j].pkg
		}
		return r.skips[i].test < r.skips[j].test
	})
	fmt.Fprintf(r.w, "SKIPPED, NOT PASSED (%d):\n", len(r.skips))
	for _, s := range r.skips {
		fmt.Fprintf(r.w, "  %s %s: %s\n", s.pkg, s.test, s.reason)
	}
}
