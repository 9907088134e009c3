# shellcheck shell=bash
# Sourced by the mariadb image's entrypoint on the first start (empty data
# directory), while a temporary server listens on its socket only.
#
# On every database host: the shoal probe user (README.md, "Database hosts")
# and a replication user, each created locally and kept out of the binary
# log, so that replicas replaying the primary's log from the start (GTID
# slave_pos) do not create them twice. With REPLICATE_FROM set: GTID
# replication from that host. Fresh clusters only: an existing primary's
# data must be copied first (mariadb-backup), which this demo does not do.
#
# Environment: SHOAL_MYSQL_PASSWORD, REPL_PASSWORD; REPLICATE_FROM (replicas).

shoal_sql_quote() { printf '%s' "$1" | sed -e "s/\\\\/\\\\\\\\/g" -e "s/'/''/g"; }

shoal_probe_pw=$(shoal_sql_quote "${SHOAL_MYSQL_PASSWORD:?set SHOAL_MYSQL_PASSWORD}")
shoal_repl_pw=$(shoal_sql_quote "${REPL_PASSWORD:?set REPL_PASSWORD}")

docker_process_sql <<SQL
SET SESSION sql_log_bin = 0;
CREATE USER 'shoal'@'127.0.0.1' IDENTIFIED BY '${shoal_probe_pw}' WITH MAX_USER_CONNECTIONS 2;
GRANT SLAVE MONITOR ON *.* TO 'shoal'@'127.0.0.1';
-- Fencing, with writer terms (docs/consensus.md):
GRANT READ_ONLY ADMIN, CONNECTION ADMIN, PROCESS ON *.* TO 'shoal'@'127.0.0.1';
-- and shoal switchover (re-point, RESET REPLICA ALL): GRANT REPLICATION SLAVE ADMIN, RELOAD ON *.* TO 'shoal'@'127.0.0.1';
CREATE USER 'repl'@'%' IDENTIFIED BY '${shoal_repl_pw}';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';
SQL

if [ -n "${REPLICATE_FROM:-}" ]; then
	docker_process_sql <<SQL
CHANGE MASTER TO
  MASTER_HOST = '$(shoal_sql_quote "$REPLICATE_FROM")',
  MASTER_USER = 'repl',
  MASTER_PASSWORD = '${shoal_repl_pw}',
  MASTER_USE_GTID = slave_pos,
  MASTER_CONNECT_RETRY = 5;
START SLAVE;
SQL
fi
