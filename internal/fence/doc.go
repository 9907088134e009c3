// Package fence is the MySQL actuator: what a db agent does to its own
// database server, MariaDB or MySQL. It fences the server when it must not
// take writes, and unfences it (docs/consensus.md, "Fencing"); it takes
// the steps of a planned switchover on it: demote, catch up, promote,
// repoint (docs/consensus.md, "Switchover"; switch.go); and it surveys a
// failover candidate, a MariaDB replica stopped from receiving and drained
// of what it received (docs/consensus.md, "Failover"; survey.go).
//
// An Actuator (New) acts on one server with the probe's account. It keeps
// one small pool (two connections at most, one kept idle, each closed after
// a minute) and the server's flavor, read once and read again only after
// the pool dialled a new connection (actuator.go). Each action runs on one
// connection of the pool, bounded by the Config's Timeout. The
// package-level functions (Fence, Demote, ...) build an Actuator for one
// action and close it.
//
// Fencing takes these steps, in order:
//
//  1. SET GLOBAL read_only=ON on MariaDB; on MySQL super_read_only=ON,
//     which sets read_only too. MariaDB has no super_read_only: accounts
//     with READ_ONLY ADMIN (or SUPER before 10.11) still write, and the
//     replication threads still apply.
//  2. Kill every client connection (KILL CONNECTION) but its own, the
//     server's own threads (replication, the event scheduler), replicas'
//     binlog dumps and the connections of the actuator's account (its own
//     pool's and the probe's: that account writes no data). Seeing other
//     accounts' connections needs PROCESS, killing them CONNECTION ADMIN;
//     a missing PROCESS is an error, not a silent "nothing to kill".
//
// Keep (in classify.go) is pure and tested without a server.
package fence
