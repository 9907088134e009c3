package demo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Down stops every process of the demo by the PID in its pid file: the load
// client, the agents (SIGTERM: a graceful leave, which they confirm with
// exit 0; all at once, so that each sees the others leaving), HAProxy and
// the MariaDB servers (SIGCONT in case the tour left one stopped, then
// SIGTERM: a clean shutdown). It waits for each, and fails naming every
// process that did not stop, or whose log says it did not stop cleanly.
// Pid files of stopped processes are removed; logs are kept.
func (l *Layout) Down(out io.Writer) error {
	if _, err := os.Stat(l.Dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "no demo in %s\n", l.Dir)
		return nil
	}
	var problems []string
	stopped := 0
	stopGroup := func(names []string, sig syscall.Signal, timeout time.Duration) {
		pids := map[string]int{}
		for _, n := range names {
			pid, err := l.readPID(n)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if pid == 0 {
				continue
			}
			if !ours(n, pid) {
				// Already gone (or the PID is someone else's now).
				_ = os.Remove(l.pidFile(n))
				continue
			}
			if strings.HasPrefix(n, "mariadb-") {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
			if err := syscall.Kill(pid, sig); err != nil {
				problems = append(problems, fmt.Sprintf("%s (pid %d): %v", n, pid, err))
				continue
			}
			pids[n] = pid
		}
		for _, n := range names {
			pid, ok := pids[n]
			if !ok {
				continue
			}
			if !waitGone(pid, timeout) {
				problems = append(problems, fmt.Sprintf("%s (pid %d) still running %s after %v", n, pid, timeout, sig))
				continue
			}
			_ = os.Remove(l.pidFile(n))
			if msg := l.exitProblem(n); msg != "" {
				problems = append(problems, msg)
				continue
			}
			fmt.Fprintf(out, "stopped %s (pid %d)\n", n, pid)
			stopped++
		}
	}
	stopGroup([]string{"client"}, syscall.SIGTERM, 10*time.Second)
	agents := []string{"agent-" + App}
	for _, n := range DBNodes {
		agents = append(agents, "agent-"+n)
	}
	stopGroup(agents, syscall.SIGTERM, 20*time.Second)
	stopGroup([]string{"haproxy"}, syscall.SIGTERM, 10*time.Second)
	var dbs []string
	for _, n := range DBNodes {
		dbs = append(dbs, "mariadb-"+n)
	}
	stopGroup(dbs, syscall.SIGTERM, 60*time.Second)

	if len(problems) > 0 {
		return fmt.Errorf("demo stopped with problems (logs kept in %s):\n  %s", l.Dir, strings.Join(problems, "\n  "))
	}
	if stopped == 0 {
		fmt.Fprintf(out, "no demo process was running in %s\n", l.Dir)
		return nil
	}
	fmt.Fprintf(out, "demo stopped: every process exited, the agents left cleanly (logs kept in %s)\n", l.Dir)
	return nil
}

// exitProblem reads, for a stopped agent, the last line of its log: the
// agents are not our children, so their exit status is what they print
// ("Error: ..." when it was not 0).
func (l *Layout) exitProblem(name string) string {
	if !strings.HasPrefix(name, "agent-") {
		return ""
	}
	last := tail(l.Path(name+".log"), 1)
	if strings.HasPrefix(last, "Error:") {
		return fmt.Sprintf("%s: %s", name, last)
	}
	return ""
}
