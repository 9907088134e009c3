package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeHAProxySocketMatchesDeploy: the haproxy.cfg shown in
// docs/operations.md (once in the README) had
// `mode 600`, which locks the agent (user shoal, group haproxy under the
// shipped unit) out of the runtime API; deploy/config/haproxy.cfg has 660.
func TestReadmeHAProxySocketMatchesDeploy(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\s*stats socket .*$`)
	readme := re.FindAllString(readFile(t, "docs/operations.md"), -1)
	deploy := re.FindAllString(readFile(t, "deploy/config/haproxy.cfg"), -1)
	if len(deploy) != 1 {
		t.Fatalf("deploy/config/haproxy.cfg has %d stats socket lines, want 1", len(deploy))
	}
	if len(readme) == 0 {
		t.Fatal("docs/operations.md shows no stats socket line")
	}
	for _, l := range readme {
		if strings.TrimSpace(l) != strings.TrimSpace(deploy[0]) {
			t.Errorf("docs/operations.md: %q\ndeploy/config/haproxy.cfg: %q", strings.TrimSpace(l), strings.TrimSpace(deploy[0]))
		}
	}
}

// TestReadmeLayoutListsEveryPackage: the Layout section of
// docs/development.md (the README points there) names every Go
// package directory under cmd/, internal/, pkg/ and test/ (a package below
// another one, such as a benchmark's helper command, is its parent's).
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	doc := readFile(t, "docs/development.md")
	i := strings.Index(doc, "\n## Layout")
	if i < 0 {
		t.Fatal("docs/development.md has no Layout section")
	}
	layout := doc[i+1:]
	if j := strings.Index(layout, "\n\n#"); j >= 0 {
		layout = layout[:j]
	}
	hasGo := func(dir string) bool {
		m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		return len(m) > 0
	}
	base := repoPath(t, ".")
	for _, top := range []string{"cmd", "internal", "pkg", "test"} {
		err := filepath.WalkDir(filepath.Join(base, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if !hasGo(p) {
				return nil
			}
			rel, _ := filepath.Rel(base, p)
			if !strings.Contains(layout, "`"+rel+"`") && !strings.Contains(layout, "`"+filepath.Base(rel)+"`") {
				t.Errorf("docs/development.md Layout does not list %s", rel)
			}
			return filepath.SkipDir // its sub-packages are its own
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// TestDocLinksResolve: every relative link in the README and docs/ points
// to a file that exists (anchors are not checked), so moving reference
// material between them cannot leave a dead link.
func TestDocLinksResolve(t *testing.T) {
	files, err := filepath.Glob(repoPath(t, "docs/*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, repoPath(t, "README.md"))
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s: link to %s: %v", filepath.Base(f), target, err)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: the parser is broken", checked)
	}
}
