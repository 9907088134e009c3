package config

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/tags"
)

// componentSections finds, by reflection, the fields of Config (and of
// config's own section types, such as Sinks) whose type is a component's
// settings type: a struct of another internal package.
func componentSections(t reflect.Type, path string, out map[string]reflect.Type) {
	own := reflect.TypeOf(Config{}).PkgPath()
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if !f.IsExported() || ft.Kind() != reflect.Struct {
			continue
		}
		switch {
		case ft.PkgPath() == own:
			componentSections(ft, path+f.Name+".", out)
		case strings.HasPrefix(ft.PkgPath(), "github.com/shoaldb/shoal/internal/"):
			out[path+f.Name] = ft
		}
	}
}

// Each component section of Default() is the component's own default:
// config writes no default of its own for a component setting.
func TestDefaultSectionsAreTheComponents(t *testing.T) {
	d := Default()
	want := map[string]any{
		"MySQL":         probe.DefaultSettings(),
		"Pool":          pool.DefaultSettings(),
		"Gossip":        gossip.DefaultTuning(),
		"Hooks":         hooks.DefaultSettings(),
		"History":       history.DefaultConfig(),
		"Consensus":     consensus.DefaultSettings(),
		"Sinks.File":    d.Sinks.File, // off until configured: zero
		"Sinks.HAProxy": d.Sinks.HAProxy,
	}
	got := map[string]reflect.Type{}
	componentSections(reflect.TypeOf(*d), "", got)
	for name := range got {
		w, ok := want[name]
		if !ok {
			t.Errorf("component section %s: the test does not know its component's default; add it", name)
			continue
		}
		v := reflect.ValueOf(*d)
		for _, f := range strings.Split(name, ".") {
			v = v.FieldByName(f)
		}
		if !reflect.DeepEqual(v.Interface(), w) {
			t.Errorf("Default().%s = %+v, want the component's default %+v", name, v.Interface(), w)
		}
	}
	if !reflect.ValueOf(d.Sinks).IsZero() {
		t.Errorf("Default().Sinks = %+v: a sink is off until configured", d.Sinks)
	}
	if len(got) != len(want) {
		t.Errorf("component sections %v, want %d", got, len(want))
	}
}

// config defines no default or limit of a component setting: in config's
// own code no component setting (c.MySQL.Timeout, c.Sinks.File.Interval)
// is compared by order (a limit: each component checks its settings, and
// Validate calls that check) or assigned a literal, and no component
// settings type is written as a literal with values (a default: each
// component's Default* gives it).
func TestNoComponentDefaultOrLimitInConfig(t *testing.T) {
	sections := map[string]reflect.Type{}
	componentSections(reflect.TypeOf(Config{}), "", sections)
	fieldNames := map[string]bool{} // MySQL, File, ...
	typeNames := map[string]bool{}  // probe.Settings, ...
	for path, typ := range sections {
		fieldNames[path[strings.LastIndexByte(path, '.')+1:]] = true
		pkg := typ.PkgPath()
		typeNames[pkg[strings.LastIndexByte(pkg, '/')+1:]+"."+typ.Name()] = true
	}
	isSection := func(e ast.Expr) bool { // x.MySQL, x.Sinks.File
		s, ok := e.(*ast.SelectorExpr)
		return ok && fieldNames[s.Sel.Name]
	}
	// aliases are the names that hold a section in a file: m := c.MySQL,
	// or a parameter or receiver of a component settings type.
	var aliases map[string]bool
	isSetting := func(e ast.Expr) bool { // x.MySQL.Timeout, m.Timeout
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		id, ok := s.X.(*ast.Ident)
		return isSection(s.X) || ok && aliases[id.Name]
	}
	hasLiteral := func(e ast.Expr) (found bool) {
		ast.Inspect(e, func(n ast.Node) bool {
			if _, ok := n.(*ast.BasicLit); ok {
				found = true
			}
			return !found
		})
		return found
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{} // local name → package name
		for _, im := range f.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			pkg := p[strings.LastIndexByte(p, '/')+1:]
			local := pkg
			if im.Name != nil {
				local = im.Name.Name
			}
			imports[local] = pkg
		}
		isComponentType := func(e ast.Expr) bool {
			s, ok := e.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			x, ok := s.X.(*ast.Ident)
			return ok && typeNames[imports[x.Name]+"."+s.Sel.Name]
		}
		aliases = map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, r := range n.Rhs {
					if id, ok := n.Lhs[min(i, len(n.Lhs)-1)].(*ast.Ident); ok && isSection(r) {
						aliases[id.Name] = true
					}
				}
			case *ast.Field:
				if isComponentType(n.Type) {
					for _, id := range n.Names {
						aliases[id.Name] = true
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				switch n.Op {
				case token.LSS, token.LEQ, token.GTR, token.GEQ:
					if isSetting(n.X) || isSetting(n.Y) {
						t.Errorf("%s: a component setting compared in config (a limit belongs to the component's check)", fset.Position(n.Pos()))
					}
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if isSetting(l) && i < len(n.Rhs) && hasLiteral(n.Rhs[i]) {
						t.Errorf("%s: a component setting given a literal in config (a default belongs to the component)", fset.Position(n.Pos()))
					}
				}
			case *ast.CompositeLit:
				if isComponentType(n.Type) && len(n.Elts) > 0 {
					t.Errorf("%s: a component settings literal in config (its defaults belong to the component)", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// Every component section's errors name the key, its flag when it has
// one, and the file and line the value was set on.
func TestSectionErrorsNameKeyAndLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"mysql:\n  addr: 127.0.0.1:3306\n  timeout: 20s\n", `line 3: mysql.timeout (--mysql-timeout) "20s": must be from 10ms to 10s`},
		{"mysql:\n  interval: 2m\n", `line 2: mysql.interval (--mysql-interval) "2m0s": must be from 50ms to 1m`},
		{"mysql:\n  fall: 101\n", `line 2: mysql.fall (--mysql-fall) "101": must be from 1 to 100`},
		{"pool:\n  min_readers: -1\n", `line 2: pool.min_readers (--min-readers) "-1": must be 0 or more`},
		{"pool:\n  max_lag: 10ms\n", `line 2: pool.max_lag (--max-lag) "10ms": must be at least 1s`},
		{"pool:\n  read_fallback: writers\n", `line 2: pool.read_fallback (--read-fallback) "writers": must be writer, none or stale-reader`},
		{"gossip:\n  push_pull_interval: 1ms\n", `line 2: gossip.push_pull_interval (--push-pull-interval) "1ms": must be at least 1s`},
		{"hooks:\n  queue_size: 2000000\n", `line 2: hooks.queue_size "2000000": must be from 1 to 1000000`},
		{"history:\n  keep: 1000\n", `line 2: history.keep "1000": must be within 1-100`},
		{"sinks:\n  haproxy:\n    address: 127.0.0.1:9999\n    timeout: 1m\n    backends: [{cluster: c, role: writer, backend: b}]\n",
			`line 4: sinks.haproxy.timeout "1m0s": must be within 10ms-30s`},
	} {
		p := writeFile(t, tc.yaml+"insecure_no_encryption: true\n")
		_, err := load(t, []string{"--config", p}, nil)
		want := "config file " + p + ", " + tc.want
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v\nwant %q", tc.yaml, err, want)
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%q: %v is not a *FieldError", tc.yaml, err)
		}
	}
}

// Every tag key tags.IsReserved names is refused among the configured tags,
// and the hints name only reserved keys: the list of reserved keys is
// package tags'.
func TestReservedTagsAreTheTagsPackages(t *testing.T) {
	for k := range reservedTagSetting {
		if !tags.IsReserved(k) {
			t.Errorf("hint for %q, which tags.IsReserved does not reserve", k)
		}
		c := validBase()
		c.Tags = map[string]string{k: "x"}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `tag key "`+k+`" is reserved by shoal (set by the `) {
			t.Errorf("tag %s: %v", k, err)
		}
	}
	for _, k := range []string{tags.KeyRole, tags.KeyCluster, tags.KeyMaint, tags.KeyHealth} {
		if _, ok := reservedTagSetting[k]; !ok {
			t.Errorf("reserved tag %s has no hint", k)
		}
	}
}
