package consensus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDataDirBelongsToOneNode: the raft store's lock is waited for a
// bounded time, then refused naming the holder from the owner file; a
// directory whose owner file names another node is refused, held or not;
// its own node opens it again; a directory from before owner files is
// adopted. Before, a second open of a held store waited for ever.
func TestDataDirBelongsToOneNode(t *testing.T) {
	const wait = 200 * time.Millisecond
	dir := t.TempDir()
	open := func(id string) (func(), error) {
		t.Helper()
		done := make(chan struct{})
		var closeStore func()
		var err error
		go func() {
			defer close(done)
			s, e := openStore(dir, id, wait)
			err = e
			if s != nil {
				closeStore = func() { _ = s.Close() }
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("opening the store of %s as %s still waits after 10s", dir, id)
		}
		return closeStore, err
	}
	wantErr := func(err error, msg string) {
		t.Helper()
		var de *DataDirError
		if !errors.As(err, &de) || de.Dir != dir || !strings.Contains(de.Msg, msg) {
			t.Fatalf("error %v, want a *DataDirError on %s with %q", err, dir, msg)
		}
	}

	// A directory from before owner files: adopted.
	closeA, err := open("db1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ownerFileName))
	if err != nil || string(b) != fmt.Sprintf(`{"node":"db1","pid":%d}`+"\n", os.Getpid()) {
		t.Fatalf("owner file %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dir, ownerFileName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("owner file mode: %v, %v", st, err)
	}
	// Held: another node, and the same node name twice.
	held := fmt.Sprintf("in use by node db1 (pid %d): give each agent its own consensus.data_dir", os.Getpid())
	_, err = open("db2")
	wantErr(err, held)
	wantErr(CheckDataDirOwner(dir, "db2"), held)
	_, err = open("db1")
	wantErr(err, held)
	if err := CheckDataDirOwner(dir, "db1"); err != nil {
		t.Fatalf("--config-check beside its own running agent: %v", err)
	}
	// Not held: still db1's.
	closeA()
	notHeld := fmt.Sprintf("holds the raft data of node db1 (last opened by pid %d), and a data directory belongs to one raft server ID", os.Getpid())
	_, err = open("db2")
	wantErr(err, notHeld)
	wantErr(CheckDataDirOwner(dir, "db2"), notHeld)
	closeA, err = open("db1")
	if err != nil {
		t.Fatalf("its own node: %v", err)
	}
	// A holder that wrote no owner file (an older release).
	if err := os.Remove(filepath.Join(dir, ownerFileName)); err != nil {
		t.Fatal(err)
	}
	_, err = open("db2")
	wantErr(err, "in use by another process: give each agent its own consensus.data_dir")
	closeA()
	// An owner file that names no node is refused, not overwritten.
	if err := os.WriteFile(filepath.Join(dir, ownerFileName), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = open("db1")
	wantErr(err, "names no node: remove it only if this directory holds this node's raft data")
}
