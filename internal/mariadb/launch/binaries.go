package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Binaries are the paths of the programs a server needs.
type Binaries struct {
	Mariadbd  string
	InstallDB string
}

var (
	findOnce sync.Once
	found    Binaries
	errFind  error
)

// searchDirs are looked at after $PATH: sbin is often not in a user's PATH.
var searchDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"}

// Lookup finds an executable in $PATH, then in the usual sbin and bin
// directories.
func Lookup(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range searchDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in $PATH or %v", name, searchDirs)
}

// FindBinaries looks mariadbd and mariadb-install-db up (once per process).
// The error names every program that is missing.
func FindBinaries() (Binaries, error) {
	findOnce.Do(func() {
		var errs []error
		var err error
		if found.Mariadbd, err = Lookup("mariadbd"); err != nil {
			errs = append(errs, err)
		}
		if found.InstallDB, err = Lookup("mariadb-install-db"); err != nil {
			errs = append(errs, err)
		}
		errFind = errors.Join(errs...)
	})
	return found, errFind
}
