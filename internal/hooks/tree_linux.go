package hooks

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunEnv marks every process a hook run starts: each run gets its own
// value and children inherit it, so that the agent still finds a run's
// processes after they left its process group and session (setsid) and
// their parent exited (a double fork).
const RunEnv = "SHOAL_HOOK_RUN"

const (
	// maxAdopted bounds the hook processes the agent waits to reap.
	maxAdopted = 4096
	// reapInterval is how often the agent looks for reparented orphans
	// while a hook runs or an orphan is known.
	reapInterval = time.Second
	// killRounds bounds the sweeps of a run's processes; a sweep repeats
	// while it finds processes the previous ones had not (forks racing the
	// kill).
	killRounds = 50
)

// hookTree is the process-wide record of the processes hooks start.
//
// The first New makes the agent a child subreaper (PR_SET_CHILD_SUBREAPER,
// process-wide): an orphan of a hook's process tree is reparented to the
// agent instead of init, so it cannot leave the agent's tree, and the
// agent must reap it. It reaps only processes that carry a hook's RunEnv
// and are not a running hook's main process (which its exec.Cmd.Wait
// reaps), and it waits on each through a pidfd, so it never takes an exit
// status another part of the process waits for.
type hookTree struct {
	self   int
	prefix string // RunEnv=<agent pid>.
	seq    atomic.Uint64
	log    *slog.Logger

	// mu is held around a hook's start and every look at the agent's
	// children: a hook's main process is in mains before any look sees it.
	mu      sync.Mutex
	mains   map[int]bool
	adopted map[int]int // pid → pidfd of a hook process to reap
	dropped uint64
	wake    chan struct{}
}

var (
	treeOnce sync.Once
	tree     *hookTree
)

// processTree returns the process-wide hookTree, making the agent a child
// subreaper and starting the reaper on first use. The reaper lives as long
// as the process: orphans may outlive every Runner.
func processTree(log *slog.Logger) *hookTree {
	treeOnce.Do(func() {
		t := &hookTree{
			self:    os.Getpid(),
			log:     log,
			mains:   map[int]bool{},
			adopted: map[int]int{},
			wake:    make(chan struct{}, 1),
		}
		t.prefix = fmt.Sprintf("%s=%d.", RunEnv, t.self)
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			log.Warn("hooks: cannot become a child subreaper; orphans of hooks go to init and may outlive their hook's timeout", "error", err)
		}
		go t.reapLoop()
		tree = t
	})
	return tree
}

// hookRun identifies one run's processes.
type hookRun struct {
	pid   int    // main process
	start uint64 // its start time, so that a reused pid is never taken for it
	env   string // RunEnv=value
}

// start starts p (see start) with a new RunEnv and registers its main
// process.
func (t *hookTree) start(p execParams, pipes *pipes) (*exec.Cmd, hookRun, error) {
	run := hookRun{env: t.prefix + strconv.FormatUint(t.seq.Add(1), 10)}
	p.env = append(append([]string(nil), p.env...), run.env)
	t.mu.Lock()
	defer t.mu.Unlock()
	cmd, err := start(p, pipes)
	if err != nil {
		return nil, run, err
	}
	run.pid = cmd.Process.Pid
	if st, err := readStat(run.pid); err == nil {
		run.start = st.start
	}
	t.mains[run.pid] = true
	return cmd, run, nil
}

// exited unregisters a main process once its Wait has returned.
func (t *hookTree) exited(run hookRun) {
	t.mu.Lock()
	delete(t.mains, run.pid)
	t.mu.Unlock()
	t.poke()
}

func (t *hookTree) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// signal sends sig to every process of run once: the main process's
// descendants (while it is the process started) and every process that
// carries run.env, with their descendants. skip holds processes already
// signaled, by pid and start time; it returns how many it signaled anew.
func (t *hookTree) signal(run hookRun, sig unix.Signal, skip map[int]uint64) int {
	tab := readProcs()
	var roots []int
	if st, ok := tab[run.pid]; ok && st.start == run.start {
		roots = append(roots, run.pid)
	}
	for pid, st := range tab {
		if !st.zombie && hasEnv(pid, run.env, true) {
			roots = append(roots, pid)
		}
	}
	n := 0
	for pid := range subtree(tab, roots) {
		st := tab[pid]
		if pid == t.self || st.zombie || (skip != nil && skip[pid] == st.start) {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if now, err := readStat(pid); err != nil || now.start != st.start {
			_ = unix.Close(fd) // the pid was reused since the scan
			continue
		}
		if unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
			if skip != nil {
				skip[pid] = st.start
			}
		}
		if pid == run.pid {
			_ = unix.Close(fd) // its exec.Cmd.Wait reaps it
		} else {
			t.adopt(pid, fd)
		}
	}
	t.poke()
	return n
}

// kill SIGKILLs every process of run, sweeping again while sweeps find
// processes the previous ones did not.
func (t *hookTree) kill(run hookRun) {
	seen := map[int]uint64{}
	for i := 0; i < killRounds; i++ {
		if t.signal(run, unix.SIGKILL, seen) == 0 && i > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (t *hookTree) adopt(pid, fd int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.adoptLocked(pid, fd)
}

func (t *hookTree) adoptLocked(pid, fd int) {
	if old, ok := t.adopted[pid]; ok {
		_ = unix.Close(old)
	} else if len(t.adopted) >= maxAdopted {
		_ = unix.Close(fd)
		t.dropped++
		if t.dropped == 1 || t.dropped%1000 == 0 {
			t.log.Warn("hooks: too many orphaned hook processes to track; some may stay zombies", "limit", maxAdopted, "untracked", t.dropped)
		}
		return
	}
	t.adopted[pid] = fd
}

// reapLoop reaps on SIGCHLD, when poked, and every reapInterval while a
// hook runs or an orphan is known (orphans are reparented silently).
func (t *hookTree) reapLoop() {
	defer func() {
		if p := recover(); p != nil {
			t.log.Error("hooks: reaper panicked; orphans of hooks are no longer reaped", "panic", fmt.Sprint(p))
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		select {
		case <-sig:
		case <-t.wake:
		case <-tick.C:
			t.mu.Lock()
			idle := len(t.mains) == 0 && len(t.adopted) == 0
			t.mu.Unlock()
			if idle {
				continue
			}
		}
		t.reap()
	}
}

// reap adopts the agent's children that carry a RunEnv of this agent and
// are no hook's main process, and reaps those of its adopted processes
// that exited.
func (t *hookTree) reap() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pid := range t.children() {
		if _, ok := t.adopted[pid]; ok || t.mains[pid] {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if !hasEnv(pid, t.prefix, false) {
			_ = unix.Close(fd)
			continue
		}
		t.adoptLocked(pid, fd)
	}
	for pid, fd := range t.adopted {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
		switch {
		case err == nil && info.Signo == 0:
			continue // running
		case errors.Is(err, unix.ECHILD) && unix.PidfdSendSignal(fd, 0, nil, 0) == nil:
			continue // not (yet) the agent's child: its parent lives
		}
		// Reaped, or gone (its parent reaped it).
		_ = unix.Close(fd)
		delete(t.adopted, pid)
	}
}

// children lists the agent's child processes.
func (t *hookTree) children() []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var out []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				out = append(out, pid)
			}
		}
	}
	if len(tasks) > 0 {
		return out
	}
	for pid, st := range readProcs() { // no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)
		if st.ppid == t.self {
			out = append(out, pid)
		}
	}
	return out
}

// procStat is what a process's /proc/PID/stat tells the tree.
type procStat struct {
	ppid   int
	start  uint64 // clock ticks after boot
	zombie bool
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat reads state, ppid and starttime; the command name, in
// parentheses, may hold spaces and parentheses itself.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("stat: %d fields after the name", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("stat: ppid %q", f[1])
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat: starttime %q", f[19])
	}
	return procStat{ppid: ppid, start: start, zombie: f[0] == "Z" || f[0] == "X"}, nil
}

// readProcs reads every process's stat.
func readProcs() map[int]procStat {
	ents, _ := os.ReadDir("/proc")
	out := make(map[int]procStat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out
}

// subtree returns roots and all their descendants in tab.
func subtree(tab map[int]procStat, roots []int) map[int]bool {
	kids := map[int][]int{}
	for pid, st := range tab {
		kids[st.ppid] = append(kids[st.ppid], pid)
	}
	out := map[int]bool{}
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if out[pid] {
			continue
		}
		out[pid] = true
		roots = append(roots, kids[pid]...)
	}
	return out
}

// hasEnv reports whether pid's environment (as it was at its exec) holds
// kv (exact) or a variable starting with kv; a process of another user is
// unreadable, a zombie's is empty.
func hasEnv(pid int, kv string, exact bool) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, v := range bytes.Split(b, []byte{0}) {
		if string(v) == kv || (!exact && bytes.HasPrefix(v, []byte(kv))) {
			return true
		}
	}
	return false
}
