#!/usr/bin/env bash
# proxysql.sh: a shoal event hook that sets ProxySQL backend servers ONLINE
# or OFFLINE_SOFT when the routing pool changes.
#
# For one cluster of the pool it sends, through the admin interface, one
#   UPDATE mysql_servers SET status='ONLINE'|'OFFLINE_SOFT'
#     WHERE hostgroup_id=N AND hostname='H' AND port=P;
# per node and hostgroup (writer hostgroup: ONLINE only for the writer;
# reader hostgroup: ONLINE only for readers), then LOAD MYSQL SERVERS TO
# RUNTIME (and SAVE MYSQL SERVERS TO DISK with PROXYSQL_SAVE=1). Every node
# of the cluster is set, not only the changed ones. The servers must already
# be rows of mysql_servers with shoal's host and port (an IPv6 address
# without brackets); the UPDATEs change no other row. Do not also let
# mysql_replication_hostgroups or mysql_galera_hostgroups manage these
# hostgroups: ProxySQL would move servers back.
#
# Events: pool-change (any other event is ignored, exit 0).
#   shoal agent ... --event-handler pool-change=/etc/shoal/hooks/proxysql.sh
#
# Settings (environment):
#   PROXYSQL_HOST           admin interface host (default 127.0.0.1)
#   PROXYSQL_PORT           admin interface port (default 6032)
#   PROXYSQL_USER           admin user (or a user= line in the defaults file)
#   MYSQL_PWD               admin password, read by the mysql client itself, or
#   PROXYSQL_DEFAULTS_FILE  an option file (password=, user=, skip-ssl ...)
#                           given as --defaults-extra-file
#   PROXYSQL_WRITER_HG      writer hostgroup id;  at least one of the two
#   PROXYSQL_READER_HG      reader hostgroup id;  hostgroups must be set
#   PROXYSQL_SAVE           1: also SAVE MYSQL SERVERS TO DISK (default 0)
#   SHOAL_HOOK_CLUSTER      the pool's cluster to apply (default: the only one;
#                           required when the pool has several)
#
# Input: the pool-change JSON document on stdin.
# Dependencies: bash, jq, the mysql (or mariadb) command-line client.
#
# Untrusted input: node names and addresses come from other machines. Only an
# address that is an IPv4 or [IPv6] address or a host name followed by a port
# 1-65535 goes into SQL (so it cannot hold a quote); any other node is skipped
# with a message on stderr, the valid ones are still applied and the script
# then exits 3. The SQL goes to mysql on stdin, never on its command line.
#
# Exit status: 0 done; 1 mysql failed; 2 missing dependency, bad setting or
# bad input document; 3 some nodes were skipped as invalid (the rest was
# applied).
set -euo pipefail
export LC_ALL=C

prog=proxysql.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 2; }
warn() { printf '%s: %s\n' "$prog" "$*" >&2; }

# valid_host: IPv4, IPv6 (no brackets) or a host name.
valid_host() {
	case $1 in
	*:*) case $1 in *[!0-9A-Fa-f:.]*) return 1 ;; esac ;;
	'' | [!A-Za-z0-9]* | *[!A-Za-z0-9.-]*) return 1 ;;
	esac
	[ "${#1}" -le 253 ]
}

# valid_port: 1-65535.
valid_port() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	[ "${#1}" -le 5 ] && [ "$((10#$1))" -ge 1 ] && [ "$((10#$1))" -le 65535 ]
}

# valid_hg: a hostgroup id.
valid_hg() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	[ "${#1}" -le 9 ]
}

event=${SHOAL_EVENT:-${SERF_EVENT:-}}
if [ -n "$event" ] && [ "$event" != pool-change ]; then
	echo "$prog: ignoring event $(printf '%q' "$event")"
	exit 0
fi

command -v jq >/dev/null 2>&1 || die "missing dependency: jq (apt-get install -y jq)"
command -v mysql >/dev/null 2>&1 || die "missing dependency: mysql client (apt-get install -y default-mysql-client)"

host=${PROXYSQL_HOST:-127.0.0.1}
port=${PROXYSQL_PORT:-6032}
user=${PROXYSQL_USER:-}
defaults=${PROXYSQL_DEFAULTS_FILE:-}
whg=${PROXYSQL_WRITER_HG:-}
rhg=${PROXYSQL_READER_HG:-}
save=${PROXYSQL_SAVE:-0}
valid_host "$host" || die "PROXYSQL_HOST: invalid host $(printf '%q' "$host")"
valid_port "$port" || die "PROXYSQL_PORT: invalid port $(printf '%q' "$port")"
[ -n "$user$defaults" ] || die "set PROXYSQL_USER (password in MYSQL_PWD) or PROXYSQL_DEFAULTS_FILE"
[ -z "$defaults" ] || [ -r "$defaults" ] || die "PROXYSQL_DEFAULTS_FILE: cannot read $defaults"
[ -n "$whg$rhg" ] || die "set PROXYSQL_WRITER_HG and/or PROXYSQL_READER_HG"
[ -z "$whg" ] || valid_hg "$whg" || die "PROXYSQL_WRITER_HG: want a hostgroup number, got $(printf '%q' "$whg")"
[ -z "$rhg" ] || valid_hg "$rhg" || die "PROXYSQL_READER_HG: want a hostgroup number, got $(printf '%q' "$rhg")"
case $save in 0 | 1) ;; *) die "PROXYSQL_SAVE: want 0 or 1, got $(printf '%q' "$save")" ;; esac

input=$(cat) || die "cannot read stdin"
jq -e '.version == 1 and .event == "pool-change" and (.data | type) == "object"' >/dev/null 2>&1 <<<"$input" ||
	die "stdin is not a version 1 pool-change document"

want=${SHOAL_HOOK_CLUSTER:-}
if [ -z "$want" ]; then
	clusters=$(jq -c '[(.data.pool.clusters // [])[].name] + [(.data.changes // [])[].cluster] | unique' <<<"$input")
	[ "$(jq length <<<"$clusters")" -eq 1 ] ||
		die "the pool has clusters $clusters: set SHOAL_HOOK_CLUSTER to one of them"
fi

# The plan, one statement a line: "sql<TAB>hostgroup<TAB>status<TAB>host<TAB>port"
# (host without IPv6 brackets), or "bad<TAB>node-as-JSON<TAB>addr-as-JSON".
# Addresses are validated here (\A...\z: `$` would accept a trailing newline)
# and again in the shell below; JSON-encoded strings are always one line.
plan=$(jq -r --arg want "$want" --arg whg "$whg" --arg rhg "$rhg" '
	def hostport:
		if type != "string" then null
		else (capture("\\A(?:\\[(?<v6>[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)\\]|(?<h>[A-Za-z0-9][A-Za-z0-9.-]{0,252})):(?<p>[0-9]{1,5})\\z") // null)
		     | if . == null then null
		       else {host: (.v6 // .h), port: (.p | tonumber)}
		            | if .port >= 1 and .port <= 65535 then . else null end
		       end
		end;
	def nodes($l): [($l // [])[] | objects | {name, addr}];
	(.data.pool.clusters // []) as $cs
	| (if $want != "" then $want
	   else ([$cs[].name] + [(.data.changes // [])[].cluster] | unique | .[0]) end) as $c
	| (first($cs[] | select(.name == $c)) // {}) as $pc
	| [nodes($pc.writers)[].name] as $w
	| [nodes($pc.readers)[].name] as $r
	# name -> addr: the pool first, then nodes that left it (changes to "none").
	# (unique_by keeps the first of each name.)
	| (nodes($pc.writers) + nodes($pc.readers) + nodes($pc.out)
	   + [(.data.changes // [])[] | objects | select(.cluster == $c) | {name: .node, addr}]
	   | map(select(.name != null and .addr != null and .addr != "")) | unique_by(.name)) as $all
	| [$all[] | select(.addr | hostport == null)] as $bad
	| [$all[] | (.addr | hostport) as $hp | select($hp != null) | . + $hp] as $ok
	| ($bad[] | "bad\t\(.name | tojson)\t\(.addr | tojson)"),
	  (def line($hg; $st): ["sql", $hg, $st, .host, (.port | tostring)] | join("\t");
	   if $whg == "" then empty else
	     ($ok[] | select(.name | IN($w[]) | not) | line($whg; "OFFLINE_SOFT")),
	     ($ok[] | select(.name | IN($w[]))       | line($whg; "ONLINE"))
	   end,
	   if $rhg == "" then empty else
	     ($ok[] | select(.name | IN($r[]))       | line($rhg; "ONLINE")),
	     ($ok[] | select(.name | IN($r[]) | not) | line($rhg; "OFFLINE_SOFT"))
	   end)
' <<<"$input") || die "cannot read the pool from the document"

rc=0
sql=
while IFS=$'\t' read -r kind hg status h p; do
	case $kind in
	'') continue ;;
	bad)
		warn "skipping node $hg: invalid address $status"
		[ "$rc" -ne 0 ] || rc=3
		continue
		;;
	sql) ;;
	*) die "internal error: unexpected plan line" ;;
	esac
	if ! valid_hg "$hg" || ! valid_host "$h" || ! valid_port "$p"; then
		warn "skipping invalid server $(printf '%q %q %q' "$hg" "$h" "$p")"
		[ "$rc" -ne 0 ] || rc=3
		continue
	fi
	case $status in ONLINE | OFFLINE_SOFT) ;; *) die "internal error: bad status" ;; esac
	sql+="UPDATE mysql_servers SET status='$status' WHERE hostgroup_id=$hg AND hostname='$h' AND port=$p;"$'\n'
done <<<"$plan"

if [ -z "$sql" ]; then
	echo "$prog: no server to set in cluster $(printf '%q' "${want:-(the only one)}"); nothing to do"
	exit "$rc"
fi
sql+=$'LOAD MYSQL SERVERS TO RUNTIME;\n'
[ "$save" != 1 ] || sql+=$'SAVE MYSQL SERVERS TO DISK;\n'

args=()
# --defaults-extra-file must be the first option.
[ -z "$defaults" ] || args+=("--defaults-extra-file=$defaults")
args+=(--protocol=TCP -h "$host" -P "$port")
[ -z "$user" ] || args+=(-u "$user")
args+=(--connect-timeout=5 --batch --skip-column-names)
if ! out=$(printf '%s' "$sql" | mysql "${args[@]}" 2>&1); then
	warn "mysql $host:$port failed: $out"
	exit 1
fi
printf '%s' "$sql" | sed "s/^/$prog: /"
exit "$rc"
