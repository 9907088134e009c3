package probe

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func ns(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }

var null = sql.NullString{}

func TestParseReplication(t *testing.T) {
	mariaCols := []string{"Connection_name", "Slave_IO_State", "Slave_IO_Running", "Slave_SQL_Running",
		"Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error", "Seconds_Behind_Master"}
	mysqlCols := []string{"Replica_IO_State", "Replica_IO_Running", "Replica_SQL_Running",
		"Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error", "Seconds_Behind_Source", "Channel_Name"}
	tests := []struct {
		name string
		cols []string
		rows [][]sql.NullString
		want Replication
	}{
		{"primary", mariaCols, nil, Replication{Known: true}},
		{"healthy replica", mariaCols, [][]sql.NullString{
			{ns(""), ns("Waiting"), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("3")},
		}, Replication{Known: true, Channels: 1, IORunning: true, SQLRunning: true, LagKnown: true, LagSeconds: 3}},
		{"sql stopped", mariaCols, [][]sql.NullString{
			{ns(""), ns("Waiting"), ns("Yes"), ns("No"), ns("0"), ns(""), ns("0"), ns(""), null},
		}, Replication{Known: true, Channels: 1, IORunning: true}},
		{"io connecting", mariaCols, [][]sql.NullString{
			{ns(""), ns(""), ns("Connecting"), ns("Yes"), ns("2003"), ns("error connecting to master"), ns("0"), ns(""), null},
		}, Replication{Known: true, Channels: 1, SQLRunning: true, IOConnecting: true, LastIOErrno: 2003, LastIOError: "error connecting to master"}},
		{"multi-source worst of", mariaCols, [][]sql.NullString{
			{ns("a"), ns(""), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("10")},
			{ns("b"), ns(""), ns("Yes"), ns("No"), ns("0"), ns(""), ns("1062"), ns("Duplicate entry"), null},
		}, Replication{Known: true, Channels: 2, IORunning: true, LastSQLErrno: 1062, LastSQLError: "b: Duplicate entry"}},
		{"multi-source lags", mariaCols, [][]sql.NullString{
			{ns("a"), ns(""), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("10")},
			{ns("b"), ns(""), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("2")},
		}, Replication{Known: true, Channels: 2, IORunning: true, SQLRunning: true, LagKnown: true, LagSeconds: 10}},
		{"mysql names", mysqlCols, [][]sql.NullString{
			{ns("Waiting"), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("0"), ns("")},
		}, Replication{Known: true, Channels: 1, IORunning: true, SQLRunning: true, LagKnown: true}},
		{"source server_id", slices.Concat(mariaCols, []string{"Master_Server_Id"}), [][]sql.NullString{
			{ns(""), ns("Waiting"), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("3"), ns("4294967295")},
		}, Replication{Known: true, Channels: 1, IORunning: true, SQLRunning: true, LagKnown: true, LagSeconds: 3, SourceServerID: 1<<32 - 1}},
		{"source server_id, mysql names", slices.Concat(mysqlCols, []string{"Source_Server_Id"}), [][]sql.NullString{
			{ns("Waiting"), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("0"), ns(""), ns("12")},
		}, Replication{Known: true, Channels: 1, IORunning: true, SQLRunning: true, LagKnown: true, SourceServerID: 12}},
		{"source server_id of the first channel that knows it", slices.Concat(mariaCols, []string{"Master_Server_Id"}), [][]sql.NullString{
			{ns("a"), ns(""), ns("Connecting"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), null, ns("0")},
			{ns("b"), ns(""), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("1"), ns("7")},
			{ns("c"), ns(""), ns("Yes"), ns("Yes"), ns("0"), ns(""), ns("0"), ns(""), ns("1"), ns("8")},
		}, Replication{Known: true, Channels: 3, SQLRunning: true, IOConnecting: true, SourceServerID: 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseReplication(tc.cols, tc.rows); got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestServerInfo(t *testing.T) {
	tests := []struct {
		vars      map[string]string
		flavor    Flavor
		repl      string
		checkCols string
	}{
		{map[string]string{"version": "10.11.19-MariaDB-0+deb12u1-log", "version_comment": "Debian 12", "wsrep_on": "OFF"},
			FlavorMariaDB, "SHOW ALL SLAVES STATUS", "SELECT @@global.server_id, @@global.read_only, @@global.gtid_current_pos"},
		{map[string]string{"version": "10.6.16-MariaDB", "wsrep_on": "ON"},
			FlavorMariaDB, "SHOW ALL SLAVES STATUS",
			"SELECT @@global.server_id, @@global.read_only, @@global.gtid_current_pos, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_local_state'), (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_status')"},
		{map[string]string{"version": "8.0.36", "version_comment": "MySQL Community Server - GPL", "super_read_only": "OFF"},
			FlavorMySQL, "SHOW REPLICA STATUS", "SELECT @@global.server_id, @@global.read_only, @@global.super_read_only, @@global.gtid_mode, @@global.gtid_executed, @@global.server_uuid"},
		{map[string]string{"version": "8.0.21", "super_read_only": "OFF"}, FlavorMySQL, "SHOW SLAVE STATUS", ""},
		{map[string]string{"version": "5.7.44-log", "super_read_only": "ON"}, FlavorMySQL, "SHOW SLAVE STATUS", ""},
		{map[string]string{"version": "8.4.0"}, FlavorMySQL, "SHOW REPLICA STATUS", ""},
		{map[string]string{"version": "5.5.5-10.4.1", "version_comment": "mariadb.org binary distribution"}, FlavorMariaDB, "SHOW ALL SLAVES STATUS",
			"SELECT @@global.server_id, @@global.read_only, @@global.gtid_current_pos"},
		{map[string]string{"version": "5.5.68-MariaDB"}, FlavorMariaDB, "SHOW ALL SLAVES STATUS", "SELECT @@global.server_id, @@global.read_only"},
		{map[string]string{"version": "5.6.4"}, FlavorMySQL, "SHOW SLAVE STATUS", "SELECT @@global.server_id, @@global.read_only"},
	}
	for _, tc := range tests {
		si := parseServerInfo(tc.vars)
		if si.flavor != tc.flavor || si.replicationQuery() != tc.repl {
			t.Errorf("%v: flavor %s repl %q, want %s %q", tc.vars, si.flavor, si.replicationQuery(), tc.flavor, tc.repl)
		}
		if tc.checkCols != "" && si.checkQuery() != tc.checkCols {
			t.Errorf("%v: check query\n%s\nwant\n%s", tc.vars, si.checkQuery(), tc.checkCols)
		}
	}
	if a, b, c := parseVersion("10.11.19-MariaDB"); a != 10 || b != 11 || c != 19 {
		t.Errorf("parseVersion: %d.%d.%d", a, b, c)
	}
	if a, b, c := parseVersion("8"); a != 8 || b != 0 || c != 0 {
		t.Errorf("parseVersion: %d.%d.%d", a, b, c)
	}
}

func TestGaleraHealthy(t *testing.T) {
	for g, want := range map[Galera]bool{
		{}: true,
		{Enabled: true, LocalState: 4, ClusterStatus: "Primary"}:     true,
		{Enabled: true, LocalState: 2, ClusterStatus: "Primary"}:     false,
		{Enabled: true, LocalState: 4, ClusterStatus: "non-Primary"}: false,
	} {
		if g.Healthy() != want {
			t.Errorf("%+v.Healthy() = %v", g, !want)
		}
	}
}

func TestClassify(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	opErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: %w", errno)}
	}
	tests := []struct {
		name       string
		err        error
		ctx        context.Context
		connecting bool
		want       verdict
	}{
		{"refused", opErr(syscall.ECONNREFUSED), live, true, verdict{OutcomeHardFail, ReasonRefused, false}},
		{"socket missing", opErr(syscall.ENOENT), live, true, verdict{OutcomeHardFail, ReasonRefused, false}},
		{"ctx deadline", context.DeadlineExceeded, expired, false, verdict{OutcomeFail, ReasonTimeout, true}},
		{"invalid conn after deadline", mysql.ErrInvalidConn, expired, false, verdict{OutcomeFail, ReasonTimeout, true}},
		{"invalid conn", mysql.ErrInvalidConn, live, false, verdict{OutcomeFail, ReasonConnLost, true}},
		{"bad conn on connect", driver.ErrBadConn, live, true, verdict{OutcomeHardFail, ReasonConnLost, false}},
		{"eof", fmt.Errorf("x: %w", io.EOF), live, false, verdict{OutcomeFail, ReasonConnLost, true}},
		{"reset", opErr(syscall.ECONNRESET), live, false, verdict{OutcomeFail, ReasonConnLost, true}},
		{"access denied", &mysql.MySQLError{Number: 1045}, live, true, verdict{OutcomeFail, ReasonAuth, false}},
		{"too many", &mysql.MySQLError{Number: 1040}, live, true, verdict{OutcomeFail, ReasonTooMany, false}},
		{"shutdown", &mysql.MySQLError{Number: 1053}, live, false, verdict{OutcomeHardFail, ReasonShutdown, true}},
		{"killed", &mysql.MySQLError{Number: 1927}, live, false, verdict{OutcomeFail, ReasonConnLost, true}},
		{"query error", &mysql.MySQLError{Number: 1227}, live, false, verdict{OutcomeFail, ReasonQuery, false}},
		{"other", errors.New("boom"), live, false, verdict{OutcomeFail, ReasonQuery, false}},
	}
	for _, tc := range tests {
		if got := classify(tc.err, tc.ctx, tc.connecting); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestParseReceived: what a replica received moves with its heartbeats or
// its read position; a channel without heartbeats, or a flavor without
// the columns, is not judged (period 0).
func TestParseReceived(t *testing.T) {
	cols := []string{"Connection_name", "Master_Log_File", "Read_Master_Log_Pos", "Slave_received_heartbeats", "Slave_heartbeat_period"}
	row := func(name, file, pos, hb, period string) []sql.NullString {
		return []sql.NullString{ns(name), ns(file), ns(pos), ns(hb), ns(period)}
	}
	a := parseReceived(cols, [][]sql.NullString{row("", "bin.1", "100", "7", "1.000")})
	if a.period != time.Second || a.token == "" {
		t.Fatalf("one channel: %+v", a)
	}
	for name, r := range map[string][][]sql.NullString{
		"a heartbeat":     {row("", "bin.1", "100", "8", "1.000")},
		"an event":        {row("", "bin.1", "180", "7", "1.000")},
		"a new binlog":    {row("", "bin.2", "100", "7", "1.000")},
		"another channel": {row("", "bin.1", "100", "7", "1.000"), row("b", "x.1", "4", "0", "2.500")},
	} {
		if b := parseReceived(cols, r); b.token == a.token {
			t.Errorf("%s: the token did not move (%q)", name, b.token)
		}
	}
	if b := parseReceived(cols, [][]sql.NullString{row("", "bin.1", "100", "7", "1.000"), row("b", "x.1", "4", "0", "2.500")}); b.period != 2500*time.Millisecond {
		t.Errorf("two channels: period %s, want the longest, 2.5s", b.period)
	}
	if b := parseReceived(cols, [][]sql.NullString{row("", "bin.1", "100", "7", "0.000")}); b.period != 0 {
		t.Errorf("heartbeats off: period %s, want 0 (not judged)", b.period)
	}
	if b := parseReceived(cols[:3], [][]sql.NullString{{ns(""), ns("bin.1"), ns("100")}}); b.period != 0 {
		t.Errorf("no heartbeat columns (MySQL): period %s, want 0", b.period)
	}
}
