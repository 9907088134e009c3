package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A mysql.timeout the probe would refuse is refused when the configuration
// is loaded, as a usage error (exit 2) naming the file, the line, the key
// and its flag: not later, at start, as the probe's own error.
func TestMySQLTimeoutRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	yaml := "node: db1\nmysql:\n  addr: 127.0.0.1:3306\n  timeout: 20s\n  user: shoal\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Execute(t.Context(), []string{"agent", "--config-check", path, "--insecure-no-encryption",
		"--api-token-file", filepath.Join(dir, "token")}, &out, &errb)
	want := "config file " + path + ", line 4: mysql.timeout (--mysql-timeout) \"20s\": must be from 10ms to 10s"
	if code != ExitUsage || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errb.String(), ExitUsage, want)
	}
}
