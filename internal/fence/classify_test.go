package fence

import "testing"

// TestKeep: fencing kills client connections of every account but its
// own, and leaves the server's threads and replication alone.
func TestKeep(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Conn
		keep bool
	}{
		{"app client idle", Conn{1, "app", "Sleep"}, false},
		{"app client busy", Conn{2, "app", "Query"}, false},
		{"root", Conn{3, "root", "Sleep"}, false},
		{"unauthenticated", Conn{4, "unauthenticated user", "Connect"}, false},
		{"replication user as a client", Conn{5, "repl", "Query"}, false},
		{"mariadb replica io thread", Conn{6, "system user", "Slave_IO"}, true},
		{"mariadb replica sql thread", Conn{7, "system user", "Slave_SQL"}, true},
		{"mysql replica thread", Conn{8, "system user", "Connect"}, true},
		{"event scheduler", Conn{9, "event_scheduler", "Daemon"}, true},
		{"binlog dump to a replica", Conn{10, "repl", "Binlog Dump"}, true},
		{"binlog dump gtid", Conn{11, "repl", "Binlog Dump GTID"}, true},
		{"the probe", Conn{12, "shoal", "Sleep"}, true},
		{"daemon", Conn{13, "", "Daemon"}, true},
		{"no user, a client", Conn{14, "", "Query"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, why := Keep(tc.c, "shoal")
			if keep != tc.keep {
				t.Errorf("Keep(%+v) = %v (%q), want %v", tc.c, keep, why, tc.keep)
			}
			if keep && why == "" {
				t.Errorf("kept without a reason")
			}
		})
	}
	if keep, _ := Keep(Conn{1, "", "Sleep"}, ""); keep {
		t.Error("an empty fencing account keeps connections without a user")
	}
}
