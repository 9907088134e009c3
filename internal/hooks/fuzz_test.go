package hooks

import (
	"strings"
	"testing"

	"github.com/hashicorp/serf/serf"
)

// FuzzParseSpec feeds ParseSpec arbitrary handler specs (they come from the
// config file and flags): it must never panic, every error names the spec,
// and every spec it accepts is valid, keeps Raw, and can be matched against
// events.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"member-join,member-failed=/usr/local/bin/x --opt='a b'",
		"user:deploy=sh -c 'cut -f1 | xargs logger'",
		"=cmd", "/bin/x --channel=ops", "user:=x", "A=1 cmd", "query:load=uptime",
	} {
		f.Add(s)
	}
	events := []*item{
		memberItem("db1"), userItem("deploy"),
		{typ: Query, name: "load", query: &serf.Query{Name: "load"}},
		{typ: PoolChange, shoal: &Event{Type: PoolChange}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSpec(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "hook spec ") {
				t.Fatalf("error does not name the spec: %q", err)
			}
			return
		}
		if spec.Raw != s || len(spec.Argv) == 0 || len(spec.Filters) == 0 {
			t.Fatalf("ParseSpec(%q) = %+v", s, spec)
		}
		if err := spec.validate(); err != nil {
			t.Fatalf("ParseSpec(%q) accepted an invalid spec: %v", s, err)
		}
		for _, fl := range spec.Filters {
			back, err := parseFilter(fl.String())
			if err != nil || back != fl {
				t.Fatalf("filter %+v does not round-trip: %+v, %v", fl, back, err)
			}
		}
		for _, it := range events {
			_ = spec.matches(it)
		}
	})
}
