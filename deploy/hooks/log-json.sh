#!/usr/bin/env bash
# log-json.sh: a shoal (or serf) event hook that appends one JSON line per
# event to a log file, for audit or to feed a log shipper.
#
# Each line is one JSON object:
#   time        when the hook ran, UTC, RFC 3339 with milliseconds
#   event       SHOAL_EVENT or SERF_EVENT ("" when run by hand)
#   node, role  this agent's name and role (SHOAL_SELF_* or SERF_SELF_*)
#   tags        this agent's tags, from SERF_TAG_* and SHOAL_TAG_* (the
#               latter win), names lower-cased; left out when there are none
#   user_event  the user event's name      (user events)
#   query       the query's name           (queries)
#   ltime       its Lamport time, a number (user events and queries)
#   members     member-* events: [{name, addr, role, tags: {k: v}}], from the
#               tab-separated lines on stdin
#   payload     user events and queries (and unknown events): stdin as a
#               string (invalid UTF-8 becomes U+FFFD)
#   document    pool-change and health-change: the JSON document on stdin,
#               embedded as an object; if stdin is not one JSON document it
#               goes to payload instead, with "error" set
# Every value goes through jq, never through the shell: quotes, backslashes,
# newlines and $(...) from other machines come out as JSON strings, verbatim.
# Lines are appended under flock(1) when it is installed, so hooks running at
# once do not mix their lines.
#
# Events: any. A handler without a filter (or "*") gets Serf's events only;
# name shoal's own to log them too:
#   shoal agent ... --event-handler '*,pool-change,health-change=/etc/shoal/hooks/log-json.sh'
#
# Settings (environment):
#   SHOAL_HOOK_LOG   the file to append to (default ./shoal-events.jsonl,
#                    relative to the hook's working directory)
#
# Dependencies: bash, jq (1.6 or later), coreutils; flock (util-linux) optional.
#
# Exit status: 0 the line was written; 2 missing dependency, or the log file
# cannot be written.
set -euo pipefail
export LC_ALL=C

prog='log-json.sh'
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 2; }

command -v jq >/dev/null 2>&1 || die "missing dependency: jq (apt-get install -y jq)"
log=${SHOAL_HOOK_LOG:-./shoal-events.jsonl}

event=${SHOAL_EVENT:-${SERF_EVENT:-}}
self=${SHOAL_SELF_NAME:-${SERF_SELF_NAME:-}}
role=${SHOAL_SELF_ROLE:-${SERF_SELF_ROLE:-}}
user_event=${SHOAL_USER_EVENT:-${SERF_USER_EVENT:-}}
query=${SHOAL_QUERY_NAME:-${SERF_QUERY_NAME:-}}
case $event in
user) ltime=${SHOAL_USER_LTIME:-${SERF_USER_LTIME:-}} ;;
query) ltime=${SHOAL_QUERY_LTIME:-${SERF_QUERY_LTIME:-}} ;;
*) ltime='' ;;
esac

tmpdir=$(mktemp -d)
trap 'rm -rf -- "$tmpdir"' EXIT
in=$tmpdir/stdin
if [ -t 0 ]; then : >"$in"; else cat >"$in"; fi

# body: the event's own fields, as one JSON object in $tmpdir/body.
body=$tmpdir/body
case $event in
member-*)
	# name<TAB>addr<TAB>role<TAB>k=v,k=v, one member a line.
	jq -R -n -c '{members: [inputs | select(length > 0) | split("\t") as $f | {
		name: $f[0], addr: ($f[1] // ""), role: ($f[2] // ""),
		tags: (reduce (($f[3] // "") | split(",")[] | select(length > 0)) as $kv ({};
			($kv | index("=")) as $i
			| if $i == null then .[$kv] = "" else .[$kv[:$i]] = $kv[$i + 1:] end))
	}]}' <"$in" >"$body"
	;;
pool-change | health-change)
	if jq -e -s 'length == 1' <"$in" >/dev/null 2>&1; then
		jq -c '{document: .}' <"$in" >"$body"
	else
		jq -R -s -c '{payload: ., error: "stdin is not one JSON document"}' <"$in" >"$body"
	fi
	;;
*)
	jq -R -s -c '{payload: .}' <"$in" >"$body"
	;;
esac

line=$(jq -n -c \
	--arg event "$event" --arg node "$self" --arg role "$role" \
	--arg user_event "$user_event" --arg query "$query" --arg ltime "$ltime" \
	--slurpfile body "$body" '
	now as $now
	| {time: (($now | floor | todate | .[:-1]) + "."
	          + ("00" + (($now * 1000 | floor) % 1000 | tostring) | .[-3:]) + "Z"),
	   event: $event, node: $node, role: $role}
	+ ([$ENV | to_entries[] | select(.key | test("\\ASERF_TAG_."))]
	   + [$ENV | to_entries[] | select(.key | test("\\ASHOAL_TAG_."))]
	   | if length == 0 then {}
	     else {tags: (reduce .[] as $e ({}; .[$e.key | sub("\\A(SERF|SHOAL)_TAG_"; "") | ascii_downcase] = $e.value))}
	     end)
	+ (if $event == "user" then {user_event: $user_event} else {} end)
	+ (if $event == "query" then {query: $query} else {} end)
	+ (if $ltime == "" then {}
	   elif ($ltime | test("\\A[0-9]{1,15}\\z")) then {ltime: ($ltime | tonumber)}
	   else {ltime: $ltime} end)
	+ $body[0]') || die "cannot build the log line"

exec 9>>"$log" || die "cannot open $log for appending"
if command -v flock >/dev/null 2>&1; then
	flock -w 10 9 || die "cannot lock $log"
fi
printf '%s\n' "$line" >&9 || die "cannot write $log"
