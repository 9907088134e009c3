package probe

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/tags"
)

// readServerInfo runs serverInfoQuery (once per connection).
func readServerInfo(ctx context.Context, c *sql.Conn) (serverInfo, error) {
	rows, err := c.QueryContext(ctx, serverInfoQuery)
	if err != nil {
		return serverInfo{}, fmt.Errorf("read server variables: %w", err)
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return serverInfo{}, fmt.Errorf("read server variables: %w", err)
		}
		vars[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return serverInfo{}, fmt.Errorf("read server variables: %w", err)
	}
	return parseServerInfo(vars), nil
}

// collectVariables runs the per-check SELECT into f.
func collectVariables(ctx context.Context, c *sql.Conn, si serverInfo, f *Facts) error {
	var (
		serverID, readOnly, superRO sql.NullInt64
		wsrepState, wsrepCluster    sql.NullString
	)
	dest := []any{&serverID, &readOnly}
	if si.hasSuperReadOnly {
		dest = append(dest, &superRO)
	}
	gtid := make([]sql.NullString, len(si.gtidColumns()))
	for i := range gtid {
		dest = append(dest, &gtid[i])
	}
	if si.wsrepOn {
		dest = append(dest, &wsrepState, &wsrepCluster)
	}
	if err := c.QueryRowContext(ctx, si.checkQuery()).Scan(dest...); err != nil {
		return fmt.Errorf("read variables: %w", err)
	}
	f.ServerID = uint32(serverID.Int64)
	f.ReadOnly = readOnly.Int64 != 0
	f.HasSuperReadOnly = si.hasSuperReadOnly
	f.SuperReadOnly = superRO.Int64 != 0
	f.gtid = [3]string{}
	for i, v := range gtid {
		f.gtid[i] = v.String
	}
	if si.wsrepOn {
		f.Galera.Enabled = true
		f.Galera.LocalState, _ = strconv.Atoi(wsrepState.String)
		f.Galera.ClusterStatus = wsrepCluster.String
	}
	return nil
}

// collectReplication runs the replication status statement.
func collectReplication(ctx context.Context, c *sql.Conn, si serverInfo) (Replication, received, error) {
	q := si.replicationQuery()
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return Replication{}, received{}, fmt.Errorf("%s: %w", strings.ToLower(q), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Replication{}, received{}, fmt.Errorf("%s: %w", strings.ToLower(q), err)
	}
	var table [][]sql.NullString
	for rows.Next() {
		row := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return Replication{}, received{}, fmt.Errorf("%s: %w", strings.ToLower(q), err)
		}
		table = append(table, row)
	}
	if err := rows.Err(); err != nil {
		return Replication{}, received{}, fmt.Errorf("%s: %w", strings.ToLower(q), err)
	}
	return parseReplication(cols, table), parseReceived(cols, table), nil
}

// received is what says that a replica's IO thread receives: a token of
// every channel's received heartbeats and read position, which moves
// whenever the source sends anything (an event, or a heartbeat when it
// has nothing to send), and the longest heartbeat period. MariaDB's
// SHOW ALL SLAVES STATUS has both; where the columns are missing (MySQL)
// the period is 0 and nothing is judged.
type received struct {
	token  string
	period time.Duration
}

// parseReceived reads received from replication status rows.
func parseReceived(cols []string, rows [][]sql.NullString) received {
	idx := map[string]int{}
	for i, c := range cols {
		idx[strings.ToLower(c)] = i
	}
	hb, okHB := idx["slave_received_heartbeats"]
	per, okPer := idx["slave_heartbeat_period"]
	if !okHB || !okPer || len(rows) == 0 {
		return received{}
	}
	var r received
	var b strings.Builder
	for _, row := range rows {
		for _, c := range []string{"connection_name", "master_log_file", "read_master_log_pos"} {
			if i, ok := idx[c]; ok {
				b.WriteString(row[i].String)
			}
			b.WriteByte('/')
		}
		b.WriteString(row[hb].String)
		b.WriteByte(';')
		s, err := strconv.ParseFloat(row[per].String, 64)
		if err != nil || s <= 0 {
			return received{} // a channel without heartbeats: silence proves nothing
		}
		r.period = max(r.period, time.Duration(s*float64(time.Second)))
	}
	r.token = b.String()
	return r
}

// parseReplication aggregates replication status rows, whatever the flavor's
// column names (Slave_* / Replica_*, *_Master / *_Source).
func parseReplication(cols []string, rows [][]sql.NullString) Replication {
	idx := map[string]int{}
	for i, c := range cols {
		idx[strings.ToLower(c)] = i
	}
	get := func(row []sql.NullString, names ...string) sql.NullString {
		for _, n := range names {
			if i, ok := idx[n]; ok {
				return row[i]
			}
		}
		return sql.NullString{}
	}
	r := Replication{Known: true, Channels: len(rows)}
	if len(rows) == 0 {
		return r
	}
	r.IORunning, r.SQLRunning, r.LagKnown = true, true, true
	for _, row := range rows {
		channel := get(row, "connection_name", "channel_name").String
		prefix := ""
		if channel != "" {
			prefix = channel + ": "
		}
		io := get(row, "slave_io_running", "replica_io_running").String
		r.IORunning = r.IORunning && strings.EqualFold(io, "Yes")
		r.IOConnecting = r.IOConnecting || strings.EqualFold(io, "Connecting")
		r.SQLRunning = r.SQLRunning && strings.EqualFold(get(row, "slave_sql_running", "replica_sql_running").String, "Yes")
		if r.SourceUUID == "" {
			r.SourceUUID = get(row, "source_uuid", "master_uuid").String
		}
		if r.SourceServerID == 0 {
			id, _ := strconv.ParseUint(get(row, "master_server_id", "source_server_id").String, 10, 32)
			r.SourceServerID = uint32(id)
		}

		lag := get(row, "seconds_behind_master", "seconds_behind_source")
		if n, err := strconv.ParseInt(lag.String, 10, 64); lag.Valid && err == nil {
			r.LagSeconds = max(r.LagSeconds, n)
		} else {
			r.LagKnown = false
		}
		if r.LastIOError == "" {
			if msg := get(row, "last_io_error").String; msg != "" {
				r.LastIOError = prefix + msg
				r.LastIOErrno, _ = strconv.Atoi(get(row, "last_io_errno").String)
			}
		}
		if r.LastSQLError == "" {
			if msg := get(row, "last_sql_error").String; msg != "" {
				r.LastSQLError = prefix + msg
				r.LastSQLErrno, _ = strconv.Atoi(get(row, "last_sql_errno").String)
			}
		}
	}
	if !r.LagKnown {
		r.LagSeconds = 0
	}
	return r
}

// readPosition sets f's GTID position, or the note saying why it is
// unknown, from the GTID columns collectVariables read and, on MySQL, the
// replication status.
func readPosition(si serverInfo, f *Facts) {
	switch {
	case !si.hasGTID():
		f.Position, f.PositionNote = tags.Position{}, "no GTID position (server "+shortValue(si.version)+" has no GTID support)"
	case si.flavor == FlavorMariaDB:
		f.Position, f.PositionNote = parseMariaDBPosition(f.gtid[0])
	default:
		f.Position, f.PositionNote = parseMySQLPosition(f.gtid[0], f.gtid[1], f.gtid[2], f.ReadOnly, f.Replication)
	}
	f.gtid = [3]string{}
}
