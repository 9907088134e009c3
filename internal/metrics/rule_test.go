package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFamiliesDeclaredHere keeps the package's rule: outside this package,
// no non-test Go file of the program (cmd, internal, pkg; test/ holds test
// harnesses) calls a Prometheus constructor
// (prometheus.New*, MustNew*; NewRegistry aside) or imports promauto, and
// only package gossip uses go-metrics.
func TestFamiliesDeclaredHere(t *testing.T) {
	const (
		promPkg   = "github.com/prometheus/client_golang/prometheus"
		goMetrics = "github.com/hashicorp/go-metrics"
	)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(".")
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			top, _, _ := strings.Cut(rel, string(filepath.Separator))
			if path == here || (path != root && (d.Name() == "testdata" || (top != "cmd" && top != "internal" && top != "pkg"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		prom := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == promPkg:
				prom = "prometheus"
				if imp.Name != nil {
					prom = imp.Name.Name
				}
			case strings.HasPrefix(p, promPkg+"/promauto"):
				t.Errorf("%s imports promauto: families are declared in package metrics, on a registry passed in", rel)
			case p == goMetrics && filepath.Dir(rel) != filepath.Join("internal", "gossip"):
				t.Errorf("%s uses go-metrics: only package gossip counts in memberlist's key space (see the package doc)", rel)
			}
		}
		if prom == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == prom &&
				(strings.HasPrefix(sel.Sel.Name, "New") || strings.HasPrefix(sel.Sel.Name, "MustNew")) && sel.Sel.Name != "NewRegistry" {
				t.Errorf("%s calls prometheus.%s: declare the family in package metrics and hand it values from here", rel, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under %s: the walk is broken", files, root)
	}
}
