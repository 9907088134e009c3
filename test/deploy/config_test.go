package deploy_test

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/shoaldb/shoal/internal/testutil/haproxytest"
)

// exampleConfigs are the example agent configurations.
var exampleConfigs = []string{
	"deploy/config/db-host.yaml",
	"deploy/config/app-host.yaml",
	"deploy/config/dev.yaml",
}

// hostDirs are the directories the examples use on a real host; the test
// moves them under a temporary root, since --config-check wants the
// directories of the pool file, its lists and the history file to exist.
var hostDirs = []string{"/var/lib/shoal", "/etc/shoal"}

// relocate rewrites the host directories in text to dirs under tmp, and
// creates those.
func relocate(t *testing.T, text, tmp string) string {
	t.Helper()
	for _, d := range hostDirs {
		moved := filepath.Join(tmp, d)
		if err := os.MkdirAll(moved, 0o750); err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, d, moved)
	}
	return text
}

// fleetKeys runs `shoal keygen --fleet` in tmp/keys, as the deploy README
// has the operator do once, and returns the directory and the term key
// (its last line).
func fleetKeys(t *testing.T, bin, tmp string) (dir, termKey string) {
	t.Helper()
	dir = filepath.Join(tmp, "keys")
	out, err := run(t, tmp, bin, "keygen", "--fleet", dir)
	if err != nil {
		t.Fatalf("shoal keygen --fleet: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return dir, lines[len(lines)-1]
}

// install copies files of src into dir with mode 0600, as `install -m 0600`.
func install(t *testing.T, src, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExampleConfigsCheck runs `shoal agent --config-check` on every example
// with its host paths moved to a temporary directory, and without any SHOAL_
// variable of the test's environment but those the deploy README sets: the
// keys are the files of `shoal keygen --fleet` (both keyrings on a db host,
// the gossip keyring and SHOAL_CONSENSUS_TERM_KEY on an app host). None of
// them draws the warning of a db agent without writer terms: db-host.yaml
// has them on, dev.yaml opts out.
func TestExampleConfigsCheck(t *testing.T) {
	bin := shoalBin(t)
	for _, rel := range exampleConfigs {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			tmp := t.TempDir()
			path := filepath.Join(tmp, "etc/shoal", filepath.Base(rel))
			if err := os.WriteFile(path, []byte(relocate(t, readFile(t, rel), tmp)), 0o640); err != nil {
				t.Fatal(err)
			}
			// What the deploy README has the operator create: the probe's
			// option file (mode 0600), and the keyring files.
			// --config-check checks them, as the agent's start does.
			cnf := filepath.Join(tmp, "etc/shoal/my.cnf")
			if err := os.WriteFile(cnf, []byte("[client]\nuser = shoal_probe\npassword = secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			keys, termKey := fleetKeys(t, bin, tmp)
			state := filepath.Join(tmp, "var/lib/shoal")
			var env []string
			switch filepath.Base(rel) {
			case "db-host.yaml":
				install(t, keys, state, "keyring.json", "consensus-keyring.json")
			case "app-host.yaml":
				install(t, keys, state, "keyring.json")
				env = append(env, "SHOAL_CONSENSUS_TERM_KEY="+termKey)
			}
			cmd := exec.CommandContext(t.Context(), bin, "agent", "--config-check", path)
			cmd.Dir = tmp
			cmd.Env = cleanEnv(env...)
			outb, err := cmd.CombinedOutput()
			if out := string(outb); err != nil || !strings.Contains(out, "is valid") || strings.Contains(out, "no writer term") {
				t.Fatalf("shoal agent --config-check %s: %v, want valid without the no-writer-term warning\n%s", rel, err, out)
			}
		})
	}
}

// yamlMap decodes a YAML file into a generic map.
func yamlMap(t *testing.T, rel string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, rel)), &m); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return m
}

// dig follows keys through nested maps; nil when absent.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestExampleConfigsContent checks that each example shows what it is meant
// to, with realistic host paths.
func TestExampleConfigsContent(t *testing.T) {
	db := yamlMap(t, "deploy/config/db-host.yaml")
	for _, key := range [][]string{{"snapshot"}, {"tags_file"}, {"keyring_file"}, {"history", "file"}} {
		if p := str(dig(db, key...)); !strings.HasPrefix(p, "/var/lib/shoal/") {
			t.Errorf("db-host.yaml: %s = %q, want a file in /var/lib/shoal", strings.Join(key, "."), p)
		}
	}
	if str(dig(db, "mysql", "option_file")) == "" && str(dig(db, "mysql", "password_file")) == "" {
		t.Error("db-host.yaml: the probe's password should come from mysql.option_file or mysql.password_file")
	}
	if hs, _ := db["event_handlers"].([]any); len(hs) == 0 {
		t.Error("db-host.yaml: no event_handlers")
	}
	// Writer terms on, from the consensus keyring of shoal keygen --fleet,
	// never a key in the file.
	if p := str(dig(db, "consensus", "keyring_file")); !strings.HasPrefix(p, "/var/lib/shoal/") {
		t.Errorf("db-host.yaml: consensus.keyring_file = %q, want a file in /var/lib/shoal (writer terms on)", p)
	}
	for _, rel := range exampleConfigs {
		if k := dig(yamlMap(t, rel), "consensus", "key"); k != nil {
			t.Errorf("%s: consensus.key in the file: the key is a secret, give the keyring file", rel)
		}
	}

	app := yamlMap(t, "deploy/config/app-host.yaml")
	if dig(app, "mysql") != nil {
		t.Error("app-host.yaml: an app agent has no mysql section")
	}
	if dig(app, "consensus", "keyring_file") != nil {
		t.Error("app-host.yaml: an app agent is never given the consensus keyring (the term key only)")
	}
	if !strings.Contains(readFile(t, "deploy/config/app-host.yaml"), "SHOAL_CONSENSUS_TERM_KEY") {
		t.Error("app-host.yaml: does not say where the term key comes from (SHOAL_CONSENSUS_TERM_KEY)")
	}
	if p := str(dig(app, "sinks", "file", "path")); !strings.HasPrefix(p, "/var/lib/shoal/") {
		t.Errorf("app-host.yaml: sinks.file.path = %q, want a file in /var/lib/shoal", p)
	}
	var poolHook bool
	hs, _ := app["event_handlers"].([]any)
	for _, h := range hs {
		filters, _, _ := strings.Cut(str(h), "=")
		poolHook = poolHook || slices.Contains(strings.Split(filters, ","), "pool-change")
	}
	if !poolHook {
		t.Errorf("app-host.yaml: no pool-change handler in %q", hs)
	}

	dev := yamlMap(t, "deploy/config/dev.yaml")
	if dig(dev, "insecure_no_encryption") != true {
		t.Error("dev.yaml: want insecure_no_encryption: true")
	}
	if dig(dev, "consensus", "disabled") != true {
		t.Error("dev.yaml: want consensus.disabled: true (a lone server on a workstation needs no writer term)")
	}

	// Hook scripts named by the examples are the ones deploy/hooks ships
	// (installed in /usr/local/share/shoal/hooks).
	for _, rel := range exampleConfigs {
		hs, _ := yamlMap(t, rel)["event_handlers"].([]any)
		for _, h := range hs {
			_, cmd, _ := strings.Cut(str(h), "=")
			if script, ok := strings.CutPrefix(strings.Fields(cmd)[0], "/usr/local/share/shoal/hooks/"); ok {
				if _, err := os.Stat(repoPath(t, "deploy/hooks/"+script)); err != nil {
					t.Errorf("%s: handler %q: %v", rel, h, err)
				}
			}
		}
	}
}

// haproxyCfg is what the tests need from an HAProxy configuration.
type haproxyCfg struct {
	socket string              // the stats socket's path
	level  string              // its level
	listen map[string][]string // listen/backend name → its server lines
}

var serverRe = regexp.MustCompile(`^server\s+(\S+)\s+(\S+)(.*)$`)

func parseHAProxy(text string) haproxyCfg {
	c := haproxyCfg{listen: map[string][]string{}}
	current := ""
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) >= 2 && (f[0] == "listen" || f[0] == "backend"):
			current = f[1]
			c.listen[current] = nil
		case f[0] == "global" || f[0] == "defaults" || f[0] == "frontend" || f[0] == "resolvers":
			current = ""
		case len(f) >= 3 && f[0] == "stats" && f[1] == "socket":
			c.socket = f[2]
			if i := slices.Index(f, "level"); i >= 0 && i+1 < len(f) {
				c.level = f[i+1]
			}
		case f[0] == "server" && current != "":
			c.listen[current] = append(c.listen[current], strings.Join(f, " "))
		}
	}
	return c
}

// TestHAProxyMatchesSink checks that the HAProxy configurations agree with
// the app host's sink settings: the admin socket, a section per mapped
// backend, servers named like the nodes, and writers starting disabled.
func TestHAProxyMatchesSink(t *testing.T) {
	app := yamlMap(t, "deploy/config/app-host.yaml")
	addr := str(dig(app, "sinks", "haproxy", "address"))
	socket, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		t.Fatalf("app-host.yaml: sinks.haproxy.address %q is not a unix socket", addr)
	}
	backends, _ := dig(app, "sinks", "haproxy", "backends").([]any)
	if len(backends) == 0 {
		t.Fatal("app-host.yaml: no sinks.haproxy.backends")
	}
	for _, rel := range []string{"deploy/config/haproxy.cfg", "deploy/container/haproxy.cfg"} {
		c := parseHAProxy(readFile(t, rel))
		if c.socket != socket || c.level != "admin" {
			t.Errorf("%s: stats socket %q level %q, want %q level admin", rel, c.socket, c.level, socket)
		}
		for _, b := range backends {
			name, role := str(dig(b, "backend")), str(dig(b, "role"))
			servers, ok := c.listen[name]
			if !ok {
				t.Errorf("%s: no listen or backend section %q (sinks.haproxy.backends)", rel, name)
				continue
			}
			var names []string
			for _, s := range servers {
				m := serverRe.FindStringSubmatch(s)
				if m == nil {
					t.Errorf("%s: %s: bad server line %q", rel, name, s)
					continue
				}
				names = append(names, m[1])
				disabled := slices.Contains(strings.Fields(m[3]), "disabled")
				if role == "writer" && !disabled {
					t.Errorf("%s: writer server %q must start disabled", rel, s)
				}
				if role == "reader" && disabled {
					t.Errorf("%s: reader server %q should start enabled", rel, s)
				}
			}
			if !slices.Equal(names, []string{"db1", "db2", "db3"}) {
				t.Errorf("%s: %s servers %q, want db1 db2 db3 (named like the shoal nodes)", rel, name, names)
			}
		}
	}
}

// TestHAProxyConfigsValid runs haproxy -c on both HAProxy configurations,
// with the admin socket moved to a temporary directory.
func TestHAProxyConfigsValid(t *testing.T) {
	bin := haproxytest.Bin(t)
	for _, rel := range []string{"deploy/config/haproxy.cfg", "deploy/container/haproxy.cfg"} {
		t.Run(filepath.Base(filepath.Dir(rel)), func(t *testing.T) {
			tmp := t.TempDir()
			text := strings.ReplaceAll(readFile(t, rel), "/run/haproxy/", tmp+"/")
			// haproxy -c resolves user and group names; without the
			// Debian package's haproxy account, check the rest.
			if _, err := user.LookupGroup("haproxy"); err != nil {
				text = regexp.MustCompile(`(?m)^\s*(user|group) haproxy\s*$`).ReplaceAllString(text, "")
				text = strings.ReplaceAll(text, " group haproxy ", " ")
				t.Logf("no haproxy group here: checking %s without its user and group settings", rel)
			}
			path := filepath.Join(tmp, "haproxy.cfg")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, tmp, bin, "-c", "-f", path)
			if err != nil {
				t.Fatalf("haproxy -c -f %s: %v\n%s", rel, err, out)
			}
		})
	}
}
