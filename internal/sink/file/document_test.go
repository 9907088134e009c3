package file

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

func TestRoleList(t *testing.T) {
	got := roleList([]pool.Node{{Name: "b", Addr: "10.0.0.2:3306"}, {Name: "a", Addr: "10.0.0.10:3306"},
		{Name: "c"}, {Name: "d", Addr: "10.0.0.2:3306"}})
	if want := []string{"10.0.0.10:3306", "10.0.0.2:3306"}; !slices.Equal(got, want) {
		t.Errorf("roleList = %q, want %q", got, want)
	}
	if got := roleList(nil); got == nil || len(got) != 0 {
		t.Errorf("roleList(nil) = %#v", got)
	}
}

func TestHold(t *testing.T) {
	tests := []struct {
		list, prev, free, kept, held []string // free: removals not withheld
	}{
		{nil, nil, nil, nil, nil},
		{[]string{"a", "c"}, []string{"a", "c"}, nil, []string{"a", "c"}, nil},
		{[]string{"a", "c"}, nil, nil, []string{"a", "c"}, nil},
		{[]string{"a"}, []string{"a", "b"}, nil, []string{"a", "b"}, []string{"b"}},
		{nil, []string{"b", "a"}, nil, []string{"a", "b"}, []string{"b", "a"}},
		{[]string{"c"}, []string{"a", "b"}, nil, []string{"a", "b", "c"}, []string{"a", "b"}},
		{[]string{"a"}, []string{"a", "b"}, []string{"b"}, []string{"a"}, nil},
		{[]string{"c"}, []string{"a", "b"}, []string{"a"}, []string{"b", "c"}, []string{"b"}},
	}
	for _, tt := range tests {
		kept, held := hold(tt.list, tt.prev, func(a string) bool { return !slices.Contains(tt.free, a) })
		if !slices.Equal(kept, tt.kept) || !slices.Equal(held, tt.held) {
			t.Errorf("hold(%q, %q, free %q) = %q, %q; want %q, %q", tt.list, tt.prev, tt.free, kept, held, tt.kept, tt.held)
		}
	}
}

func TestFormatParseList(t *testing.T) {
	if got := formatList(nil); got == nil || len(got) != 0 {
		t.Errorf("formatList(nil) = %#v, want zero bytes", got)
	}
	addrs := []string{"10.0.0.1:3306", "[::1]:3306"}
	data := formatList(addrs)
	if string(data) != "10.0.0.1:3306\n[::1]:3306\n" {
		t.Errorf("formatList = %q", data)
	}
	if got := parseList(data); !slices.Equal(got, addrs) {
		t.Errorf("parseList = %q", got)
	}
	if got := parseList([]byte(" a:1 \n\n\tb:2")); !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("parseList of a hand-edited file = %q", got)
	}
}

func TestContentKeyIgnoresUpdatedAt(t *testing.T) {
	p := testPool(cluster("main", []string{"db1"}, []string{"db2"}, out("db3", pool.ReasonLag, "5s behind")))
	d := newDocument(p, "db1", false, nil)
	key := contentKey(d)
	d.UpdatedAt = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	data := encode(d)
	if bytes.Equal(data, key) || !strings.Contains(string(data), `"updated_at": "2025-01-02T03:04:05.000000006Z"`) {
		t.Errorf("encoded:\n%s", data)
	}
	if got, ok := fileKey(data); !ok || !bytes.Equal(got, key) {
		t.Errorf("fileKey = %s, %v; want %s", got, ok, key)
	}
	if _, ok := fileKey([]byte(`{"version": 1, "clusters": [`)); ok {
		t.Error("fileKey accepted a truncated file")
	}
}

func TestNameOfAndListName(t *testing.T) {
	c := cluster("main", []string{"db1"}, nil, out("db3", pool.ReasonLeft, ""))
	if got := nameOf(&c, addr("db3")); got != "db3" {
		t.Errorf("nameOf out node = %q", got)
	}
	if got := nameOf(&c, "10.9.9.9:3306"); got != "10.9.9.9:3306" {
		t.Errorf("nameOf unknown = %q", got)
	}
}
