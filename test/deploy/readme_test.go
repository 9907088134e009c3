package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeHAProxySocketMatchesDeploy: the README's inline haproxy.cfg had
// `mode 600`, which locks the agent (user shoal, group haproxy under the
// shipped unit) out of the runtime API; deploy/config/haproxy.cfg has 660.
func TestReadmeHAProxySocketMatchesDeploy(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\s*stats socket .*$`)
	readme := re.FindAllString(readFile(t, "README.md"), -1)
	deploy := re.FindAllString(readFile(t, "deploy/config/haproxy.cfg"), -1)
	if len(deploy) != 1 {
		t.Fatalf("deploy/config/haproxy.cfg has %d stats socket lines, want 1", len(deploy))
	}
	if len(readme) == 0 {
		t.Fatal("README.md shows no stats socket line")
	}
	for _, l := range readme {
		if strings.TrimSpace(l) != strings.TrimSpace(deploy[0]) {
			t.Errorf("README.md: %q\ndeploy/config/haproxy.cfg: %q", strings.TrimSpace(l), strings.TrimSpace(deploy[0]))
		}
	}
}

// TestReadmeLayoutListsEveryPackage: the Layout section names every Go
// package directory under cmd/, internal/, pkg/ and test/ (a package below
// another one, such as a benchmark's helper command, is its parent's).
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	readme := readFile(t, "README.md")
	i := strings.Index(readme, "\nLayout")
	if i < 0 {
		t.Fatal("README.md has no Layout section")
	}
	layout := readme[i:]
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
				t.Errorf("README.md Layout does not list %s", rel)
			}
			return filepath.SkipDir // its sub-packages are its own
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}
