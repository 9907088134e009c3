package hooks

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// A handler script without a "#!" line runs, as it does under stock Serf:
// execve refuses it (ENOEXEC) and the runner hands the file to /bin/sh, as
// execvp does. Its arguments stay arguments: nothing in them is run.
func TestScriptWithoutShebangRunsUnderSh(t *testing.T) {
	dir := t.TempDir()
	result := filepath.Join(dir, "result")
	pwned := filepath.Join(dir, "PWNED")
	script := filepath.Join(dir, "handler")
	// No "#!": plain sh syntax, as many Serf handlers are written.
	body := "echo \"$SERF_EVENT $#\" >> " + shQuote(result) + "\n" +
		"for a in \"$@\"; do printf '%s\\n' \"$a\" >> " + shQuote(result) + "; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := "$(touch " + pwned + ");touch " + pwned
	raw := shQuote(script) + " plain " + shQuote(hostile)
	r, _ := newTestRunner(t, Config{}, raw)

	r.Enqueue(serf.UserEvent{Name: "deploy", LTime: 1})
	testkit.WaitFor(t, 30*time.Second, "one run", func() bool { return stats(t, r, raw).Ran == 1 })

	if s := stats(t, r, raw); s.Failed != 0 || s.LastExitCode != 0 || s.LastError != "" {
		t.Fatalf("stats %+v; want a successful run", s)
	}
	want := "user 2\nplain\n" + hostile + "\n"
	if got := readFile(t, result); got != want {
		t.Errorf("result file %q, want %q", got, want)
	}
	if fileExists(pwned) {
		t.Error("an argument was run by the shell")
	}
}

// A file that is not executable at all still fails to start: the fallback
// is for ENOEXEC only, never for EACCES.
func TestNonExecutableScriptStillFails(t *testing.T) {
	dir := t.TempDir()
	result := filepath.Join(dir, "result")
	script := filepath.Join(dir, "handler")
	if err := os.WriteFile(script, []byte("echo ran > "+shQuote(result)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := shQuote(script)
	r, _ := newTestRunner(t, Config{}, raw)
	r.Enqueue(serf.UserEvent{Name: "deploy", LTime: 1})
	testkit.WaitFor(t, 30*time.Second, "one failed run", func() bool { return stats(t, r, raw).Failed == 1 })
	if fileExists(result) {
		t.Error("a non-executable file was run")
	}
}
