package tags

import (
	"strings"
	"testing"
)

func TestParsePosition(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "0:12", want: "0:12"},
		{in: "1:5,0:7", want: "0:7,1:5"},
		{in: "4294967295:18446744073709551615", want: "4294967295:18446744073709551615"},
		{in: "", err: "empty position"},
		{in: "0:1,1:2,2:3", err: "more than 2 GTID domains"},
		{in: "0-1-12", err: "want domain:seq"},
		{in: "x:1", err: "domain id"},
		{in: "4294967296:1", err: "domain id"},
		{in: "0:01", err: "sequence number"},
		{in: "0:-1", err: "sequence number"},
		{in: "0:18446744073709551616", err: "sequence number"},
		{in: "0:1,0:2", err: "domain given twice"},
	} {
		p, err := ParsePosition(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParsePosition(%q) = %v, %v; want error %q", c.in, p, err, c.err)
			}
		case err != nil || p.String() != c.want:
			t.Errorf("ParsePosition(%q) = %q, %v; want %q", c.in, p, err, c.want)
		}
	}
}

func TestPositionBehind(t *testing.T) {
	pos := func(s string) Position {
		p, err := ParsePosition(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		replica, writer string
		want            uint64
	}{
		{"0:10", "0:10", 0},
		{"0:10", "0:15", 5},
		{"0:20", "0:15", 0},         // ahead counts 0
		{"0:10", "0:15,1:3", 8},     // a domain the replica lacks: all of it
		{"0:10,1:9", "0:15,1:3", 5}, // ahead in one, behind in the other
		{"0:10,1:9", "0:10", 0},     // extra domains on the replica
		{"5:18446744073709551615", "5:18446744073709551615", 0},
	} {
		if got := pos(c.replica).Behind(pos(c.writer)); got != c.want {
			t.Errorf("%s behind %s = %d, want %d", c.replica, c.writer, got, c.want)
		}
	}
	if (Position{}).Known() || !pos("0:1").Known() {
		t.Error("Known")
	}
}
