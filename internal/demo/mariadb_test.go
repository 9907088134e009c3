package demo

import "testing"

func TestGTIDCovers(t *testing.T) {
	for _, c := range []struct {
		have, want string
		ok         bool
	}{
		{"0-1-10", "0-1-10", true},
		{"0-2-11", "0-1-10", true},
		{"0-1-9", "0-1-10", false},
		{"", "0-1-1", false},
		{"0-1-5", "", true},
		{"0-1-10,1-3-4", "1-3-4,0-2-10", true},
		{"0-1-10,1-3-3", "1-3-4,0-2-10", false},
	} {
		if got := gtidCovers(c.have, c.want); got != c.ok {
			t.Errorf("gtidCovers(%q, %q) = %v, want %v", c.have, c.want, got, c.ok)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{"db1": "db1", "a\x1b[31mb": `"a\x1b[31mb"`, "x\u202ey": `"x\u202ey"`, "\xff": `"\xff"`} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %s, want %s", in, got, want)
		}
	}
}
