package svgplot

import (
	"encoding/xml"
	"strings"
	"testing"
)

func wellFormed(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
}

func TestCDF(t *testing.T) {
	if CDF("t", "x", nil) != "" {
		t.Error("CDF of nothing should be empty")
	}
	svg := CDF("a <b>", "seconds", []Series{{"one", []float64{0.1, 0.2, 5}}, {"two & more", []float64{1, 2}}})
	wellFormed(t, svg)
	for _, want := range []string{"a &lt;b&gt;", "one (n=3)", "two &amp; more (n=2)", "<polyline"} {
		if !strings.Contains(svg, want) {
			t.Errorf("CDF lacks %q", want)
		}
	}
}

func TestLines(t *testing.T) {
	if Lines("t", "x", "y", nil) != "" {
		t.Error("Lines of nothing should be empty")
	}
	svg := Lines("rss", "minutes", "MiB", []Line{{Name: "db1", X: []float64{0, 1, 2}, Y: []float64{20, 21, 21}}, {Name: "app1", X: []float64{0, 1}, Y: []float64{30, 31}, Dashed: true}})
	wellFormed(t, svg)
	if strings.Count(svg, "<polyline") != 2 || !strings.Contains(svg, "stroke-dasharray") {
		t.Errorf("want two lines, one dashed:\n%s", svg)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 1}, {0.7, 1}, {1.2, 2}, {2.1, 2.5}, {3, 5}, {7, 10}, {42, 50}} {
		if got := NiceCeil(c.in); got != c.want {
			t.Errorf("NiceCeil(%g) = %g, want %g", c.in, got, c.want)
		}
	}
}
