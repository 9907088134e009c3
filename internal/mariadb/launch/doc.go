// Package launch holds what it takes to run a throw-away mariadbd of one's
// own: finding the binaries, a template datadir built once with
// mariadb-install-db and copied (sparse) per instance, and the instance's
// my.cnf (passed as the first argument, --defaults-file, so /etc/mysql
// never leaks in).
//
// The my.cnf is tuned for start-up speed and a small footprint (16 MiB
// buffer pool, performance_schema off, no doublewrite) and has binary
// logging with GTID strict mode, so that instances can replicate from each
// other with MASTER_USE_GTID. As root it sets user=root: mariadbd refuses to
// run as root otherwise.
//
// The template is built without binary logging, so every copy starts with an
// empty GTID history. MariaDB keeps no per-server identity on disk (no
// auto.cnf or server_uuid as in MySQL), so copies of one template are
// independent servers.
//
// Starting and stopping processes is the caller's business: the tests'
// internal/testutil/mariadbtest ties a server to a test's lifetime, the demo
// (internal/demo) runs long-lived ones in the background.
package launch
