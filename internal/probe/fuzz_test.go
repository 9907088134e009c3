package probe

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseOptionFile feeds ParseOptionFile arbitrary option files: it must
// never panic, every error names the file (and, for syntax, the line), and
// what it accepts is within the documented bounds.
func FuzzParseOptionFile(f *testing.F) {
	f.Add([]byte("[client]\nuser=shoal\npassword=\"s3 cr#t\"\nport = 3307\n"))
	f.Add([]byte("\uFEFF[mysqld]\nport=1\n[CLIENT]\nloose-socket='/run/my sql.sock' # c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseOptionFile(bytes.NewReader(data), "my.cnf")
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "option file my.cnf line ") && !strings.HasPrefix(msg, "read option file my.cnf: ") {
				t.Fatalf("error does not name the file and line: %q", msg)
			}
			return
		}
		if o.Port != 0 && (o.Port < 1 || o.Port > 65535) {
			t.Fatalf("port %d accepted", o.Port)
		}
		if o.Password != "" && !o.PasswordSet {
			t.Fatalf("password set without PasswordSet: %+v", o)
		}
	})
}
