package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLintCoversEveryBuildTag: `make vet` and `make staticcheck` run once
// without tags and once with LINT_TAGS, so code behind a build tag (the
// e2e and bench suites) is checked too. A new tag in the tree must be
// added there, or its files go unchecked.
func TestLintCoversEveryBuildTag(t *testing.T) {
	m := regexp.MustCompile(`(?m)^LINT_TAGS\s*:=\s*(.*)$`).FindStringSubmatch(readFile(t, "Makefile"))
	if m == nil {
		t.Fatal("Makefile has no LINT_TAGS := line")
	}
	lint := strings.Fields(m[1])
	constraint := regexp.MustCompile(`(?m)^//go:build (.*)$`)
	ident := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.]*`)
	known := map[string]bool{"linux": true, "unix": true, "ignore": true}
	seen := map[string]string{}
	err := filepath.WalkDir(repoPath(t, "."), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "build") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, c := range constraint.FindAllStringSubmatch(string(src), -1) {
			for _, tag := range ident.FindAllString(c[1], -1) {
				if !known[tag] {
					seen[tag] = p
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("no build tag found in the tree: the walk is broken (test/e2e uses e2e)")
	}
	for tag, file := range seen {
		if !slices.Contains(lint, tag) {
			t.Errorf("build tag %q (%s) is not in the Makefile's LINT_TAGS %q: vet and staticcheck never see those files", tag, file, lint)
		}
	}
}
