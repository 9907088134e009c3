package hooks

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/serf/serf"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in      string
		filters []Filter
		argv    []string
	}{
		// The examples of Serf's event handler documentation.
		{"foo.sh", []Filter{{Event: All}}, []string{"foo.sh"}},
		{"member-join=foo.sh", []Filter{{Event: MemberJoin}}, []string{"foo.sh"}},
		{"member-join,member-leave=foo.sh", []Filter{{Event: MemberJoin}, {Event: MemberLeave}}, []string{"foo.sh"}},
		{"user=foo.sh", []Filter{{Event: User}}, []string{"foo.sh"}},
		{"user:deploy=foo.sh", []Filter{{Event: User, Name: "deploy"}}, []string{"foo.sh"}},
		{"query=foo.sh", []Filter{{Event: Query}}, []string{"foo.sh"}},
		{"query:load=uptime", []Filter{{Event: Query, Name: "load"}}, []string{"uptime"}},
		// More of Serf's syntax.
		{"=foo.sh", []Filter{{Event: All}}, []string{"foo.sh"}},
		{"*=foo.sh", []Filter{{Event: All}}, []string{"foo.sh"}},
		{"member-failed,member-update,member-reap=/x", []Filter{{Event: MemberFailed}, {Event: MemberUpdate}, {Event: MemberReap}}, []string{"/x"}},
		{"user:deploy,query:ping,user=/x", []Filter{{Event: User, Name: "deploy"}, {Event: Query, Name: "ping"}, {Event: User}}, []string{"/x"}},
		{"user:a b=/x", []Filter{{Event: User, Name: "a b"}}, []string{"/x"}},
		{"user:a:b=/x", []Filter{{Event: User, Name: "a:b"}}, []string{"/x"}},
		// The split is at the first '=': the command keeps the others.
		{"member-join=/bin/notify --channel=ops", []Filter{{Event: MemberJoin}}, []string{"/bin/notify", "--channel=ops"}},
		// shoal's events.
		{"pool-change=/usr/local/bin/reroute", []Filter{{Event: PoolChange}}, []string{"/usr/local/bin/reroute"}},
		{"health-change,member-failed=/x", []Filter{{Event: HealthChange}, {Event: MemberFailed}}, []string{"/x"}},
		// No filter, '=' in the command: Serf rejects these, shoal runs them.
		{"/bin/notify --channel=ops", []Filter{{Event: All}}, []string{"/bin/notify", "--channel=ops"}},
		{"notify --channel=ops", []Filter{{Event: All}}, []string{"notify", "--channel=ops"}},
		{"./bin/x=y", []Filter{{Event: All}}, []string{"./bin/x=y"}},
		{"env FOO=1 /bin/x", []Filter{{Event: All}}, []string{"env", "FOO=1", "/bin/x"}},
		// Quoting.
		{`query:ping=sh -c 'echo pong; cat'`, []Filter{{Event: Query, Name: "ping"}}, []string{"sh", "-c", "echo pong; cat"}},
		{`member-join="/opt/my hooks/join" --x 'a b'`, []Filter{{Event: MemberJoin}}, []string{"/opt/my hooks/join", "--x", "a b"}},
	}
	for _, tt := range tests {
		got, err := ParseSpec(tt.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got.Filters, tt.filters) || !slices.Equal(got.Argv, tt.argv) || got.Raw != tt.in {
			t.Errorf("ParseSpec(%q) = %+v, want filters %v argv %q", tt.in, got, tt.filters, tt.argv)
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the error
	}{
		{"", []string{"empty"}},
		{"  ", []string{"empty"}},
		{"member-join=", []string{`"member-join="`, "no command"}},
		{"=", []string{"no command"}},
		{"member-join=   ", []string{"no command"}},
		{`""`, []string{`command "\"\""`, "program name is empty"}}, // found by FuzzParseSpec
		{`user='' /bin/x`, []string{"program name is empty"}},
		{"member-jion=/x", []string{`"member-jion=/x"`, `unknown event type "member-jion"`}},
		{"Member-Join=/x", []string{`unknown event type "Member-Join"`}},
		{"member-join,member-lave=/x", []string{`filter "member-join,member-lave"`, `unknown event type "member-lave"`}},
		{"members=/x", []string{`unknown event type "members"`}},
		{"usr:deploy=/x", []string{`unknown event type "usr:deploy"`}},
		{"User:deploy=/x", []string{`unknown event type "User:deploy"`}},
		{"FOO=bar /x", []string{`unknown event type "FOO"`}},
		{"member-join,,user=/x", []string{"empty event type"}},
		{"member-join,=/x", []string{"empty event type"}},
		{"member-join, user=/x", []string{`" user"`, "surrounding spaces"}},
		{"user:=/x", []string{`"user:" has an empty name`}},
		{"query:=/x", []string{`"query:" has an empty name`}},
		{"user: deploy=/x", []string{`name " deploy"`}},
		{"member-join=/x 'oops", []string{`command "/x 'oops"`, "unterminated single quote"}},
		{"member-join=/x | logger", []string{`unquoted '|'`, "sh -c"}},
		{"member-join=/x $HOME", []string{`unquoted '$'`}},
		{"member-join=FOO=1 /x", []string{"variable assignment", "env FOO=1"}},
	}
	for _, tt := range tests {
		got, err := ParseSpec(tt.in)
		if err == nil {
			t.Errorf("ParseSpec(%q) = %+v, want an error", tt.in, got)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseSpec(%q) error %q, want it to contain %q", tt.in, err, w)
			}
		}
	}
}

func TestParseSpecs(t *testing.T) {
	specs, err := ParseSpecs([]string{"member-join=/a", "/b"})
	if err != nil || len(specs) != 2 || specs[1].Argv[0] != "/b" {
		t.Fatalf("ParseSpecs = %+v, %v", specs, err)
	}
	if _, err := ParseSpecs([]string{"/a", "bogus=/b"}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("ParseSpecs with a bad spec: %v", err)
	}
}

func TestFilterMatches(t *testing.T) {
	join, _ := newSerfItem(serf.MemberEvent{Type: serf.EventMemberJoin})
	reap, _ := newSerfItem(serf.MemberEvent{Type: serf.EventMemberReap})
	deploy, _ := newSerfItem(serf.UserEvent{Name: "deploy"})
	other, _ := newSerfItem(serf.UserEvent{Name: "other"})
	ping, _ := newSerfItem(&serf.Query{Name: "ping"})
	pool, _ := newShoalItem(Event{Type: PoolChange}, timeZero)
	health, _ := newShoalItem(Event{Type: HealthChange}, timeZero)
	all := []*item{join, reap, deploy, other, ping, pool, health}
	tests := []struct {
		spec string
		want []*item
	}{
		{"/x", []*item{join, reap, deploy, other, ping}},
		{"*=/x", []*item{join, reap, deploy, other, ping}},
		{"member-join=/x", []*item{join}},
		{"member-reap,member-join=/x", []*item{join, reap}},
		{"user=/x", []*item{deploy, other}},
		{"user:deploy=/x", []*item{deploy}},
		{"query=/x", []*item{ping}},
		{"query:pong=/x", nil},
		{"pool-change=/x", []*item{pool}},
		{"health-change,*=/x", []*item{join, reap, deploy, other, ping, health}},
	}
	for _, tt := range tests {
		s, err := ParseSpec(tt.spec)
		if err != nil {
			t.Fatal(err)
		}
		var got []*item
		for _, it := range all {
			if s.matches(it) {
				got = append(got, it)
			}
		}
		if !slices.Equal(got, tt.want) {
			var names []string
			for _, it := range got {
				names = append(names, it.label())
			}
			t.Errorf("%s matches %v", tt.spec, names)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	bad := []Spec{
		{Raw: "no argv", Filters: []Filter{{Event: All}}},
		{Raw: "no filters", Argv: []string{"/x"}},
		{Raw: "bad filter", Argv: []string{"/x"}, Filters: []Filter{{Event: "nope"}}},
		{Raw: "name on member", Argv: []string{"/x"}, Filters: []Filter{{Event: MemberJoin, Name: "x"}}},
		{Raw: "short timeout", Argv: []string{"/x"}, Filters: []Filter{{Event: All}}, Timeout: MinTimeout / 2},
	}
	for _, s := range bad {
		if err := s.validate(); err == nil {
			t.Errorf("spec %q validated", s.Raw)
		}
	}
}

// The specs shown in doc.go must parse.
func TestDocExamplesParse(t *testing.T) {
	for _, s := range []string{
		"/usr/local/bin/on-any-event",
		"member-join=/usr/local/bin/on-join",
		"member-failed,member-leave=/usr/local/bin/x",
		"user=/usr/local/bin/x",
		"user:deploy=/usr/local/bin/deploy",
		"query=/usr/local/bin/x",
		"query:load=uptime",
		"pool-change=/usr/local/bin/reroute",
		"health-change=/usr/local/bin/page",
		"member-join=sh -c 'cut -f1 | xargs -n1 logger -t joined'",
		"=/usr/local/bin/x",
		"/bin/x --opt=1",
	} {
		if _, err := ParseSpec(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestRedaction: a spec keeps its filter and program and loses its
// arguments, the way GET /v1/hooks and serf's stats show it without the
// token; what does not parse is hidden whole.
func TestRedaction(t *testing.T) {
	for _, tc := range []struct{ raw, spec, command string }{
		{"user:deploy=/bin/notify --key=s3cret", "user:deploy=/bin/notify …", "/bin/notify …"},
		{"member-join,member-leave=env TOKEN=s3cret /bin/x", "member-join,member-leave=env …", "env …"},
		{"/usr/local/bin/notify --channel=ops", "/usr/local/bin/notify …", "/usr/local/bin/notify …"},
		{"/bin/true", "/bin/true", "/bin/true"},
		{"pool-change=/bin/true", "pool-change=/bin/true", "/bin/true"},
		{"bogus-event=/bin/x --key=s3cret", Redacted, ""},
		{"", Redacted, ""},
	} {
		if got := RedactSpec(tc.raw); got != tc.spec {
			t.Errorf("RedactSpec(%q) = %q, want %q", tc.raw, got, tc.spec)
		}
		sp, err := ParseSpec(tc.raw)
		if err != nil {
			continue
		}
		if got := sp.RedactedCommand(); got != tc.command {
			t.Errorf("RedactedCommand(%q) = %q, want %q", tc.raw, got, tc.command)
		}
		if strings.Contains(RedactSpec(tc.raw), "s3cret") {
			t.Errorf("RedactSpec(%q) shows the secret", tc.raw)
		}
	}
	if got := (Spec{}).RedactedCommand(); got != Redacted {
		t.Errorf("RedactedCommand of no argv = %q, want %q", got, Redacted)
	}
}
