//go:build bench

package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/test/e2e"
)

// Series is one line of a CDF plot.
type Series struct {
	Name   string
	Values []float64 // seconds
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// WriteCDF draws the empirical CDFs of the series as an SVG in
// docs/benchmarks/<name>.svg (log-scaled x axis when the values span more
// than a factor of 20) and returns the markdown that embeds it.
func WriteCDF(t testing.TB, name, title, xlabel string, series []Series) string {
	t.Helper()
	const W, H, L, R, T, B = 720.0, 380.0, 60.0, 170.0, 34.0, 46.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.Values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return ""
	}
	logx := hi/lo > 20
	var x func(float64) float64
	var ticks []float64
	if logx {
		a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		x = func(v float64) float64 { return L + (math.Log10(math.Max(v, lo))-a)/(b-a)*(W-L-R) }
		for e := a; e <= b; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		top := niceCeil(hi)
		x = func(v float64) float64 { return L + v/top*(W-L-R) }
		for i := 0; i <= 5; i++ {
			ticks = append(ticks, top*float64(i)/5)
		}
	}
	y := func(p float64) float64 { return H - B - p*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", L, esc(title))
	for _, tk := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			x(tk), y(0), x(tk), y(1), x(tk), y(0)+16, fmtTick(tk))
	}
	for _, p := range []float64{0, 0.5, 0.9, 1} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n",
			L, y(p), W-R, y(p), L-6, y(p)+4, p*100)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (L+W-R)/2, H-8, esc(xlabel))
	for i, s := range series {
		v := append([]float64(nil), s.Values...)
		sort.Float64s(v)
		col := palette[i%len(palette)]
		if len(v) > 0 {
			var pts []string
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v[0]), y(0)))
			for j, val := range v {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(val), y(float64(j)/float64(len(v)))), fmt.Sprintf("%.1f,%.1f", x(val), y(float64(j+1)/float64(len(v)))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		}
		ly := T + 14 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/><text x="%.1f" y="%.1f">%s (n=%d)</text>`+"\n",
			W-R+10, ly, W-R+30, ly, col, W-R+34, ly+4, esc(s.Name), len(v))
	}
	b.WriteString("</svg>\n")
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "benchmarks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".svg"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("![%s](benchmarks/%s.svg)\n", title, name)
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%g ms", v*1000)
	default:
		return fmt.Sprintf("%g s", v)
	}
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
