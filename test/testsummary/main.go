// Command testsummary runs `go test -json ...` (the command after --) and
// prints what plain `go test` would (each package's result, the output of
// every failed test, build errors), then a summary that names every skipped
// test and why it skipped, so that no skip passes silently, and repeats
// the last lines of every failed test at the end (a long run's log is read
// from its end). `make test` runs the tests through it; `make e2e` with -v,
// which prints every line as it comes, as go test -v does.
//
//	go run ./test/testsummary -- go test -race -count=1 -json ./...
//	go run ./test/testsummary -v -- go test -count=1 -tags e2e -json ./test/e2e/
//
// It exits with the command's status, or 1 when the stream reports a
// failure that the status does not.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	verbose := false
	if len(args) > 0 && args[0] == "-v" {
		verbose, args = true, args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: testsummary [-v] -- go test -json [flags] [packages]")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsummary: start %s: %v\n", args[0], err)
		return 1
	}
	// A signal goes to go test, which stops its tests and reports; the
	// summary of what ran is still printed.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	r := newReport(stdout)
	r.verbose = verbose
	readErr := r.read(out)
	waitErr := cmd.Wait()
	r.summary()
	if readErr != nil {
		fmt.Fprintf(stderr, "testsummary: read the test output: %v\n", readErr)
		return 1
	}
	var ee *exec.ExitError
	switch {
	case errors.As(waitErr, &ee):
		if code := ee.ExitCode(); code > 0 {
			return code
		}
		return 1
	case waitErr != nil:
		fmt.Fprintf(stderr, "testsummary: %s: %v\n", args[0], waitErr)
		return 1
	case r.failed > 0:
		return 1
	}
	return 0
}
