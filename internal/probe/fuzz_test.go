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

// FuzzParsePosition feeds the GTID readers arbitrary server values: they
// never panic, and give a position or a note, never both nor neither.
func FuzzParsePosition(f *testing.F) {
	f.Add("0-1-5,1-2-7", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9,\n8a94f357-aab4-11df-86ab-c80aa9429562:1-3")
	f.Add("", "")
	f.Add("0-1-5,1-1-6,2-1-7", "uuid:tag:1-x")
	f.Fuzz(func(t *testing.T, maria, executed string) {
		if p, note := parseMariaDBPosition(maria); p.Known() == (note != "") {
			t.Fatalf("parseMariaDBPosition(%q) = %v, %q", maria, p, note)
		}
		uuid, _, _ := strings.Cut(executed, ":")
		for _, ro := range []bool{false, true} {
			repl := Replication{Known: true, Channels: 1, SourceUUID: uuid}
			if p, note := parseMySQLPosition("ON", executed, uuid, ro, repl); p.Known() == (note != "") {
				t.Fatalf("parseMySQLPosition(%q) = %v, %q", executed, p, note)
			}
		}
	})
}
