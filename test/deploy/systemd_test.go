package deploy_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	unitFile = "deploy/systemd/shoal.service"
	envFile  = "deploy/systemd/shoal.env"
)

// unit is a parsed systemd unit file: section → key → values in order
// (keys may repeat).
type unit map[string]map[string][]string

// parseUnit parses systemd's INI dialect: [Section], Key=Value, comments
// starting with # or ;, lines continued with a trailing backslash.
func parseUnit(text string) (unit, error) {
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	n, pending := 0, ""
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if c, ok := strings.CutSuffix(line, `\`); ok {
			pending += strings.TrimSpace(c) + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", n, line)
			}
			section = line[1 : len(line)-1]
			if _, dup := u[section]; dup {
				return nil, fmt.Errorf("line %d: section [%s] twice", n, section)
			}
			u[section] = map[string][]string{}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(key) == "" {
			return nil, fmt.Errorf("line %d: want Key=Value, got %q", n, line)
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: %q before any section", n, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	if pending != "" {
		return nil, fmt.Errorf("file ends in a continued line")
	}
	return u, sc.Err()
}

// TestSystemdUnit checks the unit's required settings, everywhere, without
// systemd.
func TestSystemdUnit(t *testing.T) {
	text := readFile(t, unitFile)
	u, err := parseUnit(text)
	if err != nil {
		t.Fatalf("%s: %v", unitFile, err)
	}
	for s := range u {
		if s != "Unit" && s != "Service" && s != "Install" {
			t.Errorf("unexpected section [%s]", s)
		}
	}
	svc := u["Service"]
	// Exactly these values (the last one wins in systemd).
	exact := map[string]string{
		"Type":                  "simple",
		"User":                  "shoal",
		"Group":                 "shoal",
		"DynamicUser":           "no",
		"ExecStart":             "/usr/local/bin/shoal agent --config /etc/shoal/shoal.yaml",
		"EnvironmentFile":       "-/etc/shoal/shoal.env",
		"KillSignal":            "SIGTERM",
		"Restart":               "on-failure",
		"StateDirectory":        "shoal",
		"NoNewPrivileges":       "yes",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"PrivateTmp":            "yes",
		"PrivateDevices":        "yes",
		"CapabilityBoundingSet": "",
		"AmbientCapabilities":   "",
		"LockPersonality":       "yes",
		"ProtectKernelTunables": "yes",
		"ProtectKernelModules":  "yes",
		"ProtectKernelLogs":     "yes",
		"ProtectControlGroups":  "yes",
		"RestrictNamespaces":    "yes",
		"RestrictSUIDSGID":      "yes",
		"RestrictRealtime":      "yes",
	}
	for key, want := range exact {
		vals, ok := svc[key]
		if !ok {
			t.Errorf("[Service] %s= missing (want %q)", key, want)
			continue
		}
		if got := vals[len(vals)-1]; got != want {
			t.Errorf("[Service] %s=%s, want %s=%s", key, got, key, want)
		}
	}
	if reload := svc["ExecReload"]; !slices.Contains(reload, "/bin/kill -HUP $MAINPID") {
		t.Errorf("[Service] ExecReload=%q: want /bin/kill -HUP $MAINPID", reload)
	}
	if len(svc["TimeoutStopSec"]) == 0 {
		t.Error("[Service] TimeoutStopSec= missing: bound the graceful leave")
	}
	families := strings.Fields(strings.Join(svc["RestrictAddressFamilies"], " "))
	for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6"} {
		if !slices.Contains(families, f) {
			t.Errorf("[Service] RestrictAddressFamilies=%q lacks %s", families, f)
		}
	}
	for _, f := range families {
		if strings.HasPrefix(f, "~") || f == "AF_PACKET" {
			t.Errorf("[Service] RestrictAddressFamilies=%q: want an allow list without raw sockets", families)
		}
	}
	if !slices.Contains(svc["SystemCallFilter"], "@system-service") {
		t.Errorf("[Service] SystemCallFilter=%q: want @system-service", svc["SystemCallFilter"])
	}
	// Writable paths only where needed: the state directory, nothing else
	// unless the operator uncomments the documented examples.
	if rw := svc["ReadWritePaths"]; len(rw) > 0 {
		t.Errorf("[Service] ReadWritePaths=%q: StateDirectory= is the only writable path by default", rw)
	}
	if !strings.Contains(text, "#ReadWritePaths=/run/haproxy") {
		t.Error("the commented ReadWritePaths=/run/haproxy example is missing")
	}
	if !strings.Contains(text, "useradd --system") {
		t.Error("the unit does not document creating the user with useradd --system")
	}
	if got := u["Install"]["WantedBy"]; !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("[Install] WantedBy=%q, want multi-user.target", got)
	}
}

// TestSystemdEnvFile checks the EnvironmentFile example: KEY=VALUE lines
// systemd can read; the probe password and the app hosts' term key set
// there, the key variables the keyring files of `shoal keygen --fleet`
// replace offered commented out; the fleet command and the mode advice.
func TestSystemdEnvFile(t *testing.T) {
	text := readFile(t, envFile)
	keys, commented := map[string]bool{}, map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if k, _, ok := strings.Cut(strings.TrimPrefix(line, "#"), "="); ok && strings.HasPrefix(line, "#SHOAL_") {
			commented[k] = true
		}
		if line == "" || line[0] == '#' {
			continue
		}
		key, _, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(key, "SHOAL_") || strings.ContainsAny(key, " \t") {
			t.Errorf("%s:%d: %q is not a SHOAL_*=value line", envFile, i+1, line)
		}
		keys[key] = true
	}
	for _, k := range []string{"SHOAL_MYSQL_PASSWORD", "SHOAL_CONSENSUS_TERM_KEY"} {
		if !keys[k] {
			t.Errorf("%s: %s= missing", envFile, k)
		}
	}
	for _, k := range []string{"SHOAL_ENCRYPT", "SHOAL_CONSENSUS_KEY"} {
		if !keys[k] && !commented[k] {
			t.Errorf("%s: %s= missing, even commented out", envFile, k)
		}
	}
	for _, want := range []string{"0600", "shoal keygen --fleet"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s: does not say %q", envFile, want)
		}
	}
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify on the unit, with
// ExecStart pointing at a freshly built shoal (verify wants the binary to
// exist). It skips where systemd-analyze is missing or cannot verify even
// a trivial unit (containers without systemd).
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found (apt-get install -y systemd); the unit's keys are checked by TestSystemdUnit")
	}
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.service")
	if err := os.WriteFile(probe, []byte("[Unit]\nDescription=probe\n[Service]\nExecStart=/bin/sh -c true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, dir, sa, "verify", probe); err != nil || strings.TrimSpace(out) != "" {
		t.Skipf("systemd-analyze verify does not work here (a trivial unit gives %v: %s)", err, strings.TrimSpace(out))
	}

	text := strings.ReplaceAll(readFile(t, unitFile), "/usr/local/bin/shoal", shoalBin(t))
	path := filepath.Join(dir, "shoal.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, dir, sa, "verify", path)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}

func TestParseUnit(t *testing.T) {
	u, err := parseUnit("# c\n[Service]\nA=1\nA=2\nB= x \\\n  y\nC=\n")
	if err != nil {
		t.Fatal(err)
	}
	s := u["Service"]
	if !slices.Equal(s["A"], []string{"1", "2"}) || !slices.Equal(s["B"], []string{"x y"}) || !slices.Equal(s["C"], []string{""}) {
		t.Errorf("parseUnit: %q", s)
	}
	for _, bad := range []string{"A=1\n", "[S]\nnovalue\n", "[S\n", "[S]\n[S]\n", "[S]\nA=1 \\\n"} {
		if _, err := parseUnit(bad); err == nil {
			t.Errorf("parseUnit(%q): no error", bad)
		}
	}
}
