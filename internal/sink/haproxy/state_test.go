package haproxy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The fixtures were captured from HAProxy 2.6.12 by testdata/capture.sh.
func TestParseServersStateFixtures(t *testing.T) {
	srv := func(be string, id int, name, addr string, port int, op OpState, admin AdminFlags, w, iw int) Server {
		return Server{Backend: be, Name: name, ID: id, Addr: addr, Port: port, Op: op, Admin: admin, Weight: w, IWeight: iw}
	}
	fqdn := func(s Server, f string) Server { s.FQDN = f; return s }
	tests := []struct {
		file string
		want []Server
	}{
		{"state-initial.txt", []Server{
			srv("db_rw", 1, "db1", "127.0.0.1", 21001, OpRunning, 0, 1, 1),
			srv("db_rw", 2, "db2", "127.0.0.1", 21002, OpRunning, 0, 1, 1),
			srv("db_rw", 3, "db3", "127.0.0.1", 21003, OpRunning, 0, 1, 1),
			srv("db_ro", 1, "db1", "127.0.0.1", 21001, OpRunning, 0, 50, 50),
			// "disabled" in the config: forced and config maintenance.
			srv("db_ro", 2, "db2", "127.0.0.1", 21002, OpStopped, AdminForcedMaint|AdminConfigMaint, 1, 1),
			// "check" against a closed port: down, but administratively ready.
			srv("db_ro", 3, "db3", "127.0.0.1", 21003, OpStopped, 0, 1, 1),
			fqdn(srv("db_x", 1, "db4", "127.0.0.1", 21004, OpRunning, 0, 1, 1), "localhost"),
			srv("db_x", 2, "db5", "::1", 21005, OpRunning, 0, 1, 1),
			srv("db_x", 3, "db6", "127.0.0.1", 21006, OpRunning, 0, 0, 0),
		}},
		{"state-changed.txt", []Server{
			srv("db_rw", 1, "db1", "127.0.0.1", 21001, OpStopped, AdminForcedMaint, 1, 1),
			srv("db_rw", 2, "db2", "127.0.0.1", 21002, OpRunning, AdminForcedDrain, 1, 1),
			srv("db_rw", 3, "db3", "127.0.0.1", 21003, OpRunning, 0, 1, 1),
			srv("db_ro", 1, "db1", "127.0.0.1", 21001, OpRunning, 0, 10, 50),
			// "disabled", then set ready: the config flag stays.
			srv("db_ro", 2, "db2", "127.0.0.1", 21002, OpRunning, AdminConfigMaint, 1, 1),
			srv("db_ro", 3, "db3", "127.0.0.1", 21003, OpStopped, 0, 1, 1),
			fqdn(srv("db_x", 1, "db4", "127.0.0.1", 21004, OpRunning, 0, 1, 1), "localhost"),
			srv("db_x", 2, "db5", "::1", 21005, OpRunning, 0, 1, 1),
			srv("db_x", 3, "db6", "127.0.0.1", 21006, OpRunning, 0, 0, 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseServersState(readFixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestServerStates(t *testing.T) {
	tests := []struct {
		admin             AdminFlags
		forced, effective State
	}{
		{0, StateReady, StateReady},
		{AdminConfigMaint, StateReady, StateReady},
		{AdminForcedMaint | AdminConfigMaint, StateMaint, StateMaint},
		{AdminForcedDrain, StateDrain, StateDrain},
		{AdminForcedMaint | AdminForcedDrain, StateMaint, StateMaint},
		{AdminInheritMaint, StateReady, StateMaint},
		{AdminInheritDrain, StateReady, StateDrain},
		{AdminResolverMaint | AdminForcedDrain, StateDrain, StateMaint},
	}
	for _, tt := range tests {
		s := Server{Admin: tt.admin}
		if got := s.Forced(); got != tt.forced {
			t.Errorf("admin %#x: Forced = %s, want %s", tt.admin, got, tt.forced)
		}
		if got := s.Effective(); got != tt.effective {
			t.Errorf("admin %#x: Effective = %s, want %s", tt.admin, got, tt.effective)
		}
	}
}

func TestParseServersStateErrors(t *testing.T) {
	header := "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n"
	tests := []struct {
		name, in, want string
	}{
		{"no backend", readFixture(t, "state-no-backend.txt"), `not a servers state dump: "Can't find backend."`},
		{"permission", "Permission denied\n\n", `not a servers state dump: "Permission denied"`},
		{"empty", "", `not a servers state dump: ""`},
		{"other version", "2\n# be_name\n", `not a servers state dump: "2"`},
		{"no header", "1\n", "servers state dump has no header line"},
		{"missing column", "1\n# be_id be_name srv_id\n\n", "servers state header has no column srv_name"},
		{"short row", header + "2 db_rw 1 db1 127.0.0.1 2 0 1 1\n", "servers state line 3: 9 fields, header has 25"},
		{"bad number", header + "2 db_rw 1 db1 127.0.0.1 2 x 1 1 1 1 0 2 0 0 0 0 - 21001 - 0 0 - - 0\n",
			`servers state line 3: srv_admin_state "x": not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseServersState(tt.in)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestParseServersStateNoServers(t *testing.T) {
	in := strings.SplitAfterN(readFixture(t, "state-initial.txt"), "\n", 3)
	got, err := ParseServersState(in[0] + in[1] + "\n")
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want no servers", got, err)
	}
}
