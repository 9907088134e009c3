package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxSecretFile bounds what ReadPrivateFile reads.
const MaxSecretFile = 64 << 10

// ReadPrivateFile opens path, refuses it when group or other have any
// access, and reads it. The mode is checked on the opened file, so a rename
// between check and read cannot swap it. It is for files that hold a
// secret: passwords, option files, keyrings, API tokens.
func ReadPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %s)", path, fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o: it holds a secret and must not be accessible by group or other (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxSecretFile {
		return nil, errors.New(path + ": larger than 64 KiB")
	}
	return b, nil
}

// Owner is the uid owning the file fi describes; ok is false when the
// system does not say.
func Owner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
