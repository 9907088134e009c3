package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/shoaldb/shoal/internal/mariadb/launch"
)

// MySQL accounts of the demo (passwords are generated into the state dir).
const (
	probeUser = "shoal" // the db agents' probe
	replUser  = "repl"
	appUser   = "demo" // the load client
	appDB     = "demo"
)

// DBConfig is node's mariadbd configuration. A replica's my.cnf says
// read_only=ON so that it stays read-only across a restart.
func (l *Layout) DBConfig(node string) launch.Config {
	return l.dbConfig(node, node != DBNodes[0])
}

func (l *Layout) dbConfig(node string, readOnly bool) launch.Config {
	return launch.Config{
		Dir:      l.Path(node),
		Port:     l.MySQLPort(node),
		ServerID: ServerID(node),
		ReadOnly: readOnly,
		// No tuning of replication timeouts (slave_net_timeout stays at
		// MariaDB's 60 s): the demo runs what users run.
	}
}

// startMariaDB starts node's mariadbd in the background (its datadir must
// exist) and waits until it answers.
func (l *Layout) startMariaDB(ctx context.Context, bins launch.Binaries, node string) error {
	cfg := l.DBConfig(node)
	if _, err := os.Stat(cfg.Path()); err != nil {
		if err := cfg.Write(); err != nil {
			return err
		}
	}
	// --defaults-file must be the first argument.
	if _, err := l.spawn("mariadb-"+node, []string{bins.Mariadbd, "--defaults-file=" + cfg.Path()}, nil, cfg.StdoutLog()); err != nil {
		return err
	}
	return l.waitMariaDB(ctx, node, 60*time.Second)
}

func (l *Layout) waitMariaDB(ctx context.Context, node string, timeout time.Duration) error {
	db := l.adminDB(node)
	defer db.Close()
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if l.running("mariadb-"+node) == 0 {
			return fmt.Errorf("mariadbd of %s exited during start-up; its log %s ends:\n%s", node, l.DBConfig(node).ErrorLog(), tail(l.DBConfig(node).ErrorLog(), 15))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("mariadbd of %s not ready after %s: %w", node, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminDB is a root connection pool over node's unix socket.
func (l *Layout) adminDB(node string) *sql.DB {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "unix"
	c.Addr = l.DBConfig(node).Socket()
	c.Timeout = 2 * time.Second
	c.ReadTimeout = 10 * time.Second
	c.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		panic(fmt.Sprintf("demo: connector: %v", err)) // static config: cannot happen
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	return db
}

// execAll runs statements as root on node, in order, on one connection.
func (l *Layout) execAll(ctx context.Context, node string, stmts ...string) error {
	db := l.adminDB(node)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: connect: %w", node, err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", node, redact(q), err)
		}
	}
	return nil
}

// redact hides passwords in a statement shown in an error.
func redact(q string) string {
	for _, k := range []string{"IDENTIFIED BY '", "MASTER_PASSWORD='"} {
		if i := strings.Index(q, k); i >= 0 {
			j := strings.IndexByte(q[i+len(k):], '\'')
			if j >= 0 {
				q = q[:i+len(k)] + "***" + q[i+len(k)+j:]
			}
		}
	}
	return q
}

// setUpPrimary creates the demo's schema and accounts on the first primary.
// They are binlogged, so the replicas (which start from an empty GTID
// history) get them too, and any server can become the primary.
func (l *Layout) setUpPrimary(ctx context.Context, node, probePW, replPW, appPW string) error {
	stmts := []string{
		"CREATE DATABASE " + appDB,
		"CREATE TABLE " + appDB + ".ops (id BIGINT AUTO_INCREMENT PRIMARY KEY, server_id INT NOT NULL, port INT NOT NULL, at DATETIME(6) NOT NULL)",
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		stmts = append(stmts,
			fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", probeUser, host, probePW),
			fmt.Sprintf("GRANT SLAVE MONITOR ON *.* TO '%s'@'%s'", probeUser, host),
			// Fencing (consensus is on in the demo): set read_only, see
			// and kill client connections (docs/consensus.md, "Fencing");
			// shoal switchover: re-point and reset replication.
			fmt.Sprintf("GRANT READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS, REPLICATION SLAVE ADMIN, RELOAD ON *.* TO '%s'@'%s'", probeUser, host))
	}
	stmts = append(stmts,
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", replUser, replPW),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'127.0.0.1'", replUser),
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", appUser, appPW),
		fmt.Sprintf("GRANT SELECT, INSERT ON %s.* TO '%s'@'127.0.0.1'", appDB, appUser),
	)
	return l.execAll(ctx, node, stmts...)
}

// replicate makes node a GTID replica of primary. pos is slave_pos for a
// replica that has always been one, current_pos for a former primary (its
// own binlogged transactions count).
func (l *Layout) replicate(ctx context.Context, node, primary, pos, replPW string) error {
	return l.execAll(ctx, node,
		"SET GLOBAL read_only=ON",
		"STOP SLAVE",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
			"MASTER_USE_GTID=%s, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1", l.MySQLPort(primary), replUser, replPW, pos),
		"START SLAVE")
}

// waitReplicating waits until both of node's replication threads run.
func (l *Layout) waitReplicating(ctx context.Context, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		st, err := l.slaveStatus(ctx, node)
		if err == nil {
			if st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
				return nil
			}
			last = fmt.Sprintf("IO=%s SQL=%s io_error=%q sql_error=%q", st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_IO_Error"], st["Last_SQL_Error"])
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not replicating after %s: %s", node, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slaveStatus is SHOW SLAVE STATUS by column (NULL as "").
func (l *Layout) slaveStatus(ctx context.Context, node string) (map[string]string, error) {
	db := l.adminDB(node)
	defer db.Close()
	return launch.FirstRow(ctx, db, "SHOW SLAVE STATUS")
}

// queryString runs a one-value query as root on node.
func (l *Layout) queryString(ctx context.Context, node, q string) (string, error) {
	db := l.adminDB(node)
	defer db.Close()
	var v sql.NullString
	if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "", fmt.Errorf("%s: %s: %w", node, q, err)
	}
	return v.String, nil
}

// Switchover makes to the primary instead of from, with GTID: from goes
// read-only, to catches up with it and is promoted, and every other server
// (from included) replicates from to. Each server's my.cnf follows, so a
// restart keeps its role. promoted is when to became writable.
func (l *Layout) Switchover(ctx context.Context, from, to string) (promoted time.Time, err error) {
	replPW, err := l.readSecret("repl.password")
	if err != nil {
		return time.Time{}, err
	}
	if err := l.execAll(ctx, from, "SET GLOBAL read_only=ON"); err != nil {
		return time.Time{}, err
	}
	pos, err := l.queryString(ctx, from, "SELECT @@gtid_binlog_pos")
	if err != nil {
		return time.Time{}, err
	}
	// MASTER_GTID_WAIT follows gtid_slave_pos only, which misses what a
	// former primary wrote itself: compare gtid_current_pos instead.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := l.queryString(ctx, to, "SELECT @@gtid_current_pos")
		if err != nil {
			return time.Time{}, err
		}
		if gtidCovers(cur, pos) {
			break
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s did not catch up with %s within 10 s: at %q, want %q", to, from, cur, pos)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.execAll(ctx, to, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only=OFF"); err != nil {
		return time.Time{}, err
	}
	promoted = time.Now()
	var errs []error
	for _, n := range DBNodes {
		if n == to {
			continue
		}
		p := "slave_pos"
		if n == from {
			p = "current_pos"
		}
		if err := l.replicate(ctx, n, to, p, replPW); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range DBNodes {
		if err := l.dbConfig(n, n != to).Write(); err != nil {
			errs = append(errs, err)
		}
	}
	return promoted, errors.Join(errs...)
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StartDB starts node's mariadbd again after a crash or a kill (its
// datadir, config and port stay); it refuses if it still runs.
func (l *Layout) StartDB(ctx context.Context, node string) error {
	if nodeIndex(node) > len(DBNodes) {
		return fmt.Errorf("%q is not a db node (want one of %v)", node, DBNodes)
	}
	if pid := l.running("mariadb-" + node); pid != 0 {
		return fmt.Errorf("the mariadbd of %s still runs (pid %d)", node, pid)
	}
	bins, err := launch.FindBinaries()
	if err != nil {
		return err
	}
	return l.startMariaDB(ctx, bins, node)
}

// gtidCovers reports whether GTID position have includes want: for each
// replication domain of want, have's sequence number is at least as high.
func gtidCovers(have, want string) bool {
	seqs := func(pos string) map[string]uint64 {
		out := map[string]uint64{}
		for _, g := range strings.Split(pos, ",") {
			f := strings.Split(strings.TrimSpace(g), "-")
			if len(f) != 3 {
				continue
			}
			n, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				continue
			}
			out[f[0]] = n
		}
		return out
	}
	h := seqs(have)
	for d, n := range seqs(want) {
		if h[d] < n {
			return false
		}
	}
	return true
}
