// Package probe is the db agent's health check of its local MySQL or
// MariaDB server.
//
// # Connection
//
// The probe holds ONE connection (a database/sql pool capped at one
// connection, held as a *sql.Conn so database/sql never redials on its own)
// and reuses it for every check; it never connects per check. When the
// connection breaks, the first reconnect is immediate (a dropped connection
// may just be a KILL or wait_timeout); further attempts back off
// exponentially from Interval to ReconnectMax, so a dead server sees at most
// one connection attempt per ReconnectMax. Credentials come from Config,
// which package config fills from PasswordFromFile (mode 0600 or stricter),
// the environment variable SHOAL_MYSQL_PASSWORD or LoadOptionFile ([client]
// section), never from a command-line flag.
//
// # Checks
//
// Every Interval (default 250 ms) a check runs two statements:
//
//	SELECT @@global.server_id, @@global.read_only [, @@global.super_read_only] [, GTID] [, wsrep status]
//	SHOW ALL SLAVES STATUS   (MariaDB; MySQL >= 8.0.22: SHOW REPLICA STATUS; older: SHOW SLAVE STATUS)
//
// so at most 8 statements per second at the default interval. Version,
// flavor and which optional variables exist (super_read_only, wsrep_on) are
// read once per connection with one SHOW GLOBAL VARIABLES. The Galera status
// (wsrep_local_state, wsrep_cluster_status) is part of the SELECT only when
// wsrep_on is ON.
//
// The GTID columns read the server's GTID position at no extra round trip:
// @@gtid_current_pos on MariaDB >= 10.0.2 (per domain the sequence number,
// the server id dropped); @@gtid_mode, @@gtid_executed and @@server_uuid on
// MySQL >= 5.6.5, where a writable server's position is the highest
// transaction of its own UUID and a read-only replica's that of its
// source's UUID (Source_UUID), in a domain numbered by the UUID's CRC-32.
// The MySQL reading is tested on table inputs only, never against a real
// MySQL server. A server with more than tags.MaxDomains domains, none yet,
// or no GTID support publishes no position, and Facts.PositionNote says why.
//
// Each check is bounded by Timeout (default 500 ms) twice: by its context
// and by the driver's dial, read and write deadlines on the socket, so a
// hung server (SIGSTOP, stuck kernel) fails by timeout and an unanswered
// connect cannot block.
//
// # Dead-connection detection
//
// Between checks the probe does not sleep blindly: it parks in the runtime
// netpoller on the idle socket (deadline: the next check) and, when the
// socket becomes readable, peeks with MSG_PEEK|MSG_DONTWAIT. A server that
// crashes (kill -9, OOM kill) has its sockets closed by the kernel, so the
// peek sees EOF or ECONNRESET within microseconds, and the probe checks at
// once: the reconnect is refused, a hard failure, critical immediately.
// This costs no statements and no server thread, unlike the alternative of
// keeping the connection busy with a server-side DO SLEEP(interval) between
// checks (one more statement per check, a thread in "User sleep" in every
// processlist, and socket timeouts that must exceed the sleep). A hung
// server sends nothing and is caught by the timeout of the next check.
//
// Measured with MariaDB 10.11 on 2 shared cores, 20 kill -9 trials each
// (TestProbeKill9, TestMeasureDeadConnDetection): idle watch p50 9 ms, max
// 11 ms, which is the kernel tearing mariadbd down (the process is reaped at
// the same moment); DO SLEEP p50 8 ms, max 10 ms, but 3 statements per check
// (11/s); waiting for the next check p50 130 ms, max 249 ms.
//
// # Outcomes and states
//
// A check ends in one Outcome:
//
//   - pass: both statements answered within half the timeout.
//   - warn: answered, but degraded: slower than Timeout/2 (reason slow), or
//     the replication status statement failed with a server error, e.g. a
//     missing grant (reason repl_status; Facts.Replication.Known=false).
//   - fail: timeout, access denied, too many connections, a statement error,
//     a Galera node not Synced or not Primary (reason wsrep).
//   - hard fail: connection refused, socket missing, a fresh connection
//     dropped, server shutting down: the server is certainly gone.
//
// Replication being stopped or broken is not a health failure: the server
// itself is up. It is reported in Facts for the pool to decide (a replica
// with a stopped SQL thread is no reader, but still a healthy server).
//
// The state machine (see hysteresis) starts critical with reason
// "starting" and moves on consecutive outcomes:
//
//	any        --hard fail--------------------> critical   (at once)
//	any        --Fall failures-----------------> critical
//	critical   --Rise passes-------------------> passing
//	critical   --Rise answers, last a warn-----> warning
//	warning    --Rise passes-------------------> passing
//	passing    --Fall non-passes, < Fall fails-> warning
//
// With the defaults (Rise 2, Fall 2, Interval 250 ms, Timeout 500 ms): a
// crash is critical within milliseconds, a hung server within
// Interval + Timeout (0.75 s: a timeout counts one failure per interval it
// spans, so one 500 ms timeout meets Fall 2), and a recovered server is passing one
// Interval after its first good answer, which comes at the next connection
// attempt (at most ReconnectMax after it is back).
//
// # Host stalls
//
// A timeout is ambiguous on an overloaded host: a query that takes over the
// timeout because every process on the machine waited for CPU or I/O says
// nothing about the server that a SIGSTOP would. The probe reads the host's
// pressure stall information (Linux PSI, /proc/pressure/{cpu,io,memory},
// the "some" totals) at the start of each check and, after a timeout, again:
// if the host stalled on any resource for a quarter of the wait or more
// (Result.HostStall), the timeout counts one failure instead of one per
// interval, so Fall of them in a row are needed (a hung server on a stalled
// host: critical within Interval + Fall x Timeout, 1.25 s with the
// defaults). On an idle or moderately loaded host (a 2-core machine with
// two CPU hogs: a few percent) PSI stays far below a quarter and a hung
// server is still critical after one timeout. Without PSI every timeout
// weighs as before.
//
// # Notifications
//
// After every check the Notifier (if any) receives an Event with the new
// Status, whether the state changed and whether the facts changed (the
// agent republishes its gossip tags on either). Status is also available
// at any time from Probe.Status. Status.Last.Facts is only what the latest
// check read; Status.Known is the latest facts read, and Status.Health maps
// them, with the state, to the fact schema (tags.Facts) that the agent
// publishes and every view shows.
//
// # Grants
//
// The probe needs only the right to read replication status:
//
//	-- MariaDB >= 10.5.9
//	CREATE USER 'shoal'@'localhost' IDENTIFIED BY '...' WITH MAX_USER_CONNECTIONS 2;
//	GRANT SLAVE MONITOR ON *.* TO 'shoal'@'localhost';
//	-- MySQL 8 (and MariaDB < 10.5.9)
//	GRANT REPLICATION CLIENT ON *.* TO 'shoal'@'localhost';
//
// @@read_only, @@server_id, the GTID variables, SHOW VARIABLES and the
// wsrep status variables need no privilege. (For TCP, create the user for 127.0.0.1 as well, or
// instead.) MAX_USER_CONNECTIONS makes a connection leak impossible.
package probe
