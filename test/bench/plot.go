//go:build bench

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoaldb/shoal/internal/testutil/svgplot"
	"github.com/shoaldb/shoal/test/e2e"
)

// Series is one line of a CDF plot.
type Series = svgplot.Series

// WriteCDF draws the empirical CDFs of the series as an SVG in
// docs/benchmarks/<name>.svg (log-scaled x axis when the values span more
// than a factor of 20) and returns the markdown that embeds it.
func WriteCDF(t testing.TB, name, title, xlabel string, series []Series) string {
	t.Helper()
	svg := svgplot.CDF(title, xlabel, series)
	if svg == "" {
		return ""
	}
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "benchmarks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".svg"), []byte(svg), 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("![%s](benchmarks/%s.svg)\n", title, name)
}
