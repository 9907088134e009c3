package member

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		want string // "" = valid; else a substring of the detail
	}{
		{"db1", ""},
		{"db-1.example.com", ""},
		{"10.0.0.1:7946", ""},
		{"münchen-db", ""},
		{"a b", ""},
		{strings.Repeat("a", 128), ""},
		{"", "name is empty"},
		{strings.Repeat("a", 129), "name is 129 bytes, limit 128"},
		{strings.Repeat("a", 60_000), "name is 60000 bytes, limit 128"},
		{"db\xff", "name is not valid UTF-8 (byte 0xff at byte 2)"},
		{"db\x1b[31m", "name has the character U+001B at byte 2"},
		{"db\n", "U+000A"},
		{"db\x7f", "U+007F"},
		{"db\u0085", "U+0085"},        // C1 (NEL)
		{"db\u009b31m", "U+009B"},     // C1 CSI
		{"db\u202egpj.exe", "U+202E"}, // bidi override
		{"db\u2066x", "U+2066"},       // bidi isolate
		{"db\u200dx", "U+200D"},       // zero-width joiner
		{"db\u2028x", "U+2028"},       // line separator
		{"db\u00a0", "U+00A0"},        // no-break space
		{`db\xff`, "backslash at byte 2"},
		{" db1", "leading or trailing space"},
		{"db1 ", "leading or trailing space"},
	}
	for _, tt := range tests {
		got := CheckName(tt.name)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("CheckName(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if !Printable(got) {
			t.Errorf("CheckName(%q) detail %q is not printable", tt.name, got)
		}
	}
}

func TestCheckTags(t *testing.T) {
	many := map[string]string{}
	for i := range 3000 {
		many[fmt.Sprintf("k%d", i)] = ""
	}
	sixtyFour := map[string]string{}
	for i := range 64 {
		sixtyFour[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name string
		tags map[string]string
		want string
	}{
		{"nil", nil, ""},
		{"shoal's own", map[string]string{"role": "db", "cluster": "main", "sh": "v1;h=p", "maint": "kernel upgrade, back at 3 pm", "dc": "eu-1"}, ""},
		{"64 tags", sixtyFour, ""},
		{"3000 tags", many, "3000 tags, limit 64"},
		{"empty key", map[string]string{"": "x"}, `tag key "": want 1-64 bytes`},
		{"key with space", map[string]string{"a b": "x"}, `tag key "a b"`},
		{"key with ESC", map[string]string{"a\x1b": "x"}, `tag key "a\x1b"`},
		{"key too long", map[string]string{strings.Repeat("k", 65): "x"}, `tag key "kkkk`},
		{"value invalid UTF-8", map[string]string{"dc": "eu\xff"}, "tag dc: value is not valid UTF-8 (byte 0xff at byte 2)"},
		{"value with newline", map[string]string{"dc": "eu\n"}, "tag dc: value has the character U+000A"},
		{"value with C1", map[string]string{"dc": "eu\u009b"}, "U+009B"},
		{"value too long", map[string]string{"dc": strings.Repeat("v", 513)}, "tag dc: value is 513 bytes, limit 512"},
		{"value 512 bytes", map[string]string{"dc": strings.Repeat("v", 512)}, ""},
		{"role with ESC", map[string]string{"role": "db\x1b"}, "tag role: value has"},
		{"cluster with newline", map[string]string{"cluster": "main\n\x1b[31mX"}, `tag cluster "main\n\x1b[31mX": want 1-64 bytes of [A-Za-z0-9._-]`},
		{"cluster invalid UTF-8", map[string]string{"cluster": "c\xff"}, `tag cluster "c\xff"`},
		{"cluster 300 bytes", map[string]string{"cluster": strings.Repeat("c", 300)}, `tag cluster "cccccccccccccccccccccccccccccccccccccccc..."`},
		{"cluster empty", map[string]string{"cluster": ""}, `tag cluster ""`},
		{"cluster with slash", map[string]string{"cluster": "../x"}, `tag cluster "../x"`},
		{"sh has its own parser", map[string]string{"sh": "garbage\xff"}, ""},
		{"first bad key in order", map[string]string{"b": "\n", "a": "\n"}, "tag a:"},
	}
	for _, tt := range tests {
		got := CheckTags(tt.tags)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: CheckTags = %q, want %q", tt.name, got, tt.want)
		}
		if !Printable(got) {
			t.Errorf("%s: detail %q is not printable", tt.name, got)
		}
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"db1", "db1"},
		{"münchen", "münchen"},
		{`a"b`, `a"b`},
		{"", ""},
		{"db\xff", `db\xff`},
		{"main\n\x1b[31mX", `main\n\x1b[31mX`},
		{`db\xff`, `db\\xff`},
		{"db\u202e", `db\u202e`},
		{"a\"\xff", `a\"\xff`},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Escape is bounded, printable and injective over a set of look-alikes,
// long strings included.
func TestEscapeBoundedAndDistinct(t *testing.T) {
	long := strings.Repeat("\xff", 60_000)
	ins := []string{
		"db\xff", `db\xff`, `db\\xff`, "db\\\xff", "db\u00ff", "db\\u00ff",
		long, long + "a", long[:1000], strings.Repeat("a", 600), strings.Repeat("a", 601),
		strings.Repeat("a", 512), strings.Repeat("\U0010FFFF", 200), strings.Repeat("\x00", 200),
	}
	// A printable string that looks like another one's cut form.
	ins = append(ins, Escape(long), Escape(strings.Repeat("a", 600)))
	seen := map[string]string{}
	for _, in := range ins {
		e := Escape(in)
		if len(e) > MaxEscapedLen {
			t.Errorf("Escape(%.20q...) is %d bytes, limit %d", in, len(e), MaxEscapedLen)
		}
		if !utf8.ValidString(e) || !Printable(e) {
			t.Errorf("Escape(%.20q...) = %.40q is not printable", in, e)
		}
		if prev, ok := seen[e]; ok && prev != in {
			t.Errorf("Escape(%.20q...) = Escape(%.20q...) = %.40q", in, prev, e)
		}
		seen[e] = in
	}
	if e := Escape(long); !strings.HasPrefix(e, `\xff\xff`) || !strings.Contains(e, `\...#`) {
		t.Errorf("Escape(60 KB) = %q", e)
	}
}

func TestAdmit(t *testing.T) {
	good := map[string]string{"role": "db", "cluster": "main"}
	m := Admit("db1", good)
	if !m.Problem.OK() || m.Name != "db1" || m.Tags["cluster"] != "main" {
		t.Fatalf("valid member: %+v", m)
	}

	m = Admit("db\xff", map[string]string{"role": "db", "cluster": "c\xff"})
	if m.Problem.Reason != pool.ReasonBadName || m.Name != `db\xff` || m.Tags["cluster"] != `c\xff` || m.Tags["role"] != "db" {
		t.Fatalf("bad name: %+v", m)
	}
	m = Admit("db2", map[string]string{"role": "db", "cluster": "main\n\x1b[31mX"})
	if m.Problem.Reason != pool.ReasonBadTags || m.Name != "db2" || m.Tags["cluster"] != `main\n\x1b[31mX` {
		t.Fatalf("bad cluster: %+v", m)
	}

	// 3000 tags: at most MaxTags kept, shoal's reserved ones among them.
	many := map[string]string{"role": "db", "cluster": "zz", "sh": "x"}
	for i := range 3000 {
		many[fmt.Sprintf("a%04d\x1b", i)] = "\xff"
	}
	m = Admit("db3", many)
	if m.Problem.Reason != pool.ReasonBadTags || len(m.Tags) != MaxTags || m.Tags["role"] != "db" || m.Tags["cluster"] != "zz" || m.Tags["sh"] != "x" {
		t.Fatalf("3000 tags: reason %q, %d tags, role %q cluster %q", m.Problem.Reason, len(m.Tags), m.Tags["role"], m.Tags["cluster"])
	}
	for k, v := range m.Tags {
		if !Printable(k) || !Printable(v) {
			t.Fatalf("tag %q=%q not printable", k, v)
		}
	}
}

func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"main": "main", `db\xff`: `db\xff`, "db\xff": `db\xff`, "a\x1b[31m": `a\x1b[31m`, "münchen": "münchen",
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Safe(strings.Repeat("a", 1000)); len(got) > MaxEscapedLen {
		t.Errorf("Safe(1000 bytes) is %d bytes", len(got))
	}
}

// TestAdmitDecodesHealth: admission decodes a valid member's health tag
// once, for the pool and the API; an invalid member's is never decoded.
func TestAdmitDecodesHealth(t *testing.T) {
	h := tags.Health{State: tags.Passing, ServerID: 4, Port: 3307}
	m := Admit("db1", map[string]string{"role": "db", "sh": tags.Encode(h)})
	if m.Health == nil || *m.Health != h || m.HealthErr != "" {
		t.Errorf("valid tag: %+v %q", m.Health, m.HealthErr)
	}
	if m := Admit("db2", map[string]string{"role": "db", "sh": "v1;h=x"}); m.Health != nil || !strings.Contains(m.HealthErr, `field "h"`) {
		t.Errorf("bad tag: %+v %q", m.Health, m.HealthErr)
	}
	if m := Admit("db3", map[string]string{"role": "db"}); m.Health != nil || m.HealthErr != "" {
		t.Errorf("no tag: %+v %q", m.Health, m.HealthErr)
	}
	if m := Admit("db\xff", map[string]string{"role": "db", "sh": tags.Encode(h)}); m.Health != nil || m.HealthErr != "" {
		t.Errorf("invalid member: %+v %q", m.Health, m.HealthErr)
	}
	g := FromSerf(serf.Member{Name: "db1", Addr: net.IPv4(10, 0, 0, 1), Status: serf.StatusAlive,
		Tags: map[string]string{"role": "db", "sh": tags.Encode(h)}})
	if p := g.Pool(); p.Addr != "10.0.0.1:3307" || p.Health == nil || *p.Health != h || p.Status != pool.StatusAlive {
		t.Errorf("pool member %+v", p)
	}
}
