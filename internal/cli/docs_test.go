package cli

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/config"
)

// The docs cannot drift from the program: every shoal command line written
// in the README and docs/ uses only flags that command has, the
// configuration table names only real `shoal agent` flags, and every
// configuration key is in that table.

var flagRe = regexp.MustCompile(`(^|[\s(\x60])--([a-z][a-z0-9-]*)`)

func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md"}
	more, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

func readDoc(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasFlag reports whether cmd (or a parent, for persistent flags) has --name.
func hasFlag(cmd *cobra.Command, name string) bool {
	if name == "help" {
		return true
	}
	for c := cmd; c != nil; c = c.Parent() {
		if c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
			return true
		}
	}
	return false
}

func TestDocsUseRealFlags(t *testing.T) {
	root := NewRoot(io.Discard, io.Discard)
	// A command line: `shoal CMD...` or `bin/shoal CMD...` up to the end of
	// the line, a backtick or a shell comment.
	lineRe := regexp.MustCompile(`(?:^|[\s\x60(])(?:bin/|\./bin/)?shoal ((?:[a-z-]+ ?)+)([^\x60#\n]*)`)
	checked := 0
	for _, f := range docFiles(t) {
		for _, m := range lineRe.FindAllStringSubmatch(readDoc(t, f), -1) {
			words := strings.Fields(m[1])
			cmd, rest, err := root.Find(words)
			if err != nil || cmd == root {
				continue // prose such as "shoal keeps ..."
			}
			tail := strings.Join(rest, " ") + " " + m[2]
			for _, fm := range flagRe.FindAllStringSubmatch(tail, -1) {
				checked++
				if !hasFlag(cmd, fm[2]) {
					t.Errorf("%s: %q: %s has no flag --%s", filepath.Base(f), strings.TrimSpace(m[0]), cmd.CommandPath(), fm[2])
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d flags checked in the docs: the parser is broken", checked)
	}
}

// configRows returns the rows of docs/configuration.md's key table as
// (keys column, flags column).
func configRows(t *testing.T) [][2]string {
	doc := readDoc(t, "../../docs/configuration.md")
	i := strings.Index(doc, "## Keys, flags and environment variables")
	if i < 0 {
		t.Fatal("docs/configuration.md has no 'Keys, flags and environment variables' section")
	}
	var rows [][2]string
	for _, line := range strings.Split(doc[i:], "\n") {
		if strings.HasPrefix(line, "## ") && len(rows) > 0 {
			break
		}
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !strings.HasPrefix(strings.TrimSpace(cols[1]), "`") {
			continue
		}
		rows = append(rows, [2]string{cols[1], cols[2]})
	}
	if len(rows) < 20 {
		t.Fatalf("read %d rows of the key table: the parser is broken", len(rows))
	}
	return rows
}

func TestConfigTableFlagsExist(t *testing.T) {
	root := NewRoot(io.Discard, io.Discard)
	agent, _, err := root.Find([]string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range configRows(t) {
		for _, fm := range flagRe.FindAllStringSubmatch(r[1], -1) {
			if !hasFlag(agent, fm[2]) {
				t.Errorf("docs/configuration.md row %s: shoal agent has no flag --%s", strings.TrimSpace(r[0]), fm[2])
			}
		}
	}
}

// TestConfigTableListsEveryKey: each leaf key of the configuration (a.b.c)
// is in a row whose keys column names its top-level section and either
// names the leaf or (gossip.*) lists its flag.
func TestConfigTableListsEveryKey(t *testing.T) {
	rows := configRows(t)
	var leaves []string
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, prefix string) {
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if strings.Contains(opts, "inline") {
				walk(f.Type, prefix)
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() != "time" {
				walk(ft, prefix+name+".")
				continue
			}
			leaves = append(leaves, prefix+name)
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	if len(leaves) < 30 {
		t.Fatalf("found %d configuration keys: the walk is broken", len(leaves))
	}
	word := func(s, w string) bool {
		return regexp.MustCompile(`(^|[^a-z_])` + regexp.QuoteMeta(w) + `($|[^a-z_])`).MatchString(s)
	}
	for _, key := range leaves {
		top, _, nested := strings.Cut(key, ".")
		leaf := key[strings.LastIndex(key, ".")+1:]
		found := false
		for _, r := range rows {
			if !strings.Contains(r[0], "`"+top) {
				continue
			}
			if !nested || word(r[0], leaf) || strings.Contains(r[1], "--"+strings.ReplaceAll(leaf, "_", "-")) {
				if !nested && !word(r[0], top) {
					continue
				}
				found = true
				break
			}
		}
		if !found {
			t.Errorf("configuration key %s is not in docs/configuration.md's key table", key)
		}
	}
}
