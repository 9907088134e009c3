package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

func TestPasswordFromFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string { return testkit.WriteFile(t, dir, name, body, mode) }
	tests := []struct {
		name, body string
		mode       os.FileMode
		want       string
		wantErr    []string
	}{
		{"plain", "s3cret", 0o600, "s3cret", nil},
		{"trailing newline", "s3cret\n", 0o400, "s3cret", nil},
		{"crlf", "s3cret\r\n", 0o600, "s3cret", nil},
		{"spaces kept", " a b \n", 0o600, " a b ", nil},
		{"group readable", "x", 0o640, "", []string{"mode 0640", "group or other", "chmod 600"}},
		{"world readable", "x", 0o604, "", []string{"mode 0604"}},
		{"group writable", "x", 0o620, "", []string{"mode 0620"}},
		{"empty", "", 0o600, "", []string{"is empty"}},
		{"two lines", "a\nb\n", 0o600, "", []string{"more than one line"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tc.name, " ", "_"), tc.body, tc.mode)
			got, err := PasswordFromFile(p)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s (mode %o)", p, tc.mode)
			}
			for _, w := range append(tc.wantErr, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := PasswordFromFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := PasswordFromFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}
