//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// registry remembers everything the harness started, so that an interrupted
// run (SIGINT, SIGTERM) can still kill exactly those processes, by PID, and
// delete exactly its own namespaces. t.Cleanup does the same on a normal
// exit; the registry is only the safety net for signals.
type registry struct {
	mu    sync.Mutex
	procs map[*Proc]bool
	pids  map[string]func() int // processes started elsewhere (mariadbtest), by a PID getter
	netns []string              // in creation order
	dirs  map[string]bool       // removed after the processes are gone
}

var reg = &registry{procs: map[*Proc]bool{}, pids: map[string]func() int{}, dirs: map[string]bool{}}

// addDir registers a directory to remove on a signal; removeDir forgets it.
func (r *registry) addDir(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirs[dir] = true
}

func (r *registry) removeDir(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.dirs, dir)
}

func (r *registry) addNetns(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.netns = append(r.netns, name)
}

func (r *registry) removeNetns(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, n := range r.netns {
		if n == name {
			r.netns = append(r.netns[:i], r.netns[i+1:]...)
			return
		}
	}
}

func (r *registry) addPIDFunc(key string, f func() int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pids[key] = f
}

func (r *registry) removePIDFunc(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pids, key)
}

// teardown kills every registered process by PID, then deletes the
// registered namespaces, newest first, one `ip netns del` per namespace.
func (r *registry) teardown() {
	r.mu.Lock()
	procs := make([]*Proc, 0, len(r.procs))
	for p := range r.procs {
		procs = append(procs, p)
	}
	var pids []int
	for _, f := range r.pids {
		if pid := f(); pid > 0 {
			pids = append(pids, pid)
		}
	}
	netns := append([]string(nil), r.netns...)
	var dirs []string
	for d := range r.dirs {
		dirs = append(dirs, d)
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(200 * time.Millisecond) // let the kernel release sockets before the namespaces go
	for i := len(netns) - 1; i >= 0; i-- {
		_ = exec.Command("ip", "netns", "del", netns[i]).Run()
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

var signalOnce sync.Once

// HandleSignals makes SIGINT and SIGTERM tear down what the harness started
// (t.Cleanup does not run when the test binary is interrupted), then exit
// with status 130.
func HandleSignals() {
	signalOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			fmt.Fprintf(os.Stderr, "e2e: %v: killing the harness's processes and deleting its namespaces\n", sig)
			reg.teardown()
			os.Exit(130)
		}()
	})
}

// Proc is a child process the harness started, usually inside a host's
// network namespace through `ip netns exec`, which execs in place: the PID
// is the program's own, so signals go straight to it.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// StartProc starts argv (in netns unless it is "") with its output appended
// to logPath. env is added to the harness's environment.
func StartProc(name, netns, logPath string, env []string, argv ...string) (*Proc, error) {
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	fmt.Fprintf(out, "=== %s start %s: %q\n", time.Now().Format(time.RFC3339Nano), name, argv)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	// Own process group: a terminal's ^C reaches only the test binary,
	// whose signal handler kills this process by PID. Pdeathsig is the
	// last resort when the test binary dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	reg.mu.Lock()
	reg.procs[p] = true
	reg.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		reg.mu.Lock()
		delete(reg.procs, p)
		reg.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited (and been reaped).
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode is the exit status once exited (-1 if killed by a signal or
// still running).
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process unless it has exited.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s (pid %d) has exited: %v", p.Name, p.PID(), p.err)
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the exit (bounded).
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// Terminate sends SIGCONT and SIGTERM, waits up to timeout, then kills.
func (p *Proc) Terminate(timeout time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
	}
}
