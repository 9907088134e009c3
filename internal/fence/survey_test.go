package fence

import (
	"strings"
	"testing"
)

// TestParseThreads reads SHOW SLAVE STATUS rows without a server: a
// missing column or a malformed position is an error naming it.
func TestParseThreads(t *testing.T) {
	row := func(edit func(map[string]string)) map[string]string {
		st := map[string]string{"Master_Host": "10.0.0.1", "Gtid_IO_Pos": "0-1-5", "Slave_SQL_Running": "Yes", "Last_SQL_Errno": "0", "Last_SQL_Error": ""}
		if edit != nil {
			edit(st)
		}
		return st
	}
	for _, tc := range []struct {
		name     string
		st       map[string]string
		ioPos    string
		running  bool
		sqlError string
		err      string
	}{
		{name: "running", st: row(nil), ioPos: "0-1-5", running: true},
		{name: "nothing received", st: row(func(st map[string]string) { st["Gtid_IO_Pos"] = "" }), running: true},
		{name: "newlines", st: row(func(st map[string]string) { st["Gtid_IO_Pos"] = "0-1-5,\n1-2-9" }), ioPos: "0-1-5,1-2-9", running: true},
		{name: "stopped", st: row(func(st map[string]string) { st["Slave_SQL_Running"] = "No" }), ioPos: "0-1-5"},
		{name: "stopped on an error", st: row(func(st map[string]string) {
			st["Slave_SQL_Running"], st["Last_SQL_Errno"], st["Last_SQL_Error"] = "No", "1062", "Duplicate entry '3' for key 'PRIMARY'"
		}), ioPos: "0-1-5", sqlError: "1062: Duplicate entry '3' for key 'PRIMARY'"},
		{name: "errno empty", st: row(func(st map[string]string) { st["Last_SQL_Errno"] = "" }), ioPos: "0-1-5", running: true},
		{name: "malformed position", st: row(func(st map[string]string) { st["Gtid_IO_Pos"] = "0-1-5'; --" }), err: "Gtid_IO_Pos"},
		{name: "no Gtid_IO_Pos", st: row(func(st map[string]string) { delete(st, "Gtid_IO_Pos") }), err: "no column Gtid_IO_Pos"},
		{name: "no Slave_SQL_Running", st: row(func(st map[string]string) { delete(st, "Slave_SQL_Running") }), err: "no column Slave_SQL_Running"},
		{name: "no Last_SQL_Errno", st: row(func(st map[string]string) { delete(st, "Last_SQL_Errno") }), err: "no column Last_SQL_Errno"},
		{name: "no Last_SQL_Error", st: row(func(st map[string]string) { delete(st, "Last_SQL_Error") }), err: "no column Last_SQL_Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ioPos, running, sqlError, err := parseThreads(tc.st)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "SHOW SLAVE STATUS: ") {
					t.Fatalf("error %v, want one naming SHOW SLAVE STATUS and %q", err, tc.err)
				}
				return
			}
			if err != nil || ioPos != tc.ioPos || running != tc.running || sqlError != tc.sqlError {
				t.Fatalf("got %q %v %q %v, want %q %v %q", ioPos, running, sqlError, err, tc.ioPos, tc.running, tc.sqlError)
			}
		})
	}
}
