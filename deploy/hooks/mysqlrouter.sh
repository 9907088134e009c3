#!/usr/bin/env bash
# mysqlrouter.sh: a shoal event hook that rewrites MySQL Router's static
# routing destinations from shoal's pool lists and restarts the router.
#
# MySQL Router cannot change a static `destinations=` list at run time. This
# script reads the lists shoal's file sink writes (<dir>/<cluster>-writers.txt
# and <cluster>-readers.txt, one host:port a line), rewrites the
# `destinations=` line of the read-write and read-only [routing:NAME]
# sections of the router's configuration, and restarts the router, only when
# the file changed. The new file replaces the old one atomically (a temporary
# file in the same directory, then mv); mode and owner are kept. An empty
# list keeps the section's old destinations, with a warning on stderr (MySQL
# Router refuses an empty list). Running it again with the same lists changes
# nothing, so it can also run from a timer.
#
# The file sink must be enabled with a lists directory. The script reads the
# lists, not the event on stdin (which it discards).
#
# Events: pool-change (any other event is ignored, exit 0); also by hand.
#   shoal agent ... --event-handler pool-change=/etc/shoal/hooks/mysqlrouter.sh
#
# Settings (environment):
#   SHOAL_POOL_LISTS_DIR    directory of the file sink's lists (required)
#   SHOAL_HOOK_CLUSTER      cluster whose lists to use (default: the only
#                           <cluster>-writers.txt in the directory)
#   MYSQLROUTER_CONF        the router's configuration file (default
#                           /etc/mysqlrouter/mysqlrouter.conf)
#   MYSQLROUTER_RW_SECTION  section for the writers (default routing:primary)
#   MYSQLROUTER_RO_SECTION  section for the readers (default routing:replicas);
#                           set either to "" to leave it alone
#   MYSQLROUTER_RESTART     restart command, split on blanks into arguments and
#                           run without a shell (default
#                           "systemctl restart mysqlrouter"; "" for none)
#
# Dependencies: bash, awk, coreutils (mktemp, cp, cmp, mv, readlink).
#
# Untrusted input: addresses come from other machines. A line of a list that
# is not an IPv4 or [IPv6] address or a host name followed by a port 1-65535
# is skipped with a message on stderr; the rest is applied and the script
# then exits 3.
#
# Exit status: 0 done (changed or not); 1 the restart command failed (the
# new configuration is in place: restart the router by hand); 2 missing
# dependency or bad setting; 3 some list lines were skipped as invalid.
set -euo pipefail
export LC_ALL=C

prog=mysqlrouter.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 2; }
warn() { printf '%s: %s\n' "$prog" "$*" >&2; }

# valid_hostport: IPv4, [IPv6] or a host name, then :port (1-65535).
valid_hostport() {
	local hp=$1 host port inner
	case $hp in *:*) ;; *) return 1 ;; esac
	host=${hp%:*} port=${hp##*:}
	case $port in '' | *[!0-9]*) return 1 ;; esac
	[ "${#port}" -le 5 ] && [ "$((10#$port))" -ge 1 ] && [ "$((10#$port))" -le 65535 ] || return 1
	case $host in
	\[*\])
		inner=${host#\[} inner=${inner%\]}
		case $inner in '' | *[!0-9A-Fa-f:.]*) return 1 ;; *:*) return 0 ;; *) return 1 ;; esac
		;;
	'' | [!A-Za-z0-9]* | *[!A-Za-z0-9.-]*) return 1 ;;
	esac
	[ "${#host}" -le 253 ]
}

event=${SHOAL_EVENT:-${SERF_EVENT:-}}
if [ -n "$event" ] && [ "$event" != pool-change ]; then
	echo "$prog: ignoring event $(printf '%q' "$event")"
	exit 0
fi
# The event document is not needed; drain it so shoal's write does not fail.
[ -t 0 ] || cat >/dev/null || true

for dep in awk mktemp cp cmp mv readlink; do
	command -v "$dep" >/dev/null 2>&1 || die "missing dependency: $dep"
done

dir=${SHOAL_POOL_LISTS_DIR:-}
[ -n "$dir" ] || die "set SHOAL_POOL_LISTS_DIR to the file sink's lists directory"
[ -d "$dir" ] || die "SHOAL_POOL_LISTS_DIR: $dir is not a directory"

cluster=${SHOAL_HOOK_CLUSTER:-}
if [ -z "$cluster" ]; then
	shopt -s nullglob
	found=("$dir"/*-writers.txt)
	shopt -u nullglob
	[ "${#found[@]}" -eq 1 ] ||
		die "found ${#found[@]} *-writers.txt files in $dir: set SHOAL_HOOK_CLUSTER"
	cluster=${found[0]##*/}
	cluster=${cluster%-writers.txt}
fi
case $cluster in '' | */* | . | ..) die "SHOAL_HOOK_CLUSTER: invalid cluster name $(printf '%q' "$cluster")" ;; esac

conf=${MYSQLROUTER_CONF:-/etc/mysqlrouter/mysqlrouter.conf}
[ -f "$conf" ] || die "MYSQLROUTER_CONF: $conf is not a file"
conf=$(readlink -f -- "$conf") # write the real file, not over a symlink
rw=${MYSQLROUTER_RW_SECTION-routing:primary}
ro=${MYSQLROUTER_RO_SECTION-routing:replicas}
[ -n "$rw$ro" ] || die "MYSQLROUTER_RW_SECTION and MYSQLROUTER_RO_SECTION are both empty"
for s in "$rw" "$ro"; do
	case $s in *'['* | *']'* | *$'\n'*) die "invalid section name $(printf '%q' "$s")" ;; esac
done
restart=${MYSQLROUTER_RESTART-systemctl restart mysqlrouter}

rc=0
# read_list FILE: sets dest to the valid addresses of a list, comma separated.
read_list() {
	local file=$1 line
	dest=''
	[ -f "$file" ] || { warn "no list $file"; return 0; }
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%$'\r'}
		[ -n "$line" ] || continue
		if ! valid_hostport "$line"; then
			warn "$file: skipping invalid address $(printf '%q' "$line")"
			[ "$rc" -ne 0 ] || rc=3
			continue
		fi
		dest+=${dest:+,}$line
	done <"$file"
}

rw_dest='' ro_dest=''
if [ -n "$rw" ]; then
	read_list "$dir/$cluster-writers.txt"
	rw_dest=$dest
	[ -n "$rw_dest" ] || warn "[$rw]: no writer in the list; keeping the old destinations"
fi
if [ -n "$ro" ]; then
	read_list "$dir/$cluster-readers.txt"
	ro_dest=$dest
	[ -n "$ro_dest" ] || warn "[$ro]: no reader in the list; keeping the old destinations"
fi

tmp=$(mktemp "$(dirname -- "$conf")/.${conf##*/}.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cp -p -- "$conf" "$tmp" # mode and owner (when root)

# Replace the destinations line of each named section; an empty value keeps
# the line. Values come through the environment (awk -v would expand
# backslashes). Report the sections that were not found.
missing=$(RW="$rw" RO="$ro" RWD="$rw_dest" ROD="$ro_dest" TMP="$tmp" awk '
	function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
	BEGIN { rw = ENVIRON["RW"]; ro = ENVIRON["RO"]; out = ENVIRON["TMP"] }
	{
		line = $0
		if (trim(line) ~ /^\[.*\]$/) {
			sec = substr(trim(line), 2, length(trim(line)) - 2)
			if (sec == rw && rw != "") seen_rw = 1
			if (sec == ro && ro != "") seen_ro = 1
		} else if (match(line, /^[ \t]*destinations[ \t]*=[ \t]*/)) {
			v = ""
			if (sec == rw && rw != "") { v = ENVIRON["RWD"]; has_rw = 1 }
			if (sec == ro && ro != "") { v = ENVIRON["ROD"]; has_ro = 1 }
			if (v != "") line = substr(line, 1, RLENGTH) v
		}
		print line > out
	}
	END {
		if (rw != "" && !has_rw) print "[" rw "]" (seen_rw ? " has no destinations line" : " not found")
		if (ro != "" && !has_ro) print "[" ro "]" (seen_ro ? " has no destinations line" : " not found")
	}
' "$conf") || die "cannot rewrite $conf"
[ -z "$missing" ] || die "$conf: $(printf '%s' "$missing" | tr '\n' ';')"

if cmp -s -- "$conf" "$tmp"; then
	echo "$prog: $conf unchanged"
	exit "$rc"
fi
mv -f -- "$tmp" "$conf"
trap - EXIT
echo "$prog: $conf: [$rw] destinations=${rw_dest:-(kept)} [$ro] destinations=${ro_dest:-(kept)}"

if [ -z "$restart" ]; then
	echo "$prog: MYSQLROUTER_RESTART is empty; not restarting"
	exit "$rc"
fi
set -f # split the command on blanks, no globbing, no eval
# shellcheck disable=SC2086
set -- $restart
set +f
command -v "$1" >/dev/null 2>&1 || die "MYSQLROUTER_RESTART: command not found: $1"
if ! "$@"; then
	warn "restart failed: $restart (the new $conf is in place; restart MySQL Router by hand)"
	exit 1
fi
echo "$prog: ran $restart"
exit "$rc"
