package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/shoaldb/shoal/internal/config"
)

// Two agents must not share a state file: each rewrites the snapshot (and
// the peers file beside it), the tags file (which holds the maintenance
// state) and the history file from its own memory, so the last writer wins
// and the other's state is lost or mixed. Start therefore takes an exclusive
// flock(2) on "<file>.lock" beside each of them, without waiting; a second
// agent naming one of the same files refuses to start (exit status 2).
//
// The lock belongs to the open file, not to the lock file's existence: the
// kernel releases it when the process exits for any reason, kill -9
// included, so a crashed agent never leaves a stale lock to clean up. The
// lock files themselves stay; they hold the PID of the last agent that took
// them, for the message.
//
// The lock is per file, not per directory: several agents of one host may
// keep their state files side by side under different names (shoal-demo
// does), and the API token file is shared on purpose (it is only read
// after its first creation).

// lockSuffix names a state file's lock file.
const lockSuffix = ".lock"

// stateFiles are the files that only one agent may write: the
// configuration key that names each, and its path ("" when not set).
func (a *Agent) stateFiles() [][2]string {
	return [][2]string{
		{"snapshot", a.cfg.Snapshot},
		{"tags_file", a.cfg.TagsFile},
		{"history.file", a.cfg.History.File},
	}
}

// startLock takes the lock of every state file; Shutdown releases them.
// A file whose lock another process holds is a configuration error naming
// the key, the file and the holder's PID when known.
func (a *Agent) startLock() error {
	for _, sf := range a.stateFiles() {
		key, path := sf[0], sf[1]
		if path == "" {
			continue
		}
		f, err := lockStateFile(path + lockSuffix)
		if err != nil {
			return config.Invalid(&config.FieldError{Key: key, Value: path, Msg: err.Error()})
		}
		if a.holdsLock(f) { // two keys name one file
			_ = f.Close()
			continue
		}
		a.life.locks = append(a.life.locks, f)
	}
	return nil
}

// holdsLock reports whether f is a lock file this agent holds already.
func (a *Agent) holdsLock(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	for _, h := range a.life.locks {
		if hi, err := h.Stat(); err == nil && os.SameFile(fi, hi) {
			return true
		}
	}
	return false
}

// releaseLocks closes the lock files, which releases their locks.
func (a *Agent) releaseLocks() {
	for _, f := range a.life.locks {
		_ = f.Close()
	}
	a.life.locks = nil
}

// lockStateFile opens (creating it) and locks the lock file at path, and
// writes this process's PID into it. The PID is best effort: a full disk
// must not stop an agent that holds the lock.
func lockStateFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open its lock file: %w", err)
	}
	if err := flock(f); err != nil {
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("cannot lock %s: %w", path, err)
		}
		return nil, fmt.Errorf("in use by another shoal agent (%s, lock file %s): two agents must not share a state file; give each agent its own", holder(path), path)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// flock takes an exclusive lock on f without waiting, retrying when a
// signal interrupts the call.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// holder says which process holds the lock file at path, from the PID the
// holder wrote into it.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "pid unknown"
	}
	s := strings.TrimSpace(string(b))
	if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
		return "pid " + strconv.Itoa(pid)
	}
	return "pid unknown"
}
