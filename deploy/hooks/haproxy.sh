#!/usr/bin/env bash
# haproxy.sh: a shoal event hook that puts HAProxy servers in or out of
# service when the routing pool changes.
#
# For one cluster of the pool it sets every node's server, named like the
# node, to `ready` or `maint` through HAProxy's runtime API:
#   writer backend: ready if the node is the cluster's writer, else maint;
#                   servers are taken out before the new writer is put in.
#   reader backend: ready if the node is a reader, else maint; servers are
#                   put in before others are taken out.
# Every node of the cluster is set, not only the changed ones, so a run also
# repairs a state changed by hand or lost in an HAProxy reload. A node that
# left the pool (a change to "none") is set to maint.
#
# Events: pool-change (any other event is ignored, exit 0).
#   shoal agent ... --event-handler pool-change=/etc/shoal/hooks/haproxy.sh
#
# Settings (environment):
#   HAPROXY_SOCKET          runtime API unix socket path (`stats socket ...
#                           level admin`), or
#   HAPROXY_ADDR            runtime API host:port (`stats socket ipv4@...`);
#                           exactly one of the two.
#   HAPROXY_WRITER_BACKEND  backend for the writer;  at least one of the two
#   HAPROXY_READER_BACKEND  backend for the readers; backends must be set.
#   SHOAL_HOOK_CLUSTER      the pool's cluster to apply (default: the only one;
#                           required when the pool has several).
#   HAPROXY_TIMEOUT         seconds for each runtime API command (default 5).
#
# Input: the pool-change JSON document on stdin.
# Dependencies: bash, jq, socat.
#
# Untrusted input: node names come from other machines. A name that is not a
# valid HAProxy server name (^[A-Za-z0-9._:-]+$) is skipped with a message on
# stderr; the valid ones are still applied and the script then exits 3.
#
# Exit status: 0 done; 1 HAProxy refused a command or could not be reached;
# 2 missing dependency, bad setting or bad input document; 3 some nodes were
# skipped as invalid (the rest was applied).
set -euo pipefail
export LC_ALL=C

prog=haproxy.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 2; }
warn() { printf '%s: %s\n' "$prog" "$*" >&2; }

# valid_name: an HAProxy backend or server name.
valid_name() { case $1 in '' | *[!A-Za-z0-9._:-]*) return 1 ;; esac; }

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

for dep in jq socat; do
	command -v "$dep" >/dev/null 2>&1 || die "missing dependency: $dep (apt-get install -y $dep)"
done

wb=${HAPROXY_WRITER_BACKEND:-}
rb=${HAPROXY_READER_BACKEND:-}
[ -n "$wb$rb" ] || die "set HAPROXY_WRITER_BACKEND and/or HAPROXY_READER_BACKEND"
[ -z "$wb" ] || valid_name "$wb" || die "HAPROXY_WRITER_BACKEND: invalid backend name $(printf '%q' "$wb")"
[ -z "$rb" ] || valid_name "$rb" || die "HAPROXY_READER_BACKEND: invalid backend name $(printf '%q' "$rb")"

timeout=${HAPROXY_TIMEOUT:-5}
case $timeout in '' | *[!0-9]* | 0) die "HAPROXY_TIMEOUT: want a whole number of seconds > 0, got $(printf '%q' "$timeout")" ;; esac

sock=${HAPROXY_SOCKET:-}
addr=${HAPROXY_ADDR:-}
if [ -n "$sock" ] && [ -n "$addr" ]; then
	die "set only one of HAPROXY_SOCKET and HAPROXY_ADDR"
elif [ -n "$sock" ]; then
	# socat reads ',' '!' and ':' in an address as syntax: keep paths plain.
	case $sock in *[!A-Za-z0-9._/@+-]*) die "HAPROXY_SOCKET: unsupported characters in path $(printf '%q' "$sock")" ;; esac
	[ -S "$sock" ] || die "HAPROXY_SOCKET: $sock is not a unix socket"
	target="UNIX-CONNECT:$sock"
elif [ -n "$addr" ]; then
	valid_hostport "$addr" || die "HAPROXY_ADDR: want host:port, got $(printf '%q' "$addr")"
	target="TCP:$addr"
else
	die "set HAPROXY_SOCKET (unix socket path) or HAPROXY_ADDR (host:port)"
fi

input=$(cat) || die "cannot read stdin"
jq -e '.version == 1 and .event == "pool-change" and (.data | type) == "object"' >/dev/null 2>&1 <<<"$input" ||
	die "stdin is not a version 1 pool-change document"

want=${SHOAL_HOOK_CLUSTER:-}
if [ -z "$want" ]; then
	clusters=$(jq -c '[(.data.pool.clusters // [])[].name] + [(.data.changes // [])[].cluster] | unique' <<<"$input")
	[ "$(jq length <<<"$clusters")" -eq 1 ] ||
		die "the pool has clusters $clusters: set SHOAL_HOOK_CLUSTER to one of them"
fi

# The plan, one command a line: "cmd<TAB>backend<TAB>server<TAB>state", or
# "bad<TAB>name-as-JSON" for a node whose name is not a valid server name.
# Validation happens here (\A...\z: `$` would accept a trailing newline) and
# again in the shell below; a JSON-encoded name is always one line.
plan=$(jq -r --arg want "$want" --arg wb "$wb" --arg rb "$rb" '
	def valid: type == "string" and test("\\A[A-Za-z0-9._:-]+\\z");
	def names($l): [($l // [])[] | if type == "object" then .name else . end | select(. != null)];
	(.data.pool.clusters // []) as $cs
	| (if $want != "" then $want
	   else ([$cs[].name] + [(.data.changes // [])[].cluster] | unique | .[0]) end) as $c
	| (first($cs[] | select(.name == $c)) // {}) as $pc
	| names($pc.writers) as $w
	| names($pc.readers) as $r
	| (names($pc.writers) + names($pc.readers) + names($pc.out) + names($pc.conflict)
	   + [(.data.changes // [])[] | select(.cluster == $c) | .node | select(. != null)]
	   | unique) as $all
	| ($all | map(select(valid | not)) | .[] | "bad\t" + tojson),
	  ($all | map(select(valid)) as $ok
	   | if $wb == "" then empty else
	       ($ok[] | select(IN($w[]) | not) | ["cmd", $wb, ., "maint"] | join("\t")),
	       ($ok[] | select(IN($w[]))       | ["cmd", $wb, ., "ready"] | join("\t"))
	     end,
	     if $rb == "" then empty else
	       ($ok[] | select(IN($r[]))       | ["cmd", $rb, ., "ready"] | join("\t")),
	       ($ok[] | select(IN($r[]) | not) | ["cmd", $rb, ., "maint"] | join("\t"))
	     end)
' <<<"$input") || die "cannot read the pool from the document"

if [ -z "$plan" ]; then
	echo "$prog: no node of cluster $(printf '%q' "${want:-(the only one)}") in this event; nothing to do"
	exit 0
fi
rc=0
while IFS=$'\t' read -r kind backend server state; do
	case $kind in
	bad)
		warn "skipping node with invalid server name $backend"
		[ "$rc" -ne 0 ] || rc=3
		continue
		;;
	cmd) ;;
	*) die "internal error: unexpected plan line" ;;
	esac
	if ! valid_name "$backend" || ! valid_name "$server"; then
		warn "skipping invalid server $(printf '%q/%q' "$backend" "$server")"
		[ "$rc" -ne 0 ] || rc=3
		continue
	fi
	case $state in ready | maint) ;; *) die "internal error: bad state" ;; esac
	cmd="set server $backend/$server state $state"
	if ! reply=$(printf '%s\n' "$cmd" | socat -t "$timeout" -T "$timeout" STDIO "$target" 2>&1); then
		warn "$cmd: runtime API $target unreachable: $reply"
		rc=1
		break
	fi
	# HAProxy answers an empty line on success, an error message otherwise.
	if [ -n "${reply//[$'\n\r ']/}" ]; then
		warn "$cmd: HAProxy says: $(printf '%s' "$reply" | tr -d '\r' | tr '\n' ' ')"
		rc=1
		continue
	fi
	echo "$prog: $cmd"
done <<<"$plan"
exit "$rc"
