package hooks

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Event type names used in filters, in SERF_EVENT and in SHOAL_EVENT.
const (
	MemberJoin   = "member-join"
	MemberLeave  = "member-leave"
	MemberFailed = "member-failed"
	MemberUpdate = "member-update"
	MemberReap   = "member-reap"
	User         = "user"
	Query        = "query"
	PoolChange   = "pool-change"
	HealthChange = "health-change"
	// All matches every Serf event (member-*, user, query), as in Serf. It
	// does not match shoal's own events: name those explicitly.
	All = "*"
)

// knownTypes are the event types a filter may name.
var knownTypes = map[string]bool{
	MemberJoin: true, MemberLeave: true, MemberFailed: true, MemberUpdate: true,
	MemberReap: true, User: true, Query: true, PoolChange: true, HealthChange: true, All: true,
}

// Filter selects events: Event is one of the type constants; Name, only
// with User or Query, restricts it to one user event or query name.
type Filter struct {
	Event string
	Name  string
}

// String returns the filter as written in a spec: "member-join", "user:deploy".
func (f Filter) String() string {
	if f.Name != "" {
		return f.Event + ":" + f.Name
	}
	return f.Event
}

// Spec is one parsed handler: which events it wants and the argv to run.
type Spec struct {
	// Raw is the spec as written. Reload matches handlers by Raw.
	Raw     string
	Filters []Filter
	// Command is the command part of Raw, Argv its words.
	Command string
	Argv    []string

	// Options the spec syntax has no room for; ParseSpec leaves them zero
	// and the caller (config) may set them.

	// Timeout overrides Config.Timeout for this handler when non-zero.
	Timeout time.Duration
	// Coalesce member events for this handler (Config.CoalescePeriod and
	// Config.QuiescentPeriod), as Serf's coalesce_period does.
	Coalesce bool
}

// String returns Raw.
func (s Spec) String() string { return s.Raw }

// Redacted stands for what cannot be shown of a handler without its
// secrets: a command that is nothing but arguments, or a spec that does not
// parse.
const Redacted = "(hidden)"

// RedactedCommand is the command with its arguments hidden, since they may
// hold a secret (--key=..., env TOKEN=...): "/bin/notify …".
func (s Spec) RedactedCommand() string {
	switch len(s.Argv) {
	case 0:
		return Redacted
	case 1:
		return s.Argv[0]
	}
	return s.Argv[0] + " …"
}

// RedactSpec is a spec as written with its command's arguments hidden
// (RedactedCommand), its filter kept: "user:deploy=/bin/notify --key=s3cret"
// becomes "user:deploy=/bin/notify …". A spec that does not parse is
// Redacted as a whole.
func RedactSpec(raw string) string {
	sp, err := ParseSpec(raw)
	if err != nil || len(sp.Argv) == 0 || !strings.HasSuffix(raw, sp.Command) {
		return Redacted
	}
	return strings.TrimSuffix(raw, sp.Command) + sp.RedactedCommand()
}

// ParseSpec parses a handler spec, "[filter=]command", with Serf's syntax:
// the filter is a comma-separated list of member-join, member-leave,
// member-failed, member-update, member-reap, user, user:NAME, query,
// query:NAME and *, plus shoal's pool-change and health-change; no filter
// means *.
//
// Like Serf, the spec is split at its first '='. Unlike Serf, that split is
// only made when the part before the '=' looks like a filter list (each
// comma-separated item is *, user:…, query:…, or a single word of letters,
// digits, '-', '_' and ':'); otherwise the whole spec is the command, so
// "/usr/local/bin/notify --channel=ops" works without a filter where Serf
// would reject it. A filter list is then checked strictly: an unknown event
// type is an error, never a command.
//
// The command is split once, here, into argv (see SplitArgs).
func ParseSpec(s string) (Spec, error) {
	if strings.TrimSpace(s) == "" {
		return Spec{}, errors.New("hook spec is empty")
	}
	filterPart, command := "", s
	if i := strings.IndexByte(s, '='); i >= 0 && looksLikeFilterList(s[:i]) {
		filterPart, command = s[:i], s[i+1:]
	}
	filters, err := parseFilters(filterPart)
	if err != nil {
		return Spec{}, fmt.Errorf("hook spec %q: filter %q: %w", s, filterPart, err)
	}
	argv, err := SplitArgs(command)
	if err != nil {
		return Spec{}, fmt.Errorf("hook spec %q: command %q: %w", s, command, err)
	}
	if len(argv) == 0 {
		return Spec{}, fmt.Errorf("hook spec %q: no command after the filter", s)
	}
	if argv[0] == "" {
		return Spec{}, fmt.Errorf("hook spec %q: command %q: the program name is empty", s, command)
	}
	if name, _, ok := strings.Cut(argv[0], "="); ok && isIdentifier(name) {
		return Spec{}, fmt.Errorf("hook spec %q: command %q starts with the variable assignment %q, which needs a shell; use env %s ... or sh -c '...'", s, command, argv[0], argv[0])
	}
	return Spec{Raw: s, Filters: filters, Command: command, Argv: argv}, nil
}

// ParseSpecs parses every spec, stopping at the first error.
func ParseSpecs(specs []string) ([]Spec, error) {
	out := make([]Spec, 0, len(specs))
	for _, s := range specs {
		sp, err := ParseSpec(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// looksLikeFilterList reports whether p, the part of a spec before its
// first '=', is meant as a filter list rather than as part of a command.
func looksLikeFilterList(p string) bool {
	if p == "" {
		return true // "=cmd": Serf's way to write "all events"
	}
	for _, item := range strings.Split(p, ",") {
		item = strings.TrimSpace(item)
		if strings.HasPrefix(item, User+":") || strings.HasPrefix(item, Query+":") {
			continue
		}
		for _, c := range item {
			if !(c == '*' || c == '-' || c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// parseFilters parses a filter list; "" means *.
func parseFilters(p string) ([]Filter, error) {
	if p == "" {
		return []Filter{{Event: All}}, nil
	}
	var out []Filter
	for _, item := range strings.Split(p, ",") {
		f, err := parseFilter(item)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFilter(item string) (Filter, error) {
	if item == "" {
		return Filter{}, errors.New("empty event type")
	}
	if strings.TrimSpace(item) != item {
		return Filter{}, fmt.Errorf("event type %q has surrounding spaces", item)
	}
	for _, t := range []string{User, Query} {
		if name, ok := strings.CutPrefix(item, t+":"); ok {
			if name == "" {
				return Filter{}, fmt.Errorf("%q has an empty name; write %s for every %s event", item, t, t)
			}
			if strings.TrimSpace(name) != name {
				return Filter{}, fmt.Errorf("%s name %q has leading or trailing spaces", t, name)
			}
			return Filter{Event: t, Name: name}, nil
		}
	}
	if !knownTypes[item] {
		return Filter{}, fmt.Errorf("unknown event type %q (want member-join, member-leave, member-failed, member-update, member-reap, user, user:NAME, query, query:NAME, pool-change, health-change or *)", item)
	}
	return Filter{Event: item}, nil
}

func isIdentifier(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// validate checks a Spec built by hand rather than by ParseSpec.
func (s Spec) validate() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf("hook spec %q: empty argv", s.Raw)
	}
	if len(s.Filters) == 0 {
		return fmt.Errorf("hook spec %q: no filters", s.Raw)
	}
	for _, f := range s.Filters {
		if !knownTypes[f.Event] || f.Name != "" && f.Event != User && f.Event != Query {
			return fmt.Errorf("hook spec %q: invalid filter %q", s.Raw, f.String())
		}
	}
	if s.Timeout != 0 && s.Timeout < MinTimeout {
		return fmt.Errorf("hook spec %q: timeout %v is below the minimum %v", s.Raw, s.Timeout, MinTimeout)
	}
	return nil
}

// matches reports whether any of the spec's filters selects it.
func (s Spec) matches(it *item) bool {
	for _, f := range s.Filters {
		if f.matches(it) {
			return true
		}
	}
	return false
}

func (f Filter) matches(it *item) bool {
	if f.Event == All {
		return it.serfEvent()
	}
	if f.Event != it.typ {
		return false
	}
	return f.Name == "" || f.Name == it.name
}
