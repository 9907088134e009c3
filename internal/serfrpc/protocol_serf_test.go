package serfrpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestProtocolMatchesSerf compares what protocol.go copies from serf's agent
// (cmd/serf/command/agent/ipc.go of the serf module in go.mod) with that
// source, so that a serf upgrade that changes any of it fails here (see the
// serf-upgrade checklist in package gossip): the command names, the error
// strings stock clients match, the IPC version, the query's done record,
// the header and request structs, the msgpack handle, and the framing
// lookup gives each command (a handler that decodes a request body, a
// handler that sends a response body).
func TestProtocolMatchesSerf(t *testing.T) {
	serf := parseGo(t, filepath.Join(serfModuleDir(t), "cmd", "serf", "command", "agent", "ipc.go"))
	ours := parseGo(t, "protocol.go")
	sc, oc := stringConsts(serf), stringConsts(ours)

	// Command names: serf's const block of handshakeCommand, ours of
	// cmdHandshake, the same set.
	serfCmds, ourCmds := constBlock(t, serf, "handshakeCommand"), constBlock(t, ours, "cmdHandshake")
	if len(serfCmds) < 10 || !slices.Equal(serfCmds, ourCmds) {
		t.Errorf("command names: serf has %q, protocol.go %q", serfCmds, ourCmds)
	}

	// Error strings and records, constant by constant.
	for ourName, serfName := range map[string]string{
		"errUnsupportedCommand": "unsupportedCommand",
		"errUnsupportedVersion": "unsupportedIPCVersion",
		"errDuplicateHandshake": "duplicateHandshake",
		"errHandshakeRequired":  "handshakeRequired",
		"errAuthRequired":       "authRequired",
		"errInvalidAuthToken":   "invalidAuthToken",
		"queryRecordDone":       "queryRecordDone",
	} {
		if sv, ok := sc[serfName]; !ok || sv != oc[ourName] {
			t.Errorf("%s = %q, serf's %s = %q (present: %v)", ourName, oc[ourName], serfName, sv, ok)
		}
	}
	for _, name := range []string{"MinIPCVersion", "MaxIPCVersion"} {
		if v := intConst(t, serf, name); v != ipcVersion {
			t.Errorf("serf's %s = %d, ipcVersion = %d", name, v, ipcVersion)
		}
	}

	// Structs: the same fields with the same types; queryRecord reads only
	// some of serf's.
	serfFields, ourFields := structFields(serf), structFields(ours)
	for _, name := range []string{"requestHeader", "responseHeader", "handshakeRequest", "authRequest", "tagsRequest", "stopRequest"} {
		if !slices.Equal(serfFields[name], ourFields[name]) || len(ourFields[name]) == 0 {
			t.Errorf("%s: serf's fields %q, ours %q", name, serfFields[name], ourFields[name])
		}
	}
	for _, f := range ourFields["queryRecord"] {
		if !slices.Contains(serfFields["queryRecord"], f) {
			t.Errorf("queryRecord field %q is not serf's (%q)", f, serfFields["queryRecord"])
		}
	}

	// The msgpack handle: WriteExt as serf's newMsgpackHandle sets it.
	if !strings.Contains(funcSource(t, serf, "newMsgpackHandle"), "WriteExt: true") {
		t.Error("serf's newMsgpackHandle no longer sets WriteExt: true, as msgpackHandle does")
	}
	if !msgpackHandle().WriteExt {
		t.Error("msgpackHandle does not set WriteExt")
	}

	checkFraming(t, serf, sc)
}

// checkFraming checks lookup against serf's handlers: handleRequest's
// switch names the handler of each command; a handler that calls
// client.dec.Decode reads a request body, one that calls client.Send with a
// non-nil body sends a response body. A handler serving several commands
// (handleMembers) must match at least one of them.
func checkFraming(t *testing.T, serf *ast.File, consts map[string]string) {
	handlers := map[string][]string{} // handler → commands
	var served []string
	ast.Inspect(findFunc(t, serf, "handleRequest"), func(n ast.Node) bool {
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		var handler string
		ast.Inspect(cc, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "handle") {
					handler = sel.Sel.Name
				}
			}
			return true
		})
		for _, e := range cc.List {
			id, ok := e.(*ast.Ident)
			if !ok || handler == "" {
				t.Fatalf("handleRequest: a case %v the test cannot read", e)
			}
			handlers[handler] = append(handlers[handler], consts[id.Name])
			served = append(served, consts[id.Name])
		}
		return false
	})
	known := []string{cmdHandshake, cmdAuth}
	for _, c := range served {
		if _, ok := lookup(c); ok {
			known = append(known, c)
		}
	}
	slices.Sort(served)
	slices.Sort(known)
	if len(served) < 10 || !slices.Equal(served, known) {
		t.Errorf("serf serves %q; the gate knows %q", served, known)
	}
	for handler, cmds := range handlers {
		decodes, sendsBody := false, false
		ast.Inspect(findFunc(t, serf, handler), func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch {
			case sel.Sel.Name == "Decode" && isSelector(sel.X, "dec"):
				decodes = true
			case sel.Sel.Name == "Send" && len(call.Args) == 2:
				if id, ok := call.Args[1].(*ast.Ident); !ok || id.Name != "nil" {
					sendsBody = true
				}
			}
			return true
		})
		var reqBody, respBody bool
		for _, c := range cmds {
			switch c {
			case cmdHandshake, cmdAuth: // the gate's own: a body, no response body
				reqBody = true
			default:
				cmd, _ := lookup(c)
				reqBody = reqBody || cmd.reqBody
				respBody = respBody || cmd.respBody
			}
		}
		if decodes != reqBody || sendsBody != respBody {
			t.Errorf("%s (%q): serf decodes a request body %v, sends a response body %v; lookup says %v, %v",
				handler, cmds, decodes, sendsBody, reqBody, respBody)
		}
	}
}

// serfModuleDir is where the serf module of go.mod is.
func serfModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/hashicorp/serf").Output()
	if err != nil {
		t.Fatalf("find the serf module: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("find the serf module: not downloaded (go mod download github.com/hashicorp/serf)")
	}
	return dir
}

func parseGo(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stringConsts returns the file's top-level string constants.
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, vs := range valueSpecs(f) {
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return out
}

// constBlock returns the sorted string values of the const block that
// declares member.
func constBlock(t *testing.T, f *ast.File, member string) []string {
	t.Helper()
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		var vals []string
		found := false
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				found = found || n.Name == member
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						vals = append(vals, v)
					}
				}
			}
		}
		if found {
			slices.Sort(vals)
			return vals
		}
	}
	t.Fatalf("no const block declares %s", member)
	return nil
}

func intConst(t *testing.T, f *ast.File, name string) int {
	t.Helper()
	for _, vs := range valueSpecs(f) {
		for i, n := range vs.Names {
			if n.Name == name && i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.INT {
					v, _ := strconv.Atoi(lit.Value)
					return v
				}
			}
		}
	}
	t.Fatalf("no integer constant %s", name)
	return 0
}

func valueSpecs(f *ast.File) []*ast.ValueSpec {
	var out []*ast.ValueSpec
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
			for _, s := range gd.Specs {
				out = append(out, s.(*ast.ValueSpec))
			}
		}
	}
	return out
}

// structFields returns each struct type's fields as "Name Type".
func structFields(f *ast.File) map[string][]string {
	out := map[string][]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			ts := s.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fl := range st.Fields.List {
				for _, n := range fl.Names {
					out[ts.Name.Name] = append(out[ts.Name.Name], n.Name+" "+exprString(fl.Type))
				}
			}
		}
	}
	return out
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return reflect.TypeOf(e).String()
}

func findFunc(t *testing.T, f *ast.File, name string) *ast.FuncDecl {
	t.Helper()
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			return fd
		}
	}
	t.Fatalf("serf's ipc.go has no function %s", name)
	return nil
}

// funcSource is a function's composite literal keys and values, "Key: value"
// for identifiers and basic literals, enough to find a setting.
func funcSource(t *testing.T, f *ast.File, name string) string {
	var b strings.Builder
	ast.Inspect(findFunc(t, f, name), func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if v, ok := kv.Value.(*ast.Ident); ok {
				b.WriteString(exprString(kv.Key) + ": " + v.Name + "\n")
			}
		}
		return true
	})
	return b.String()
}

// isSelector says whether e is x.name for some x.
func isSelector(e ast.Expr, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}
