package launch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// templateVersion changes whenever the template's contents or config change
// in a way the cache key would not notice.
const templateVersion = "1"

var (
	templateOnce sync.Once
	templateDir  string
	errTemplate  error
)

// Template returns the path of an initialised datadir to copy (with
// CopyTree), building it on first use. It is kept in the user's cache
// directory, keyed by the mariadbd binary and the storage config, and shared
// by processes and runs: built in a temporary directory and renamed into
// place, so concurrent builders are safe.
func Template(bins Binaries) (string, error) {
	templateOnce.Do(func() {
		templateDir, errTemplate = buildTemplate(bins)
	})
	return templateDir, errTemplate
}

// templateKey identifies a template by the server binary and the config that
// shaped the files, so an upgraded mariadbd gets a fresh template.
func templateKey(bins Binaries) (string, error) {
	fi, err := os.Stat(bins.Mariadbd)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", bins.Mariadbd, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n%d\n%d\n", templateVersion, bins.Mariadbd, fi.Size(), fi.ModTime().UnixNano(), os.Geteuid())
	h.Write([]byte(strings.Join(storageConfig, "\n")))
	h.Write([]byte(strings.Join(speedConfig, "\n")))
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// cacheRoot is where templates are kept between runs (the name predates
// this package: tests, benchmarks and the demo share one cache).
func cacheRoot() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "shoal-mariadbtest")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("shoal-mariadbtest-%d", os.Geteuid()))
}

func buildTemplate(bins Binaries) (string, error) {
	key, err := templateKey(bins)
	if err != nil {
		return "", err
	}
	root := cacheRoot()
	final := filepath.Join(root, "datadir-"+key)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("create template cache %s: %w", root, err)
	}
	work, err := os.MkdirTemp(root, "build-")
	if err != nil {
		return "", fmt.Errorf("create template build dir: %w", err)
	}
	defer os.RemoveAll(work)

	cnf := filepath.Join(work, "my.cnf")
	if err := os.WriteFile(cnf, []byte(templateConfig(work)), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", cnf, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--defaults-file=" + cnf, "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.CommandContext(ctx, bins.InstallDB, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(work, "error.log"))
		return "", fmt.Errorf("%s: %w\n%s\n%s", bins.InstallDB, err, out.Bytes(), log)
	}
	// Rename is atomic: a concurrent builder either finds our result or
	// keeps its own; both are equivalent.
	if err := os.Rename(filepath.Join(work, "data"), final); err != nil {
		if fi, serr := os.Stat(final); serr == nil && fi.IsDir() {
			return final, nil
		}
		return "", fmt.Errorf("install template %s: %w", final, err)
	}
	return final, nil
}

// CopyTree copies the datadir src to dst, keeping files sparse: most of a
// fresh ibdata1 is zeros.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			return copySparse(path, target)
		default:
			return nil // sockets, pid files: not part of a datadir copy
		}
	})
}

func copySparse(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if !allZero(buf[:n]) {
				if _, err := out.WriteAt(buf[:n], off); err != nil {
					return err
				}
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return out.Truncate(off)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
