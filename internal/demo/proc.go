package demo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A demo process is started detached (its own session, stdin /dev/null,
// output to its log under the state dir), so that it outlives the command
// that started it, and its PID is written to DIR/NAME.pid. It is only ever
// signalled by that PID, after checking that the PID still runs the program
// it was started as (PIDs are reused).

// spawn starts argv detached and writes DIR/name.pid.
func (l *Layout) spawn(name string, argv, env []string, logPath string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while we are still running; once we exit, init
	// (or the nearest subreaper) does.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(l.pidFile(name), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("write %s: %w", l.pidFile(name), err)
	}
	return pid, nil
}

func (l *Layout) pidFile(name string) string { return l.Path(name + ".pid") }

// procNames are the processes of a demo, in stop order.
func procNames() []string {
	names := []string{"client"}
	for _, n := range append([]string{App}, DBNodes...) {
		names = append(names, "agent-"+n)
	}
	names = append(names, "haproxy")
	for _, n := range DBNodes {
		names = append(names, "mariadb-"+n)
	}
	return names
}

// program is the executable name a process of that name runs.
func program(name string) string {
	switch {
	case name == "client":
		return "shoal-demo"
	case strings.HasPrefix(name, "agent-"):
		return "shoal"
	case name == "haproxy":
		return "haproxy"
	default:
		return "mariadbd"
	}
}

// readPID returns the PID in DIR/name.pid, 0 without one.
func (l *Layout) readPID(name string) (int, error) {
	b, err := os.ReadFile(l.pidFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: not a PID: %q", l.pidFile(name), bytes.TrimSpace(b))
	}
	return pid, nil
}

// PIDFiles lists the state dir's *.pid files by process name.
func (l *Layout) PIDFiles() (map[string]int, error) {
	paths, err := filepath.Glob(l.Path("*.pid"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".pid")
		pid, err := l.readPID(name)
		if err != nil {
			return nil, err
		}
		out[name] = pid
	}
	return out, nil
}

// Alive reports whether pid runs (a zombie does not).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// ours reports whether pid is alive and runs the program name was started
// as (a PID left in a stale pid file may belong to something else by now).
func ours(name string, pid int) bool {
	if pid <= 1 || !Alive(pid) {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		// Not ours to read (another user's process): not ours to signal.
		return false
	}
	exe = strings.TrimSuffix(exe, " (deleted)") // a rebuilt binary
	return filepath.Base(exe) == program(name)
}

// running returns the PID of name if it runs, else 0.
func (l *Layout) running(name string) int {
	pid, err := l.readPID(name)
	if err != nil || !ours(name, pid) {
		return 0
	}
	return pid
}

// Running lists the demo processes that run, by name.
func (l *Layout) Running() []string {
	var out []string
	for _, n := range procNames() {
		if pid := l.running(n); pid != 0 {
			out = append(out, fmt.Sprintf("%s (pid %d)", n, pid))
		}
	}
	return out
}

// signal sends sig to name's process if it is ours.
func (l *Layout) signal(name string, sig syscall.Signal) (int, error) {
	pid := l.running(name)
	if pid == 0 {
		return 0, fmt.Errorf("%s is not running (%s)", name, l.pidFile(name))
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return pid, fmt.Errorf("signal %v to %s (pid %d): %w", sig, name, pid, err)
	}
	return pid, nil
}

// waitGone waits until pid is no longer alive.
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
