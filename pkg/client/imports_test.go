package client_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// clientUsers are the only packages under internal/ whose code may import
// pkg/client: the HTTP API, where the agent's own types become the wire
// types, and the CLI and the demo, clients of running agents. Everything
// else uses internal types
// (package view for the agent's read models), so that an internal change
// never changes the public API. Test files may use the client as a client.
var clientUsers = map[string]bool{"internal/api": true, "internal/cli": true, "internal/demo": true}

func TestOnlyTheAPIAndTheCLIImportTheClient(t *testing.T) {
	const self = "github.com/shoaldb/shoal/pkg/client"
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == self && !clientUsers[rel] {
				t.Errorf("%s imports %s: only %v may (convert at the API boundary, package internal/api)", filepath.ToSlash(path), self, slices.Sorted(maps.Keys(clientUsers)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under internal/: not the repository's tree", files)
	}
}
