// Package fsutil holds the file helpers that several packages share: the
// atomic, fsync'd replacement of a file (WriteFileAtomic), the cleanup of
// what a killed writer left (RemoveStaleTemps), and the reading of files
// that hold a secret (ReadPrivateFile, Owner).
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteFileAtomic replaces path with data: temp file in the same directory,
// fsync, rename, fsync of the directory. Readers see the old content or the
// new, never a mix, and a crash never leaves a truncated file. When it
// fails, path keeps its old content and the temp file is removed.
//
// The new file has exactly mode (the umask does not apply) and belongs to
// the calling process's user: the old file's mode and owner are not kept.
// Concurrent writers of one path each replace it whole; the last rename
// wins.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return replaceFile(path, mode, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// replaceFile is WriteFileAtomic with the content written by write.
func replaceFile(path string, mode os.FileMode, write func(*os.File) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// tempBase returns the base of the file that name is a WriteFileAtomic
// temporary for: "." + base + ".tmp" + CreateTemp's random digits.
func tempBase(name string) (base string, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return "", false
	}
	i := strings.LastIndex(name, ".tmp")
	if i <= 1 || i+len(".tmp") == len(name) {
		return "", false
	}
	for _, c := range name[i+len(".tmp"):] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return name[1:i], true
}

// RemoveStaleTemps removes from dir the temporary files WriteFileAtomic
// leaves behind when the process is killed between creating one and
// renaming it into place: ".<base>.tmp<digits>" for every base that match
// accepts, when last modified at least minAge ago. It returns the paths it
// removed. A dir that does not exist holds nothing to remove.
func RemoveStaleTemps(dir string, match func(base string) bool, minAge time.Duration) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clean temporary files in %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	now := time.Now()
	for _, e := range entries {
		base, ok := tempBase(e.Name())
		if !ok || !e.Type().IsRegular() || !match(base) {
			continue
		}
		if fi, err := e.Info(); err != nil || now.Sub(fi.ModTime()) < minAge {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
