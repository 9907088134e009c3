package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// leftoverWait is how long the output pipes may stay open after the
	// handler's main process exited before its process group is killed.
	leftoverWait = time.Second
	// drainTimeout bounds how long output is still read after that kill:
	// only a process that escaped it (cleared its environment and left the
	// group and the run's process tree) can hold the pipes on.
	drainTimeout = 2 * time.Second
)

var errTimedOut = errors.New("hook timed out")

// execParams is one run of a command.
type execParams struct {
	argv  []string
	env   []string
	dir   string
	stdin []byte

	timeout     time.Duration // whole run; then SIGTERM to the group
	grace       time.Duration // SIGTERM to SIGKILL
	outputLimit int           // stdout+stderr, tail kept
	stdoutLimit int           // stdout alone, head kept (query responses); 0: not kept

	tree *hookTree // the process-wide record of hook processes
}

// runResult is what a run did.
type runResult struct {
	start    time.Time
	duration time.Duration
	// exitCode is the exit status; -1 when the process was killed by a
	// signal or did not start.
	exitCode int
	// err is nil for exit status 0.
	err      error
	timedOut bool // killed because the timeout expired
	canceled bool // killed because ctx was canceled (runner closed, caller gave up)
	// killedLeftovers: background processes still held stdout or stderr
	// after the handler exited, and its process group was killed.
	killedLeftovers bool

	output      []byte // tail of stdout+stderr
	outputTotal int64
	stdout      []byte // head of stdout
	stdoutTotal int64
}

// execute runs p.argv directly (no shell) in its own process group, feeds
// it p.stdin, and waits for it. When the timeout expires or ctx is done the
// whole group and every other process of the run (see hookTree: also those
// that left the group with setsid or were orphaned by a double fork) get
// SIGTERM and, p.grace later (or as soon as the main process is gone),
// SIGKILL. A background child that still holds stdout or stderr
// leftoverWait after the main process exited is killed with every process
// of the run, so it cannot hang the run; one that detached its output keeps
// running, as with Serf.
func execute(ctx context.Context, p execParams) (res runResult) {
	res = runResult{start: time.Now(), exitCode: -1}
	defer func() { res.duration = time.Since(res.start) }()

	ctx, cancel := context.WithTimeoutCause(ctx, p.timeout, errTimedOut)
	defer cancel()

	out := &tailBuffer{limit: p.outputLimit}
	var stdoutW io.Writer = out
	var head *headBuffer
	if p.stdoutLimit > 0 {
		head = &headBuffer{limit: p.stdoutLimit}
		stdoutW = io.MultiWriter(out, head)
	}
	defer func() {
		res.output, res.outputTotal = out.bytes()
		if head != nil {
			res.stdout, res.stdoutTotal = head.bytes()
		}
	}()

	if err := ctx.Err(); err != nil {
		res.err = fmt.Errorf("not started: %w", context.Cause(ctx))
		res.timedOut = errors.Is(context.Cause(ctx), errTimedOut)
		res.canceled = !res.timedOut
		return res
	}

	// One pipe for both streams keeps their order in the log; a query's
	// stdout (its response) needs a pipe of its own.
	pipes, err := newPipes(head != nil)
	if err != nil {
		res.err = err
		return res
	}
	defer pipes.closeAll()

	cmd, run, err := p.tree.start(p, pipes)
	if err != nil {
		res.err = fmt.Errorf("start: %w", err)
		return res
	}
	pid := cmd.Process.Pid
	pipes.closeChildEnds()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = pipes.inW.Write(p.stdin) // EPIPE when the handler does not read stdin: fine
		_ = pipes.inW.Close()
	}()
	go func() {
		defer wg.Done()
		_, _ = copyAll(stdoutW, pipes.outR)
	}()
	if pipes.errR != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = copyAll(out, pipes.errR)
		}()
	}

	// The killer: SIGTERM the group when ctx ends, SIGKILL after grace.
	exited := make(chan struct{})
	killerDone := make(chan struct{})
	var signaled atomic.Bool
	go func() {
		defer close(killerDone)
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		signaled.Store(true)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		p.tree.signal(run, syscall.SIGTERM, nil)
		t := time.NewTimer(p.grace)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			p.tree.kill(run)
		}
	}()

	werr := cmd.Wait()
	close(exited)
	p.tree.exited(run)
	<-killerDone
	if signaled.Load() {
		// Timed out or canceled: no process of the run survives.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		p.tree.kill(run)
	}
	// Nobody reads stdin any more once the handler has exited.
	_ = pipes.inW.Close()

	// Background children that detached from the output (Serf's "forking
	// event handlers") may keep running. One that still holds stdout or
	// stderr after leftoverWait is killed with every process of the run,
	// so that it can neither hang this run nor write into a dead pipe.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(leftoverWait):
		res.killedLeftovers = true
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		p.tree.kill(run)
		select {
		case <-drained:
		case <-time.After(drainTimeout):
			pipes.closeAll() // a process outside the group holds them: stop reading
			<-drained
		}
	}

	res.exitCode = cmd.ProcessState.ExitCode()
	if signaled.Load() {
		cause := context.Cause(ctx)
		res.timedOut = errors.Is(cause, errTimedOut)
		res.canceled = !res.timedOut
		if res.timedOut {
			res.err = fmt.Errorf("timed out after %v (%v)", p.timeout, werr)
		} else {
			res.err = fmt.Errorf("canceled: %v (%v)", cause, werr)
		}
		return res
	}
	res.err = werr
	return res
}

// shellPath runs a script that has no "#!" line, as execvp does.
const shellPath = "/bin/sh"

// start starts p.argv directly. When the kernel refuses the file as not
// executable (ENOEXEC: a script without a "#!" line, which stock Serf runs
// through sh -c), it does what execvp does and runs "/bin/sh FILE ARGS...":
// the file is read by the shell as a script, its arguments are passed as
// positional parameters and are never parsed by the shell.
func start(p execParams, pipes *pipes) (*exec.Cmd, error) {
	cmd := newCmd(p.argv[0], p.argv[1:], p, pipes)
	err := cmd.Start()
	if err == nil || !errors.Is(err, syscall.ENOEXEC) {
		return cmd, err
	}
	// cmd.Path is argv[0] as resolved through PATH. A leading "-" would
	// make it an option of sh.
	script := cmd.Path
	if strings.HasPrefix(script, "-") {
		script = "./" + script
	}
	cmd = newCmd(shellPath, append([]string{script}, p.argv[1:]...), p, pipes)
	if err2 := cmd.Start(); err2 != nil {
		return nil, fmt.Errorf("%w; running it with %s: %w", err, shellPath, err2)
	}
	return cmd, nil
}

func newCmd(name string, args []string, p execParams, pipes *pipes) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = p.env
	if cmd.Env == nil {
		cmd.Env = []string{} // never the agent's whole environment
	}
	cmd.Dir = p.dir
	cmd.Stdin = pipes.inR
	cmd.Stdout = pipes.outW
	cmd.Stderr = pipes.outW
	if pipes.errW != nil {
		cmd.Stderr = pipes.errW
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// copyAll is io.Copy that keeps reading after the writer fails, so that the
// child never blocks on a full pipe.
func copyAll(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 32*1024)
	var n int64
	var werr error
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(k)
			if werr == nil {
				_, werr = w.Write(buf[:k])
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return n, err
		}
	}
}

// pipes are a run's stdin, stdout and stderr. The parent reads and writes
// its ends itself, so that cmd.Wait returns as soon as the process exits,
// even when a child still holds the pipes.
type pipes struct {
	inR, inW, outR, outW *os.File
	errR, errW           *os.File // nil: stderr shares stdout's pipe
}

func newPipes(separateStderr bool) (*pipes, error) {
	var p pipes
	var err error
	if p.inR, p.inW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if separateStderr {
		if p.errR, p.errW, err = os.Pipe(); err != nil {
			p.closeAll()
			return nil, fmt.Errorf("stderr pipe: %w", err)
		}
	}
	return &p, nil
}

// closeChildEnds closes the parent's copies of the child's ends.
func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.inR, p.outW, p.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// closeAll closes every end (again); os.File tolerates that.
func (p *pipes) closeAll() {
	for _, f := range []*os.File{p.inR, p.inW, p.outR, p.outW, p.errR, p.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	total int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	n := len(p)
	if n >= t.limit {
		t.buf = append(t.buf[:0], p[n-t.limit:]...)
		return n, nil
	}
	if over := len(t.buf) + n - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) bytes() ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...), t.total
}

// headBuffer keeps the first limit bytes written to it.
type headBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	total int64
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total += int64(len(p))
	if room := h.limit - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) bytes() ([]byte, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.buf...), h.total
}
