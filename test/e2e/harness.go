//go:build e2e

// Package e2e is shoal's end-to-end fault suite: real MariaDB servers, real
// shoal agents (the built binary) and a real HAProxy, each "host" a Linux
// network namespace on a bridge of its own, and faults injected the way
// machines fail (kill -9, SIGSTOP, cut links, packet loss, partitions,
// stopped replication, switchovers, saturated CPUs).
//
// The files harness*.go are the harness (reusable by benchmarks: build tag
// e2e); the scenarios are in *_test.go. Everything needs root; without it
// the tests skip, except under CI=true, where they fail.
//
//	go test -tags e2e -count=1 -v -timeout 20m ./test/e2e/
//	go test -tags e2e -count=1 -v -run 'TestE2E/replica_kill' ./test/e2e/
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/mariadbtest"
)

// Ports every host uses inside its own namespace.
const (
	GossipPort = 7946
	HTTPPort   = 8946
	MySQLPort  = 3306
	RWPort     = 3307 // HAProxy read-write listener on an app host (127.0.0.1)
	ROPort     = 3308 // HAProxy read-only listener
)

// tools are the programs the suite runs, with the Debian package that
// provides each.
var tools = []struct{ bin, pkg string }{
	{"ip", "iproute2"},
	{"iptables-legacy", "iptables"},
	{"haproxy", "haproxy"},
	{"stress-ng", "stress-ng"},
	{"go", "golang (to build shoal)"},
}

// Missing lists what the suite needs and this machine lacks.
func Missing() []string {
	var miss []string
	if os.Geteuid() != 0 {
		miss = append(miss, "root (network namespaces, iptables, setns)")
	}
	for _, tl := range tools {
		if tl.bin == "go" && os.Getenv("SHOAL_E2E_BIN") != "" {
			continue
		}
		if _, err := lookPath(tl.bin); err != nil {
			miss = append(miss, fmt.Sprintf("%s (apt-get install -y %s)", tl.bin, tl.pkg))
		}
	}
	if err := mariadbtest.Available(); err != nil {
		miss = append(miss, err.Error()+" (apt-get install -y mariadb-server mariadb-client)")
	}
	return miss
}

// lookPath also looks in the sbin directories, which are often not in a
// test's PATH.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/local/go/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// Require skips the test when the machine cannot run the suite, or fails it
// under CI=true, where the suite must run.
func Require(t testing.TB) {
	t.Helper()
	miss := Missing()
	if len(miss) == 0 {
		return
	}
	msg := "e2e suite needs: " + strings.Join(miss, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the fault suite must not be skipped)", msg)
	}
	t.Skip(msg)
}

// RepoRoot is the module root (the directory holding go.mod), found from
// the working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

var (
	buildOnce sync.Once
	binPath   string
	errBuild  error
)

// ShoalBin returns the shoal binary: $SHOAL_E2E_BIN if set, else one built
// once per test process from the module.
func ShoalBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("SHOAL_E2E_BIN"); p != "" {
			binPath = p
			return
		}
		root, err := RepoRoot()
		if err != nil {
			errBuild = err
			return
		}
		dir, err := os.MkdirTemp("", "shoal-e2e-bin-")
		if err != nil {
			errBuild = err
			return
		}
		binPath = filepath.Join(dir, "shoal")
		gobin, err := lookPath("go")
		if err != nil {
			errBuild = err
			return
		}
		cmd := exec.Command(gobin, "build", "-o", binPath, "./cmd/shoal")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			errBuild = fmt.Errorf("go build ./cmd/shoal: %v\n%s", err, out)
		}
	})
	if errBuild != nil {
		t.Fatalf("e2e: %v", errBuild)
	}
	return binPath
}

// RemoveBuiltBin deletes the binary ShoalBin built, if it built one.
func RemoveBuiltBin() {
	if binPath != "" && os.Getenv("SHOAL_E2E_BIN") == "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}

// Keygen runs `shoal keygen` and returns the key (its last line).
func Keygen(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(ShoalBin(t), "keygen").Output()
	if err != nil {
		t.Fatalf("e2e: shoal keygen: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
