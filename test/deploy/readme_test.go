package deploy_test

import (
	"io/fs"
	"os"
	"os/exec"
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

// readmeBlock returns the first ```sh block after heading in the README,
// with continued lines (a trailing backslash) joined.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	doc := readFile(t, "README.md")
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```sh\n")
	end := strings.Index(rest[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("README.md %s: no sh block", heading)
	}
	block := strings.ReplaceAll(rest[start+6:start+6+end], "\\\n", " ")
	return strings.Split(strings.TrimSpace(block), "\n")
}

// TestReadmeRunningForRealIsTrue runs the README's "Running it for real"
// as a new user would, on this machine: `shoal keygen --fleet` writes the
// files the install lines copy, and each host's `shoal agent` line, with
// the environment its exports set and its paths moved to a temporary
// directory, passes --config-check. A db agent there has writer terms on
// (no warning of a db agent without them), and every file an install line
// names is one the fleet command wrote.
func TestReadmeRunningForRealIsTrue(t *testing.T) {
	bin := shoalBin(t)
	tmp := t.TempDir()
	state := filepath.Join(tmp, "var/lib/shoal")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(tmp, "base.yaml")
	if err := os.WriteFile(cfg, []byte("api_token_file: "+filepath.Join(tmp, "api-token")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var termKey string
	var env []string
	agents, dbAgents := 0, 0
	for _, line := range readmeBlock(t, "## Running it for real") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "# each") {
			env = nil // another host
		}
		if c := strings.Index(line, " #"); c >= 0 {
			line = strings.TrimSpace(line[:c])
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case len(f) > 2 && f[0] == "shoal" && f[1] == "keygen":
			out, err := run(t, tmp, bin, f[1:]...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			termKey = lines[len(lines)-1]
		case f[0] == "install":
			dst := strings.Replace(f[len(f)-1], "/var/lib/shoal", state, 1)
			for _, a := range f[1 : len(f)-1] {
				if strings.HasPrefix(a, "-") || a == "0600" || a == "shoal" {
					continue
				}
				b, err := os.ReadFile(filepath.Join(tmp, a))
				if err != nil {
					t.Fatalf("%s: %v (not a file shoal keygen --fleet wrote)", line, err)
				}
				if err := os.WriteFile(filepath.Join(dst, filepath.Base(a)), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		case f[0] == "export":
			name, _, _ := strings.Cut(f[1], "=")
			switch name {
			case "SHOAL_MYSQL_PASSWORD":
				env = append(env, name+"=secret")
			case "SHOAL_CONSENSUS_TERM_KEY":
				env = append(env, name+"="+termKey)
			default:
				t.Fatalf("%s: an export this test does not know", line)
			}
		case len(f) > 1 && f[0] == "shoal" && f[1] == "agent":
			agents++
			args := []string{"agent", "--config-check", cfg}
			for _, a := range f[2:] {
				args = append(args, strings.Replace(a, "/var/lib/shoal", state, 1))
			}
			if strings.Contains(line, "--mysql-addr") {
				dbAgents++
				if !strings.Contains(line, "--consensus-keyring-file") {
					t.Errorf("README db agent without writer terms: %s", line)
				}
			}
			cmd := exec.CommandContext(t.Context(), bin, args...)
			cmd.Dir, cmd.Env = tmp, cleanEnv(env...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "is valid") || strings.Contains(string(out), "no writer term") {
				t.Errorf("README: %s\n--config-check: %v, want valid without the no-writer-term warning\n%s", line, err, out)
			}
		case f[0] == "shoal":
			if out, err := run(t, tmp, bin, append(f[1:], "--help")...); err != nil {
				t.Errorf("README: %s: %v\n%s", line, err, out)
			}
		default:
			t.Errorf("README: %q: a command this test does not know", line)
		}
	}
	if termKey == "" || agents < 2 || dbAgents < 1 {
		t.Fatalf("README's Running it for real: term key %q, %d agents (%d db): want keygen --fleet, a db and an app agent", termKey, agents, dbAgents)
	}
}
