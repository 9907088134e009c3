// Package mariadbtest starts real, throw-away mariadbd instances for tests
// and benchmarks.
//
// Each [Server] runs in its own directory under the system temp dir with its
// own my.cnf (passed as the first argument, --defaults-file, so /etc/mysql
// never leaks in), datadir, unix socket and a free 127.0.0.1 TCP port. The
// configuration is tuned for start-up speed and a small footprint: a 16 MiB
// buffer pool, performance_schema off, no doublewrite, and binary logging with
// GTID strict mode so that [Server.ReplicateFrom] can build GTID replication.
// Every instance gets a server_id unique within the test process.
//
// Initialising a datadir with mariadb-install-db costs about a second, so it
// is done once per mariadbd binary: the result is kept as a template in the
// user's cache directory (shared by test processes and runs; built in a
// temporary directory and renamed into place, so concurrent builders are
// safe) and each instance gets a sparse copy of it. The template is built
// without binary logging, so every copy starts with an empty GTID history.
// MariaDB keeps no per-server identity on disk (there is no auto.cnf or
// server_uuid as in MySQL; @@server_uid is computed at start-up), so copies
// of one template are independent servers.
//
// Processes are started with Pdeathsig=SIGKILL and killed by PID in a
// t.Cleanup: a crashed or interrupted test does not leave servers behind.
//
// With [Options.Netns], [Options.BindAddress], [Options.Host] and
// [Options.Port] a server runs inside a named network namespace as one
// "host" of a simulated network (test/e2e): e.g. bound to 0.0.0.0:3306 in
// its namespace, reached by replicas at its namespace address, while admin
// statements still go through the unix socket.
//
// Tests call [Require] first: it skips when mariadbd is not installed, except
// under CI (CI=true), where a missing server is a failure.
package mariadbtest
