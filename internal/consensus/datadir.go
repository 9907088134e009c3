package consensus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/shoaldb/shoal/internal/fsutil"
)

// A raft data directory belongs to one voter: its log and stable store
// hold one raft server ID's votes and terms. Two agents of one host whose
// consensus keyring files sit in one directory get the same default data
// directory (DataDirName next to the keyring file), and the second used
// to wait for ever on the raft store's file lock. Open therefore waits
// for the lock at most storeLockTimeout, and keeps an owner file in the
// directory, naming the node whose raft data it holds and the process that
// opened it last, so that the refusal names the holder; a directory whose
// owner file names another node is refused even when no one holds it.

// ownerFileName is the owner file, storeFileName the raft store (log and
// stable store), in the data directory.
const (
	ownerFileName = "shoal-owner.json"
	storeFileName = "raft.db"
)

// storeLockTimeout is how long Open waits for the raft store's file lock:
// the agent holding it keeps it while it runs, so a longer wait only
// delays the refusal. A restarting agent's predecessor has exited by then.
const storeLockTimeout = 2 * time.Second

// DataDirError is a data directory this node cannot use: another process
// holds it, or it holds another node's raft data. The agent reports it as
// a configuration error (exit status 2); Msg says what to do.
type DataDirError struct {
	Dir string
	Msg string
}

func (e *DataDirError) Error() string { return "consensus data directory " + e.Dir + ": " + e.Msg }

// dataDirHint ends every DataDirError's message.
const dataDirHint = "give each agent its own consensus.data_dir"

// dirOwner is the owner file's content.
type dirOwner struct {
	Node string `json:"node"`
	PID  int    `json:"pid"`
}

// readOwner reads dir's owner file; ok is false when there is none (a
// directory made before owner files, or a new one).
func readOwner(dir string) (o dirOwner, ok bool, err error) {
	path := filepath.Join(dir, ownerFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return dirOwner{}, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &o)
	}
	if err == nil && o.Node == "" {
		err = errors.New("names no node")
	}
	if err != nil {
		return dirOwner{}, false, &DataDirError{Dir: dir, Msg: fmt.Sprintf("owner file %s: %v: remove it only if this directory holds this node's raft data", path, err)}
	}
	return o, true, nil
}

// CheckDataDirOwner refuses a data directory whose owner file names
// another node than id (a *DataDirError), saying whether that node's agent
// holds it now. A directory without one, or that does not exist, passes.
// It changes nothing: --config-check runs it, also beside a running agent
// of node id.
func CheckDataDirOwner(dir, id string) error {
	return checkOwner(dir, id, func() bool { return storeHeld(dir) })
}

// checkOwner is CheckDataDirOwner, told whether another process holds the
// store (Open, which holds it itself, knows that no other does).
func checkOwner(dir, id string, held func() bool) error {
	o, ok, err := readOwner(dir)
	if err != nil || !ok || o.Node == id {
		return err
	}
	if held() {
		return &DataDirError{Dir: dir, Msg: fmt.Sprintf("in use by node %s (pid %d): %s", o.Node, o.PID, dataDirHint)}
	}
	return &DataDirError{Dir: dir, Msg: fmt.Sprintf("holds the raft data of node %s (last opened by pid %d), and a data directory belongs to one raft server ID: %s",
		o.Node, o.PID, dataDirHint)}
}

// storeHeld reports whether a process has dir's raft store open: bolt
// holds an exclusive flock(2) on it while open for writing.
func storeHeld(dir string) bool {
	f, err := os.Open(filepath.Join(dir, storeFileName))
	if err != nil {
		return false
	}
	defer f.Close() // releases the probe's own lock
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return errors.Is(err, syscall.EWOULDBLOCK)
		}
	}
}

// openStore opens the raft store of node id in dir, and then marks dir as
// id's (the owner file, written atomically). A store another process holds
// is a *DataDirError naming the holder, after waiting lockTimeout.
func openStore(dir, id string, lockTimeout time.Duration) (*raftboltdb.BoltStore, error) {
	path := filepath.Join(dir, storeFileName)
	opts := *bbolt.DefaultOptions
	opts.Timeout = lockTimeout
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &opts})
	if errors.Is(err, berrors.ErrTimeout) {
		holder := "another process"
		if o, ok, _ := readOwner(dir); ok {
			holder = fmt.Sprintf("node %s (pid %d)", o.Node, o.PID)
		}
		return nil, &DataDirError{Dir: dir, Msg: fmt.Sprintf("in use by %s: %s", holder, dataDirHint)}
	}
	if err != nil {
		return nil, fmt.Errorf("consensus store %s: %w", path, err)
	}
	// Holding the store's lock, this process is the only one here.
	err = checkOwner(dir, id, func() bool { return false })
	if err == nil {
		err = writeOwner(dir, id)
	}
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return store, nil
}

// writeOwner marks dir as node id's, opened by this process.
func writeOwner(dir, id string) error {
	b, err := json.Marshal(dirOwner{Node: id, PID: os.Getpid()})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, ownerFileName), append(b, '\n'), 0o600)
}
