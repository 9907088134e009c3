// Package fence sets the local database server read-only and kills its
// client connections: what a db agent does to its own server when that
// server must not take writes (docs/consensus.md, "Fencing").
//
// Fencing runs on a connection of its own, opened for each attempt with the
// probe's account and closed after it. The steps, in order:
//
//  1. SET GLOBAL read_only=ON on MariaDB; on MySQL super_read_only=ON,
//     which sets read_only too. MariaDB has no super_read_only: accounts
//     with READ_ONLY ADMIN (or SUPER before 10.11) still write, and the
//     replication threads still apply.
//  2. Kill every client connection (KILL CONNECTION) but its own, the
//     server's own threads (replication, the event scheduler), replicas'
//     binlog dumps and the fencing account's own connections (the probe's:
//     that account writes no data). Seeing other accounts' connections
//     needs PROCESS, killing them CONNECTION ADMIN; a missing PROCESS is
//     an error, not a silent "nothing to kill".
//
// Keep (in classify.go) is pure and tested without a server.
package fence
