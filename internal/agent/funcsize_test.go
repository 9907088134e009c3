package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// maxFuncLines bounds the functions of package agent (test files aside):
// the package wires parts together; a function that grows past this is
// doing a part's work and belongs in that part's package.
const maxFuncLines = 80

// Every function of the package, methods and function literals' enclosing
// declarations included, is shorter than maxFuncLines lines.
func TestFunctionsStayShort(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			checked++
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if lines >= maxFuncLines {
				t.Errorf("%s: %s is %d lines, want < %d: split it", fset.Position(fd.Pos()), fd.Name.Name, lines, maxFuncLines)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d functions: is the test running in the package directory?", checked)
	}
}
