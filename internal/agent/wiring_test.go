package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxAgentFields bounds the fields of Agent: the agent builds its parts
// and connects them; state with a policy belongs in a part (a package of
// its own, or a type with its own lock), not in another field here. The
// writer term's part (issue 26) is meant to fit under it.
const maxAgentFields = 15

// partDirs are the directories of the agent's parts, this package's own
// included: every mutex in them says what it guards.
var partDirs = []string{".", "leave", "publish", "maint", "hookevent", "../term", "../fencing"}

// TestAgentIsWiring: Agent has at most maxAgentFields fields and at most
// one mutex; every mutex of the agent's parts (Agent's too) has a comment
// "guards: a, b" naming exactly the fields of its struct it guards.
func TestAgentIsWiring(t *testing.T) {
	structs := map[string]*ast.StructType{}
	for _, dir := range partDirs {
		for name, st := range parseStructs(t, dir) {
			structs[name] = st
			checkMutexes(t, name, st)
		}
	}
	agent := structs["./Agent"]
	if agent == nil {
		t.Fatal("no type Agent in package agent")
	}
	fields, mutexes := 0, 0
	for _, f := range agent.Fields.List {
		n := max(len(f.Names), 1) // an embedded field is one
		fields += n
		if isMutex(f.Type) {
			mutexes += n
		}
	}
	if fields > maxAgentFields {
		t.Errorf("Agent has %d fields, want at most %d: group state into parts (a package or a type with its own lock) and give Agent the part", fields, maxAgentFields)
	}
	if mutexes > 1 {
		t.Errorf("Agent has %d mutexes, want at most 1: each part's state has its part's own lock", mutexes)
	}
}

// parseStructs returns the struct types of the package in dir (test files
// aside), by "dir/Name".
func parseStructs(t *testing.T, dir string) map[string]*ast.StructType {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ast.StructType{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					out[dir+"/"+ts.Name.Name] = st
				}
			}
			return true
		})
	}
	return out
}

var guardsRe = regexp.MustCompile(`guards:\s*([^.\n]*)`)

// checkMutexes checks that every mutex field of st has a comment naming
// what it guards: "guards: a, b", every name a field of st that is not a
// mutex, and no field guarded by two mutexes.
func checkMutexes(t *testing.T, typ string, st *ast.StructType) {
	t.Helper()
	fields := map[string]bool{}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			fields[n.Name] = !isMutex(f.Type)
		}
	}
	guardedBy := map[string]string{}
	for _, f := range st.Fields.List {
		if !isMutex(f.Type) {
			continue
		}
		mu := fieldName(f)
		m := guardsRe.FindStringSubmatch(f.Doc.Text() + f.Comment.Text())
		if m == nil {
			t.Errorf("%s.%s: a mutex without a comment saying \"guards: <fields>\"", typ, mu)
			continue
		}
		names := strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' })
		if len(names) == 0 {
			t.Errorf("%s.%s guards nothing it names", typ, mu)
		}
		for _, g := range names {
			if g == "and" {
				continue
			}
			if !fields[g] {
				t.Errorf("%s.%s guards %q, which is not a field of %s", typ, mu, g, typ)
			}
			if other, ok := guardedBy[g]; ok {
				t.Errorf("%s.%s is guarded by both %s and %s", typ, g, other, mu)
			}
			guardedBy[g] = mu
		}
	}
}

func fieldName(f *ast.Field) string {
	if len(f.Names) > 0 {
		return f.Names[0].Name
	}
	return "(embedded)"
}

// isMutex reports whether e is sync.Mutex or sync.RWMutex, or a pointer
// to one.
func isMutex(e ast.Expr) bool {
	if p, ok := e.(*ast.StarExpr); ok {
		e = p.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex")
}
