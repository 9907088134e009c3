// Package svgplot draws the small SVG plots of the generated reports
// (docs/benchmarks.md, docs/soak.md): empirical CDFs and lines over time,
// with no dependency beyond the standard library.
package svgplot

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Series is one line of a CDF plot.
type Series struct {
	Name   string
	Values []float64 // seconds
}

// Line is one line of a plot over x (points in x order).
type Line struct {
	Name string
	X, Y []float64
	// Dashed draws the line dashed (e.g. a second quantity).
	Dashed bool
	// Color is the line's colour; "" takes the palette's next.
	Color string
}

// Palette is the colour of the i-th series (mod its length).
var Palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// frame is the plot area of a W x H drawing with margins L, R, T, B.
type frame struct{ W, H, L, R, T, B float64 }

var std = frame{720, 380, 60, 170, 34, 46}

func (f frame) header(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", f.W, f.H)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", f.L, Esc(title))
}

func (f frame) legend(b *strings.Builder, i int, col, label string, dashed bool) {
	ly := f.T + 14 + float64(i)*18
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="6,3"`
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/><text x="%.1f" y="%.1f">%s</text>`+"\n",
		f.W-f.R+10, ly, f.W-f.R+30, ly, col, dash, f.W-f.R+34, ly+4, Esc(label))
}

// CDF draws the empirical CDFs of the series (log-scaled x axis when the
// values span more than a factor of 20); "" when there is no positive value.
func CDF(title, xlabel string, series []Series) string {
	f := std
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
		x = func(v float64) float64 { return f.L + (math.Log10(math.Max(v, lo))-a)/(b-a)*(f.W-f.L-f.R) }
		for e := a; e <= b; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		top := NiceCeil(hi)
		x = func(v float64) float64 { return f.L + v/top*(f.W-f.L-f.R) }
		for i := 0; i <= 5; i++ {
			ticks = append(ticks, top*float64(i)/5)
		}
	}
	y := func(p float64) float64 { return f.H - f.B - p*(f.H-f.T-f.B) }
	var b strings.Builder
	f.header(&b, title)
	for _, tk := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			x(tk), y(0), x(tk), y(1), x(tk), y(0)+16, FmtSeconds(tk))
	}
	for _, p := range []float64{0, 0.5, 0.9, 1} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n",
			f.L, y(p), f.W-f.R, y(p), f.L-6, y(p)+4, p*100)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (f.L+f.W-f.R)/2, f.H-8, Esc(xlabel))
	for i, s := range series {
		v := append([]float64(nil), s.Values...)
		sort.Float64s(v)
		col := Palette[i%len(Palette)]
		if len(v) > 0 {
			var pts []string
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v[0]), y(0)))
			for j, val := range v {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(val), y(float64(j)/float64(len(v)))), fmt.Sprintf("%.1f,%.1f", x(val), y(float64(j+1)/float64(len(v)))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		}
		f.legend(&b, i, col, fmt.Sprintf("%s (n=%d)", s.Name, len(v)), false)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// Lines draws lines over a shared x axis from 0, with y from 0 to the
// largest value; "" when there is no point.
func Lines(title, xlabel, ylabel string, lines []Line) string {
	f := std
	xmax, ymax := 0.0, 0.0
	n := 0
	for _, l := range lines {
		for i := range l.X {
			xmax, ymax = math.Max(xmax, l.X[i]), math.Max(ymax, l.Y[i])
			n++
		}
	}
	if n == 0 {
		return ""
	}
	xtop, ytop := NiceCeil(xmax), NiceCeil(ymax)
	x := func(v float64) float64 { return f.L + v/xtop*(f.W-f.L-f.R) }
	y := func(v float64) float64 { return f.H - f.B - v/ytop*(f.H-f.T-f.B) }
	var b strings.Builder
	f.header(&b, title)
	for i := 0; i <= 5; i++ {
		tx, ty := xtop*float64(i)/5, ytop*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n",
			x(tx), y(0), x(tx), y(ytop), x(tx), y(0)+16, tx)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n",
			f.L, y(ty), f.W-f.R, y(ty), f.L-6, y(ty)+4, ty)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (f.L+f.W-f.R)/2, f.H-8, Esc(xlabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n", (f.T+f.H-f.B)/2, (f.T+f.H-f.B)/2, Esc(ylabel))
	for i, l := range lines {
		col := Palette[i%len(Palette)]
		if l.Color != "" {
			col = l.Color
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6,3"`
		}
		var pts []string
		for j := range l.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(l.X[j]), y(l.Y[j])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
		f.legend(&b, i, col, l.Name, l.Dashed)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// NiceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten (1 for v <= 0).
func NiceCeil(v float64) float64 {
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

// FmtSeconds labels a tick in seconds ("250 ms", "2 s").
func FmtSeconds(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%g ms", v*1000)
	default:
		return fmt.Sprintf("%g s", v)
	}
}

// Esc escapes text for SVG.
func Esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
