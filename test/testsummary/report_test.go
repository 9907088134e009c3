package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryNamesEverySkip feeds a real `go test -json` run of a
// throw-away module (one pass, one skip with a reason, one skipped
// subtest, one failure) through the tool, as `make test` does.
func TestSummaryNamesEverySkip(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not in PATH: %v", err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("m_test.go", `package m

import "testing"

func TestPasses(t *testing.T) {}

func TestNeedsHAProxy(t *testing.T) {
	t.Log("looking for haproxy")
	t.Skip("haproxy not found in PATH; apt-get install -y haproxy")
}

func TestParent(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Skipf("needs root") })
}

func TestFails(t *testing.T) { t.Error("boom") }
`)
	var out, errb bytes.Buffer
	code := run([]string{"--", goBin, "-C", dir, "test", "-count=1", "-json", "./..."}, &out, &errb)
	got := out.String()
	if code == 0 {
		t.Fatalf("exit 0 with a failing test:\n%s\n%s", got, errb.String())
	}
	for _, want := range []string{
		"m_test.go:16: boom",  // the failed test's output
		"FAIL\texample.com/m", // the package result
		"tests: 2 passed, 1 failed, 2 skipped",
		"SKIPPED, NOT PASSED (2):",
		"  example.com/m TestNeedsHAProxy: m_test.go:8: looking for haproxy / m_test.go:9: haproxy not found in PATH; apt-get install -y haproxy\n",
		"  example.com/m TestParent/sub: m_test.go:13: needs root\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") || strings.Contains(got, "\"Action\"") {
		t.Errorf("framing or raw JSON leaked into the output:\n%s", got)
	}
}

func TestSummaryWithoutSkips(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	in := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p"}
not json: printed as it is
`
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	r.summary()
	want := "ok  \tp\t0.01s\nnot json: printed as it is\n\ntests: 1 passed, 0 failed, 0 skipped\nno test skipped\n"
	if out.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", out.String(), want)
	}
}

// TestPackageFailureWithoutTestCounts: a build failure or a panic outside
// any test fails the package with no failed test; it still counts.
func TestPackageFailureWithoutTestCounts(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	in := `{"ImportPath":"p","Action":"build-output","Output":"p/x.go:3:1: syntax error\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p"}
`
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	r.summary()
	if !strings.Contains(out.String(), "syntax error") || !strings.Contains(out.String(), "0 passed, 1 failed") {
		t.Fatalf("got:\n%s", out.String())
	}
}

// TestRecapRepeatsFailedLeaves: the end of the run repeats the last lines
// of each failed test without a failed subtest (the parent is not
// repeated); -v prints every line as it comes, framing included.
func TestRecapRepeatsFailedLeaves(t *testing.T) {
	in := `{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:9: measured 1.2s\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:10: db1 not out within 20s\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    --- FAIL: TestA/sub (5.45s)\n"}
{"Action":"fail","Package":"p","Test":"TestA/sub"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:30: server log: a long dump\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (9.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: fine\n"}
{"Action":"pass","Package":"p","Test":"TestB"}
{"Action":"fail","Package":"p"}
`
	for _, verbose := range []bool{false, true} {
		var out bytes.Buffer
		r := newReport(&out)
		r.verbose = verbose
		if err := r.read(strings.NewReader(in)); err != nil {
			t.Fatal(err)
		}
		r.summary()
		got := out.String()
		_, recap, ok := strings.Cut(got, "\nFAILED (1), the last lines of each:\n--- p TestA/sub\n")
		if !ok {
			t.Fatalf("verbose %v: no recap of TestA/sub alone:\n%s", verbose, got)
		}
		if !strings.HasPrefix(recap, "    a_test.go:9: measured 1.2s\n    a_test.go:10: db1 not out within 20s\n") || strings.Contains(recap, "long dump") {
			t.Errorf("verbose %v: recap %q", verbose, recap)
		}
		if verbose != strings.Contains(got, "b_test.go:3: fine") || verbose != strings.Contains(got, "=== RUN") {
			t.Errorf("verbose %v: a passing test's lines or the framing printed %v:\n%s", verbose, !verbose, got)
		}
	}
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{nil, {"--"}, {"-x", "--", "go"}, {"-v"}} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (usage)", args, code)
		}
	}
}
