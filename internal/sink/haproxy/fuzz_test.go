package haproxy

import (
	"strings"
	"testing"
)

// FuzzParseServersState feeds ParseServersState what an HAProxy runtime
// socket (or whatever answers on it) may send: it must never panic, and a
// dump it accepts holds only rows with every field present.
func FuzzParseServersState(f *testing.F) {
	f.Add("1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord\n3 db_rw 1 db1 127.0.0.1 2 0 1 1 4 6 3 4 6 0 0 0 - 21001 -\n")
	f.Add("Permission denied.\n")
	f.Fuzz(func(t *testing.T, out string) {
		servers, err := ParseServersState(out)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if n := strings.Count(out, "\n") + 1; len(servers) > n {
			t.Fatalf("%d servers from %d lines", len(servers), n)
		}
		for _, s := range servers {
			for _, v := range []string{s.Backend, s.Name, s.Addr} {
				if v == "" || strings.ContainsAny(v, " \t\n") {
					t.Fatalf("server field %q from %q", v, out)
				}
			}
			_ = s.Forced()
			_ = s.Effective()
			_ = s.Op.String()
		}
	})
}
