// Package hooks runs operators' event handler scripts: Serf's handler
// interface (spec syntax, SERF_* environment, stdin formats), with an
// execution that cannot stall the agent.
//
// # Handler specs
//
// A handler is written as in Serf, "[filter=]command":
//
//	/usr/local/bin/on-any-event                  every Serf event (as "*")
//	member-join=/usr/local/bin/on-join           one event type
//	member-failed,member-leave=/usr/local/bin/x  a comma-separated list
//	user=/usr/local/bin/x                        every user event
//	user:deploy=/usr/local/bin/deploy            user events named "deploy"
//	query=/usr/local/bin/x                       every query
//	query:load=uptime                            queries named "load"
//	pool-change=/usr/local/bin/reroute           shoal: the routing pool changed
//	health-change=/usr/local/bin/page            shoal: local MySQL health changed
//
// Event types: member-join, member-leave, member-failed, member-update,
// member-reap, user, user:NAME, query, query:NAME, * (every Serf event; not
// pool-change or health-change, which must be named), pool-change,
// health-change. No filter, or an empty one ("=cmd"), means *.
//
// The spec is split at its first '=' when the part before it looks like a
// filter list (each comma-separated item is *, user:…, query:…, or a word
// of letters, digits, '-', '_' and ':'). Such a list is checked strictly:
// an unknown or misspelt event type, an empty item, spaces around an item,
// or an empty user:/query: name is an error naming the spec and the bad
// item. Otherwise the whole spec is the command.
//
// # Commands: argv, never a shell
//
// The command is split into argv once, when the spec is parsed, with a
// shell's quoting rules ('single', "double", backslash escapes,
// backslash-newline) but no expansion of any kind, and is then executed
// directly. Anything a shell would interpret is an error unless quoted:
// unquoted | & ; < > ( ) $ ` and newline, $ and ` inside double quotes,
// and # or ~ at the start of a word ("VAR=value cmd" is an error too; use
// env). Glob characters are passed on literally. To use a shell, write one:
//
//	member-join=sh -c 'cut -f1 | xargs -n1 logger -t joined'
//
// Event data (node names, tags, payloads, all of which come from other
// machines) reaches a handler only through its environment and stdin, never
// through argv or a command line, so no data can be run as a command.
//
// # Environment
//
// A handler gets a minimal environment: PATH (DefaultPath when the agent
// has none), HOME, LANG, LC_ALL, TZ and USER from the agent's own
// environment when set, plus the names in Config.EnvAllow, plus:
//
//	SERF_EVENT        member-join, member-leave, member-failed, member-update,
//	                  member-reap, user, query, pool-change or health-change
//	SERF_SELF_NAME    this node's name
//	SERF_SELF_ROLE    this node's "role" tag ("" if none)
//	SERF_TAG_<KEY>    one per tag of this node; KEY is the tag name
//	                  upper-cased with every character outside [A-Z0-9_]
//	                  replaced by '_' (Serf's rule)
//	SERF_USER_EVENT   user events: the event name
//	SERF_USER_LTIME   user events: its Lamport time, decimal
//	SERF_QUERY_NAME   queries: the query name
//	SERF_QUERY_LTIME  queries: its Lamport time, decimal
//
// Each is also set as SHOAL_EVENT, SHOAL_SELF_NAME, SHOAL_SELF_ROLE,
// SHOAL_TAG_<KEY>, SHOAL_USER_EVENT, SHOAL_USER_LTIME, SHOAL_QUERY_NAME and
// SHOAL_QUERY_LTIME, with the same values. pool-change and health-change
// set SERF_EVENT as well as SHOAL_EVENT, so that a script dispatching on
// SERF_EVENT sees them. Values are passed verbatim, except that a NUL byte
// (which execve cannot pass) becomes the two characters \0. When two tag
// names map to the same variable, the tag whose name sorts last wins. The
// SELF and TAG variables describe this node when the handler starts.
//
// # Stdin
//
// Member events (member-*): one line per member,
//
//	NAME<TAB>ADDRESS<TAB>ROLE<TAB>TAGS<NEWLINE>
//
// ADDRESS is the IP address as Go prints it ("<nil>" when unknown), ROLE the
// member's "role" tag, TAGS its tags as k=v pairs joined by ',' and sorted by
// name. Tabs and newlines inside NAME, ROLE and TAGS are written as the two
// characters \t and \n; nothing else is escaped (as in Serf; a ',' or '=' in
// a tag value is not). Example:
//
//	mitchellh.local	127.0.0.1	web	datacenter=east,role=web
//
// User events and queries: the payload, byte for byte, with a newline
// appended when it is not empty and does not end in one (as in Serf).
//
// pool-change and health-change: one JSON document and a newline:
//
//	{"version":1,"event":"pool-change","time":"2025-01-02T03:04:05.123Z","node":"app1","data":{...}}
//
//	version  1; a change that breaks readers will change it
//	event    "pool-change" or "health-change"
//	time     when the change happened, RFC 3339 with nanoseconds
//	node     this node's name (as SERF_SELF_NAME)
//	data     the change itself, a JSON value defined by the agent (null if none)
//
// # Queries
//
// A query handler that exits 0 answers with its stdout (stderr is only
// logged), cut to Config.QueryResponseLimit bytes (default 1024, Serf's
// QueryResponseSizeLimit default) with a logged warning. A handler that
// fails or prints nothing does not answer. For a query given to Enqueue the
// first matching handler to finish with an answer responds (through
// Config.Respond); Runner.Query instead runs the matching handlers one by
// one, in spec order, and returns the first answer.
//
// # Execution
//
// Every handler has its own bounded queue and runs one event at a time;
// handlers never wait for each other and Enqueue never waits for any of
// them. The queue has two parts of Config.QueueSize events each (default
// 1000), by event class:
//
//	state  member-* (class member), pool-change and health-change (class
//	       shoal): what the cluster and this node look like
//	bulk   user events (class user) and queries (class query), which
//	       anyone holding the gossip key can send at any rate
//
// State events run first: the next run is the oldest state event, and a
// user event or query runs only when none waits. Within each part events
// run in arrival order. A flood of user events or queries therefore never
// drops a member, pool-change or health-change event, and delays it by at
// most the run in progress.
//
// When the bulk part is full its oldest event is dropped. When the state
// part is full (state events alone overflow it: the handler is slower
// than the cluster's churn), an incoming event first supersedes the queued
// state it replaces, so that the newest state of each member wins, which
// is what a handler acting on membership needs: a member event removes
// every queued entry of the same members (an event listing other members
// too keeps them), and a pool-change or health-change removes the queued
// events of its type (the newest carries the whole pool or health; the
// changes listed by the removed ones are lost). Only when nothing was
// superseded is the oldest state event dropped. While the state part has
// room nothing is merged: every event is delivered.
//
// Every drop is counted per handler, event class and reason (queue_full,
// superseded, handler_removed, runner_closed; see HandlerStats) and
// logged: the first at once, then a summary at most every DropLogInterval.
// Member entries removed from an event that stays queued are counted in
// HandlerStats.Coalesced. Memory is bounded: at most 2 x QueueSize events
// per handler, plus the coalescer's one entry per member.
//
// Each run has a timeout (Config.Timeout, default 30s; Spec.Timeout per
// handler). Handlers run in their own process group; on timeout the whole
// group, and every other process of the run, gets SIGTERM, then SIGKILL
// after Config.KillGrace (default 5s), or at once when the handler's main
// process is gone, and the run is counted as timed out. Close does the same
// to every running handler. When the main process exits, background
// processes it started may run on if they detached from its output
// (cmd >/dev/null 2>&1 &, Serf's "forking event handlers"); one that still
// holds stdout or stderr a second later is killed with every process of the
// run, so it can neither hang the runner nor write into a dead pipe.
//
// "Every process of the run": children leave a process group with setsid
// and lose their parent in a double fork, so New makes the whole process a
// child subreaper (PR_SET_CHILD_SUBREAPER, once): orphans of hooks are
// reparented to it, never to init. Each run's environment has its own
// RunEnv value; a kill signals the run's descendants by parent and every
// process holding that value, through pidfds, and the process reaps the
// orphans it adopts (only those, through their pidfds: exit statuses other
// code waits for are never taken). See tree_linux.go.
//
// stdout and stderr are captured together, in order, keeping the last
// Config.OutputLimit bytes (default 64 KiB), and logged with the handler,
// the event and the exit code: "hook ran" (info), "hook failed" or "hook
// timed out" (warn).
//
// Coalescing (Spec.Coalesce, off by default) merges a handler's member
// events as Serf's coalesce_period does: per member only its latest event
// is kept, flushed after Config.QuiescentPeriod without new member events
// (default 1s) or Config.CoalescePeriod after the first (default 3s), and an
// event repeating the last one delivered for that member is left out
// (updates excepted). Other events pass straight through.
//
// Reload replaces the handlers: a handler whose spec string is unchanged
// keeps its queue, counters and running script; a removed handler finishes
// its current run and its queue is dropped (counted, logged).
//
// # Compatibility with Serf's event handlers
//
// Identical:
//   - spec syntax, event types, filters, user:NAME and query:NAME, "*", no
//     filter and "=cmd" meaning every event, the split at the first '=';
//   - SERF_EVENT, SERF_SELF_NAME, SERF_SELF_ROLE, SERF_TAG_<KEY> (same name
//     rule), SERF_USER_EVENT, SERF_USER_LTIME, SERF_QUERY_NAME,
//     SERF_QUERY_LTIME;
//   - member stdin lines (fields, tabs, \t and \n escaping, address
//     format), payload stdin with the added newline;
//   - a query is answered by a handler exiting 0 with output;
//   - detached background processes keep running.
//
// Different, and why:
//   - No /bin/sh: the command is exec'd as argv, and shell syntax in it is
//     a parse error rather than a surprise. Pipes, redirections and
//     variables need an explicit sh -c '...'. Tag values and payloads come
//     from other machines and must never get near a shell.
//   - A spec without a filter may contain '=' ("/bin/x --opt=1"); Serf
//     rejects it. "user:" and "query:" with an empty name are errors; Serf
//     reads them as "user" and "query".
//   - The environment is minimal plus an allowlist; Serf passes the
//     agent's whole environment, which may hold secrets (database
//     passwords).
//   - SHOAL_* copies of every variable; pool-change and health-change
//     events, which "*" does not match so that Serf scripts written for
//     "*" never see a JSON stdin.
//   - Tags are sorted in member lines and tag-variable collisions resolve
//     the same way every time; Serf uses map order.
//   - SELF/TAG variables are read when the handler starts; Serf reads them
//     when the event is dispatched (they differ only if the local tags
//     changed while the event was queued).
//   - Handlers run concurrently, each from a bounded queue where member,
//     pool and health events come before user events and queries, with a
//     timeout that kills the process group; Serf runs every handler
//     serially inside its event loop with no timeout (one slow script
//     delays every later event, hashicorp/serf#369, #436) and only warns
//     after 1s.
//   - Output: 64 KiB kept and logged at info or warn; Serf keeps 8 KiB and
//     logs it at debug.
//   - A query answer is stdout only, and is cut to the size limit; Serf
//     answers with stdout and stderr together, and sends nothing when the
//     answer is over the limit. With several query handlers through
//     Enqueue the first to finish answers; Serf runs them in order.
//   - A background process that keeps the handler's output open is killed
//     a second after the handler exits; Serf waits for it, blocking all
//     events.
//   - Coalescing is per handler, off by default, for member events only;
//     the stock serf agent coalesces member and user events for all
//     handlers (3s/1s). shoal's own Serf has coalescing off, so that the
//     routing pool sees every change at once.
//   - A NUL byte in an environment value is passed as \0; Serf fails the
//     run. Unix only; Serf runs handlers with cmd /C on Windows.
package hooks
