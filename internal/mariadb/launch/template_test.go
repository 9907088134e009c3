package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := make([]byte, 300<<10)
	copy(data[100<<10:], "hello")
	data[len(data)-1] = 7
	if err := os.WriteFile(src, data, 0o640); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatal("copy differs from source")
	}
	fi, _ := os.Stat(dst)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
}

func TestRender(t *testing.T) {
	c := Config{Dir: "/d", Port: 3310, ServerID: 7, ReadOnly: true, Extra: []string{"slave_net_timeout=4"}}
	got := c.Render()
	for _, want := range []string{"[mariadbd]\n", "datadir=/d/data\n", "socket=/d/mysqld.sock\n", "port=3310\n",
		"bind-address=127.0.0.1\n", "server-id=7\n", "read_only=ON\n", "gtid_strict_mode=ON\n", "slave_net_timeout=4\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("my.cnf lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(Config{Dir: "/d"}.Render(), "read_only") {
		t.Error("a writable server's my.cnf sets read_only")
	}
}
