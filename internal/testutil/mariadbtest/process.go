package mariadbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
)

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// process is one mariadbd we started. It is only ever signalled by its own
// PID, and only until it has been reaped.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once Wait returned
	waitErr error         // valid after exited is closed
}

func startProcess(bin string, cfg serverConfig) (*process, error) {
	out, err := os.OpenFile(cfg.StdoutLog(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	// --defaults-file must be the first argument.
	cmd := exec.Command(bin, "--defaults-file="+cfg.Path())
	if cfg.netns != "" {
		// ip netns exec execs the command in place: the PID stays the
		// server's, so signals and Wait reach mariadbd itself.
		ip, err := launch.Lookup("ip")
		if err != nil {
			return nil, fmt.Errorf("run in netns %s: %w", cfg.netns, err)
		}
		cmd = exec.Command(ip, "netns", "exec", cfg.netns, bin, "--defaults-file="+cfg.Path())
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Setpgid keeps a terminal's ^C for the test binary (whose cleanups
	// kill the server). Pdeathsig kills the server if the test binary dies
	// without cleaning up; it fires when the OS thread that started the
	// process exits, which for Go means the process exiting (the runtime
	// only ends threads locked by LockOSThread), so it is best effort.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// signal sends sig unless the process has already exited.
func (p *process) signal(sig syscall.Signal) error {
	if p == nil {
		return errors.New("no process")
	}
	if p.done() {
		return fmt.Errorf("mariadbd (pid %d) has exited: %v", p.cmd.Process.Pid, p.waitErr)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, p.cmd.Process.Pid, err)
	}
	return nil
}

// kill sends SIGKILL and waits for the exit; a no-op if already exited.
func (p *process) kill(timeout time.Duration) error {
	if p == nil || p.done() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.done() {
		return fmt.Errorf("kill pid %d: %w", p.cmd.Process.Pid, err)
	}
	return p.wait(timeout)
}

// terminate asks for a clean shutdown (SIGCONT first, in case it is
// stopped), escalating to SIGKILL after timeout.
func (p *process) terminate(timeout time.Duration) error {
	if p.done() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.done() {
		return fmt.Errorf("terminate pid %d: %w", p.cmd.Process.Pid, err)
	}
	if err := p.wait(timeout); err == nil {
		return nil
	}
	return p.kill(10 * time.Second)
}

func (p *process) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("pid %d did not exit within %s", p.cmd.Process.Pid, timeout)
	}
}
