// Package hooks_test runs the example event hooks of deploy/hooks for real:
// with fake socat, mysql and systemctl that record their arguments and
// input, against a unix socket server and a real HAProxy, and with hostile
// input from "other machines".
//
// The scripts need bash and jq. Without jq the tests skip, except under
// CI=true, where they fail. socat and haproxy are optional outside CI: the
// parts that need them skip without them (haproxy: see haproxytest).
// shellcheck is optional everywhere.
package hooks_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/haproxytest"
)

const hooksDir = "../../deploy/hooks"

var scripts = []string{"haproxy.sh", "proxysql.sh", "mysqlrouter.sh", "log-json.sh"}

// requireTools skips the test without bash or jq, or fails under CI=true.
func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " not found in PATH: apt-get install -y " + tool
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (CI=true: the hook script tests must not be skipped)", msg)
			}
			t.Skip(msg)
		}
	}
}

func script(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(hooksDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeBodies are the fake commands: each appends "argv: ARGS" and, unless
// told not to, its stdin to $FAKE_LOG_DIR/NAME.log, then prints
// $FAKE_REPLY and exits with $FAKE_EXIT. The fake mysql also records
// MYSQL_PWD, to check the password travels in the environment.
var fakeBodies = map[string]string{
	"socat": `{ printf 'argv:'; printf ' %s' "$@"; printf '\n'; cat; } >>"$FAKE_LOG_DIR/socat.log"
printf '%b' "${FAKE_REPLY:-\n}"
exit "${FAKE_EXIT:-0}"
`,
	"mysql": `{ printf 'argv:'; printf ' %s' "$@"; printf '\n'; printf 'MYSQL_PWD=%s\n' "${MYSQL_PWD:-}"; cat; } >>"$FAKE_LOG_DIR/mysql.log"
printf '%b' "${FAKE_REPLY:-}"
exit "${FAKE_EXIT:-0}"
`,
	"systemctl": `{ printf 'argv:'; printf ' %s' "$@"; printf '\n'; } >>"$FAKE_LOG_DIR/systemctl.log"
exit "${FAKE_EXIT:-0}"
`,
}

// env is a hook's environment: PATH with the fakes first, the fake log dir,
// and the given variables. Nothing else is inherited, so no SERF_ or SHOAL_
// variable of the test's own environment leaks in.
type env struct {
	t       *testing.T
	bin     string // fakes; first in PATH
	logs    string // FAKE_LOG_DIR
	work    string // the hook's working directory
	noFakes bool   // PATH without the fakes
}

func newEnv(t *testing.T) *env {
	t.Helper()
	requireTools(t)
	e := &env{t: t, bin: t.TempDir(), logs: t.TempDir(), work: t.TempDir()}
	for name, body := range fakeBodies {
		if err := os.WriteFile(filepath.Join(e.bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { assertNoPWNED(t, e.bin, e.logs, e.work) })
	return e
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs a script with stdin and vars ("K=V").
func (e *env) run(name, stdin string, vars ...string) result {
	e.t.Helper()
	path := os.Getenv("PATH")
	if !e.noFakes {
		path = e.bin + string(os.PathListSeparator) + path
	}
	return e.runPath(path, name, stdin, vars...)
}

func (e *env) runPath(path, name, stdin string, vars ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script(e.t, name))
	cmd.Dir = e.work
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + e.work, "FAKE_LOG_DIR=" + e.logs}, vars...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("run %s: %v\nstderr: %s", name, err, r.stderr)
	}
	e.t.Logf("%s: exit %d\nstdout:\n%sstderr:\n%s", name, r.code, r.stdout, r.stderr)
	return r
}

// log returns what the fake named name recorded ("" if never run).
func (e *env) log(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.logs, name+".log"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.t.Fatal(err)
	}
	return string(b)
}

// assertNoPWNED fails if any file named PWNED exists under dirs.
func assertNoPWNED(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
			if err == nil && strings.Contains(de.Name(), "PWNED") {
				t.Errorf("hostile input was executed: %s exists", p)
			}
			return nil
		})
	}
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
}

// The pool-change document.

type node struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

type cluster struct {
	Name     string   `json:"name"`
	Writers  []node   `json:"writers"`
	Readers  []node   `json:"readers"`
	Out      []node   `json:"out"`
	Conflict []string `json:"conflict"`
}

type change struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Addr    string `json:"addr"`
	From    string `json:"from"`
	To      string `json:"to"`
	Reason  string `json:"reason,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

func poolChange(t *testing.T, changes []change, clusters ...cluster) string {
	t.Helper()
	doc := map[string]any{
		"version": 1, "event": "pool-change", "time": "2026-11-22T10:00:00.123Z", "node": "app1",
		"data": map[string]any{
			"changes":  changes,
			"isolated": false,
			"pool":     map[string]any{"clusters": clusters},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mainCluster: db1, the writer, failed; db4 is the new writer, in conflict
// with db5 (db4 kept); db2 is out for lag; db3 stays a reader; db6 left.
var mainCluster = cluster{
	Name:     "main",
	Writers:  []node{{Name: "db4", Addr: "[fd00::14]:3306"}},
	Readers:  []node{{Name: "db3", Addr: "10.0.0.13:3306"}},
	Out:      []node{{"db1", "10.0.0.11:3306", "critical", "timeout"}, {"db2", "10.0.0.12:3306", "lag", "lag 40s"}, {"db5", "db5.example:3307", "conflict", "writable: db4, db5"}},
	Conflict: []string{"db4", "db5"},
}

var mainChanges = []change{
	{"main", "db1", "10.0.0.11:3306", "writer", "out", "critical", "timeout"},
	{"main", "db2", "10.0.0.12:3306", "reader", "out", "lag", "lag 40s"},
	{"main", "db4", "[fd00::14]:3306", "reader", "writer", "", ""},
	{"main", "db5", "db5.example:3307", "reader", "out", "conflict", "writable: db4, db5"},
	{"main", "db6", "10.0.0.16:3306", "reader", "none", "left", ""},
	{"other", "o2", "10.1.0.2:3306", "none", "reader", "", ""},
}

var otherCluster = cluster{
	Name:    "other",
	Writers: []node{{Name: "o1", Addr: "10.1.0.1:3306"}},
	Readers: []node{{Name: "o2", Addr: "10.1.0.2:3306"}},
	Out:     []node{},
}

// wantHAProxy is what haproxy.sh sends for mainCluster: writer backend out
// before in, reader backend in before out.
var wantHAProxy = []string{
	"set server mysql_rw/db1 state maint",
	"set server mysql_rw/db2 state maint",
	"set server mysql_rw/db3 state maint",
	"set server mysql_rw/db5 state maint",
	"set server mysql_rw/db6 state maint",
	"set server mysql_rw/db4 state ready",
	"set server mysql_ro/db3 state ready",
	"set server mysql_ro/db1 state maint",
	"set server mysql_ro/db2 state maint",
	"set server mysql_ro/db4 state maint",
	"set server mysql_ro/db5 state maint",
	"set server mysql_ro/db6 state maint",
}

func TestScriptsSyntax(t *testing.T) {
	requireTools(t)
	readme, err := os.ReadFile(filepath.Join(hooksDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range scripts {
		t.Run(name, func(t *testing.T) {
			p := script(t, name)
			if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
				t.Fatalf("bash -n: %v\n%s", err, out)
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode()&0o111 == 0 {
				t.Errorf("%s is not executable", name)
			}
			b, _ := os.ReadFile(p)
			text := string(b)
			for _, want := range []string{"#!/usr/bin/env bash\n", "set -euo pipefail", "--event-handler", "Dependencies:", "Settings (environment):"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s lacks %q", name, want)
				}
			}
			if strings.Contains(text, "eval ") {
				t.Errorf("%s uses eval", name)
			}
			if !strings.Contains(string(readme), "`"+name+"`") {
				t.Errorf("README.md does not list %s", name)
			}
		})
	}
	t.Run("shellcheck", func(t *testing.T) {
		sc, err := exec.LookPath("shellcheck")
		if err != nil {
			t.Skip("shellcheck not installed (apt-get install -y shellcheck)")
		}
		for _, name := range scripts {
			if out, err := exec.Command(sc, script(t, name)).CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", name, err, out)
			}
		}
	})
}

// TestMissingDependency runs every script with only bash in PATH.
func TestMissingDependency(t *testing.T) {
	e := newEnv(t)
	bash, _ := exec.LookPath("bash")
	only := t.TempDir()
	if err := os.Symlink(bash, filepath.Join(only, "bash")); err != nil {
		t.Fatal(err)
	}
	for name, dep := range map[string]string{"haproxy.sh": "jq", "proxysql.sh": "jq", "mysqlrouter.sh": "awk", "log-json.sh": "jq"} {
		r := e.runPath(only, name, "{}", "SHOAL_EVENT=pool-change")
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "missing dependency: "+dep) {
			t.Errorf("%s: stderr %q does not name the missing %s", name, r.stderr, dep)
		}
	}
}

func TestHAProxyFake(t *testing.T) {
	e := newEnv(t)
	doc := poolChange(t, mainChanges, mainCluster, otherCluster)
	base := []string{"SHOAL_EVENT=pool-change", "HAPROXY_ADDR=127.0.0.1:9999", "HAPROXY_WRITER_BACKEND=mysql_rw", "HAPROXY_READER_BACKEND=mysql_ro"}

	r := e.run("haproxy.sh", doc, append(base, "SHOAL_HOOK_CLUSTER=main")...)
	wantCode(t, r, 0)
	var want strings.Builder
	for _, c := range wantHAProxy {
		want.WriteString("argv: -t 5 -T 5 STDIO TCP:127.0.0.1:9999\n" + c + "\n")
	}
	if got := e.log("socat"); got != want.String() {
		t.Errorf("socat calls:\n%s\nwant:\n%s", got, want.String())
	}
	for _, c := range wantHAProxy {
		if !strings.Contains(r.stdout, "haproxy.sh: "+c+"\n") {
			t.Errorf("stdout does not report %q", c)
		}
	}

	t.Run("several clusters need SHOAL_HOOK_CLUSTER", func(t *testing.T) {
		r := e.run("haproxy.sh", doc, base...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "SHOAL_HOOK_CLUSTER") || !strings.Contains(r.stderr, `["main","other"]`) {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
	t.Run("the only cluster by default, writer backend only", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "socat.log"))
		one := poolChange(t, nil, otherCluster)
		r := e.run("haproxy.sh", one, "SHOAL_EVENT=pool-change", "HAPROXY_ADDR=[::1]:9999", "HAPROXY_WRITER_BACKEND=w", "HAPROXY_TIMEOUT=2")
		wantCode(t, r, 0)
		want := "argv: -t 2 -T 2 STDIO TCP:[::1]:9999\nset server w/o2 state maint\n" +
			"argv: -t 2 -T 2 STDIO TCP:[::1]:9999\nset server w/o1 state ready\n"
		if got := e.log("socat"); got != want {
			t.Errorf("socat calls:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("HAProxy error reply", func(t *testing.T) {
		r := e.run("haproxy.sh", doc, append(base, "SHOAL_HOOK_CLUSTER=main", `FAKE_REPLY=No such server.\n\n`)...)
		wantCode(t, r, 1)
		if !strings.Contains(r.stderr, "set server mysql_rw/db1 state maint: HAProxy says: No such server.") {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "socat.log"))
		r := e.run("haproxy.sh", doc, append(base, "SHOAL_HOOK_CLUSTER=main", "FAKE_EXIT=1", `FAKE_REPLY=Connection refused`)...)
		wantCode(t, r, 1)
		if n := strings.Count(e.log("socat"), "argv:"); n != 1 {
			t.Errorf("%d socat calls after the runtime API was unreachable, want 1 (stop at the first)", n)
		}
	})
	t.Run("other events are ignored", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "socat.log"))
		r := e.run("haproxy.sh", "db1\t10.0.0.11\tdb\t\n", append(base[1:], "SERF_EVENT=member-join")...)
		wantCode(t, r, 0)
		if e.log("socat") != "" {
			t.Error("socat ran for a member-join")
		}
	})
	t.Run("bad settings", func(t *testing.T) {
		for _, c := range []struct {
			vars []string
			msg  string
		}{
			{[]string{"HAPROXY_ADDR=127.0.0.1:9999"}, "HAPROXY_WRITER_BACKEND"},
			{[]string{"HAPROXY_WRITER_BACKEND=w"}, "HAPROXY_SOCKET"},
			{[]string{"HAPROXY_ADDR=127.0.0.1:9999", "HAPROXY_WRITER_BACKEND=w b"}, "invalid backend name"},
			{[]string{"HAPROXY_ADDR=$(id):1", "HAPROXY_WRITER_BACKEND=w"}, "HAPROXY_ADDR"},
			{[]string{"HAPROXY_SOCKET=/nonexistent.sock", "HAPROXY_WRITER_BACKEND=w"}, "not a unix socket"},
		} {
			r := e.run("haproxy.sh", doc, append(c.vars, "SHOAL_EVENT=pool-change", "SHOAL_HOOK_CLUSTER=main")...)
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, c.msg) {
				t.Errorf("%v: stderr %q lacks %q", c.vars, r.stderr, c.msg)
			}
		}
		r := e.run("haproxy.sh", "not json", base...)
		wantCode(t, r, 2)
	})
}

// lineServer is a stand-in for HAProxy's runtime API on a unix socket: it
// reads one line per connection, records it and answers an empty line.
type lineServer struct {
	path string
	mu   sync.Mutex
	got  []string
}

func startLineServer(t *testing.T) *lineServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "shk") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &lineServer{path: filepath.Join(dir, "api.sock")}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			s.mu.Lock()
			s.got = append(s.got, strings.TrimSuffix(line, "\n"))
			s.mu.Unlock()
			_, _ = c.Write([]byte("\n"))
			c.Close()
		}
	}()
	return s
}

func (s *lineServer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// TestHAProxyUnixSocket uses the real socat against a unix socket server
// (the fake socat when socat is not installed).
func TestHAProxyUnixSocket(t *testing.T) {
	e := newEnv(t)
	_, err := exec.LookPath("socat")
	e.noFakes = err == nil
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("socat not installed (apt-get install -y socat; CI=true: the real-socat test must not fall back)")
		}
		t.Log("socat not installed: using the fake (apt-get install -y socat for the real one)")
	}
	srv := startLineServer(t)
	doc := poolChange(t, mainChanges, mainCluster, otherCluster)
	r := e.run("haproxy.sh", doc, "SHOAL_EVENT=pool-change", "HAPROXY_SOCKET="+srv.path,
		"HAPROXY_WRITER_BACKEND=mysql_rw", "HAPROXY_READER_BACKEND=mysql_ro", "SHOAL_HOOK_CLUSTER=main")
	wantCode(t, r, 0)
	if e.noFakes {
		if got := srv.lines(); !reflect.DeepEqual(got, wantHAProxy) {
			t.Errorf("server got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantHAProxy, "\n"))
		}
		return
	}
	if got := e.log("socat"); strings.Count(got, "STDIO UNIX-CONNECT:"+srv.path+"\n") != len(wantHAProxy) {
		t.Errorf("socat calls:\n%s", got)
	}
}

// TestHAProxyReal drives a real HAProxy (Debian package haproxy) through the
// real socat, and reads the servers' states back.
func TestHAProxyReal(t *testing.T) {
	e := newEnv(t)
	if _, err := exec.LookPath("socat"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("socat not installed (apt-get install -y socat; CI=true: this test must not be skipped)")
		}
		t.Skip("socat not installed (apt-get install -y socat)")
	}
	e.noFakes = true
	var servers strings.Builder
	for _, n := range []string{"db1", "db2", "db3", "db4", "db5", "db6", "spare"} {
		servers.WriteString("    server " + n + " 127.0.0.1:1\n")
	}
	h := haproxytest.Start(t, func(p *haproxytest.Proc) string {
		return "global\n    stats socket " + p.Sock + " mode 600 level admin\n" +
			"defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n" +
			"backend mysql_rw\n" + servers.String() + "backend mysql_ro\n" + servers.String()
	})
	doc := poolChange(t, mainChanges, mainCluster, otherCluster)
	r := e.run("haproxy.sh", doc, "SHOAL_EVENT=pool-change", "HAPROXY_SOCKET="+h.Sock,
		"HAPROXY_WRITER_BACKEND=mysql_rw", "HAPROXY_READER_BACKEND=mysql_ro", "SHOAL_HOOK_CLUSTER=main")
	wantCode(t, r, 0)
	want := "mysql_rw/db1=maint mysql_rw/db2=maint mysql_rw/db3=maint mysql_rw/db4=ready mysql_rw/db5=maint mysql_rw/db6=maint mysql_rw/spare=ready " +
		"mysql_ro/db1=maint mysql_ro/db2=maint mysql_ro/db3=ready mysql_ro/db4=maint mysql_ro/db5=maint mysql_ro/db6=maint mysql_ro/spare=ready"
	if got := h.States(); got != want {
		t.Errorf("states:\n%s\nwant:\n%s", got, want)
	}

	// A server HAProxy does not know: it says so, the script exits 1.
	c := mainCluster
	c.Readers = append(slices.Clone(c.Readers), node{Name: "db7", Addr: "10.0.0.17:3306"})
	r = e.run("haproxy.sh", poolChange(t, nil, c), "SHOAL_EVENT=pool-change", "HAPROXY_SOCKET="+h.Sock, "HAPROXY_READER_BACKEND=mysql_ro")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "set server mysql_ro/db7 state ready: HAProxy says:") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestProxySQL(t *testing.T) {
	e := newEnv(t)
	doc := poolChange(t, mainChanges, mainCluster, otherCluster)
	defaults := filepath.Join(e.work, "admin.cnf")
	if err := os.WriteFile(defaults, []byte("[client]\npassword=from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	upd := func(hg, status, host, port string) string {
		return "UPDATE mysql_servers SET status='" + status + "' WHERE hostgroup_id=" + hg + " AND hostname='" + host + "' AND port=" + port + ";\n"
	}
	wantSQL := upd("10", "OFFLINE_SOFT", "10.0.0.11", "3306") +
		upd("10", "OFFLINE_SOFT", "10.0.0.12", "3306") +
		upd("10", "OFFLINE_SOFT", "10.0.0.13", "3306") +
		upd("10", "OFFLINE_SOFT", "db5.example", "3307") +
		upd("10", "OFFLINE_SOFT", "10.0.0.16", "3306") +
		upd("10", "ONLINE", "fd00::14", "3306") +
		upd("20", "ONLINE", "10.0.0.13", "3306") +
		upd("20", "OFFLINE_SOFT", "10.0.0.11", "3306") +
		upd("20", "OFFLINE_SOFT", "10.0.0.12", "3306") +
		upd("20", "OFFLINE_SOFT", "fd00::14", "3306") +
		upd("20", "OFFLINE_SOFT", "db5.example", "3307") +
		upd("20", "OFFLINE_SOFT", "10.0.0.16", "3306") +
		"LOAD MYSQL SERVERS TO RUNTIME;\n"

	t.Run("user and MYSQL_PWD", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "mysql.log"))
		r := e.run("proxysql.sh", doc, "SHOAL_EVENT=pool-change", "SHOAL_HOOK_CLUSTER=main", "PROXYSQL_USER=radmin",
			"MYSQL_PWD=s3cret", "PROXYSQL_WRITER_HG=10", "PROXYSQL_READER_HG=20")
		wantCode(t, r, 0)
		want := "argv: --protocol=TCP -h 127.0.0.1 -P 6032 -u radmin --connect-timeout=5 --batch --skip-column-names\n" +
			"MYSQL_PWD=s3cret\n" + wantSQL
		if got := e.log("mysql"); got != want {
			t.Errorf("mysql call:\n%s\nwant:\n%s", got, want)
		}
		if !strings.Contains(r.stdout, "proxysql.sh: LOAD MYSQL SERVERS TO RUNTIME;") {
			t.Errorf("stdout does not report the SQL: %s", r.stdout)
		}
	})
	t.Run("defaults file, host, port and save", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "mysql.log"))
		r := e.run("proxysql.sh", doc, "SERF_EVENT=pool-change", "SHOAL_HOOK_CLUSTER=main", "PROXYSQL_DEFAULTS_FILE="+defaults,
			"PROXYSQL_HOST=proxysql.local", "PROXYSQL_PORT=16032", "PROXYSQL_WRITER_HG=10", "PROXYSQL_READER_HG=20", "PROXYSQL_SAVE=1")
		wantCode(t, r, 0)
		want := "argv: --defaults-extra-file=" + defaults + " --protocol=TCP -h proxysql.local -P 16032 --connect-timeout=5 --batch --skip-column-names\n" +
			"MYSQL_PWD=\n" + wantSQL + "SAVE MYSQL SERVERS TO DISK;\n"
		if got := e.log("mysql"); got != want {
			t.Errorf("mysql call:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("reader hostgroup only, the only cluster", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "mysql.log"))
		r := e.run("proxysql.sh", poolChange(t, nil, otherCluster), "SHOAL_EVENT=pool-change", "PROXYSQL_USER=a", "PROXYSQL_READER_HG=7")
		wantCode(t, r, 0)
		want := "argv: --protocol=TCP -h 127.0.0.1 -P 6032 -u a --connect-timeout=5 --batch --skip-column-names\nMYSQL_PWD=\n" +
			upd("7", "ONLINE", "10.1.0.2", "3306") + upd("7", "OFFLINE_SOFT", "10.1.0.1", "3306") + "LOAD MYSQL SERVERS TO RUNTIME;\n"
		if got := e.log("mysql"); got != want {
			t.Errorf("mysql call:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("mysql fails", func(t *testing.T) {
		r := e.run("proxysql.sh", doc, "SHOAL_EVENT=pool-change", "SHOAL_HOOK_CLUSTER=main", "PROXYSQL_USER=a", "PROXYSQL_WRITER_HG=10",
			"FAKE_EXIT=1", "FAKE_REPLY=ERROR 2003 (HY000): Can't connect")
		wantCode(t, r, 1)
		if !strings.Contains(r.stderr, "Can't connect") {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
	t.Run("bad settings", func(t *testing.T) {
		_ = os.Remove(filepath.Join(e.logs, "mysql.log"))
		for _, c := range []struct {
			vars []string
			msg  string
		}{
			{[]string{"PROXYSQL_WRITER_HG=10"}, "PROXYSQL_USER"},
			{[]string{"PROXYSQL_USER=a"}, "PROXYSQL_WRITER_HG"},
			{[]string{"PROXYSQL_USER=a", "PROXYSQL_WRITER_HG=10 OR 1=1"}, "PROXYSQL_WRITER_HG"},
			{[]string{"PROXYSQL_USER=a", "PROXYSQL_WRITER_HG=10", "PROXYSQL_PORT=6032;"}, "PROXYSQL_PORT"},
			{[]string{"PROXYSQL_USER=a", "PROXYSQL_WRITER_HG=10", "PROXYSQL_SAVE=yes"}, "PROXYSQL_SAVE"},
		} {
			r := e.run("proxysql.sh", doc, append(c.vars, "SHOAL_EVENT=pool-change", "SHOAL_HOOK_CLUSTER=main")...)
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, c.msg) {
				t.Errorf("%v: stderr %q lacks %q", c.vars, r.stderr, c.msg)
			}
		}
		if e.log("mysql") != "" {
			t.Error("mysql ran despite a bad setting")
		}
	})
}

const routerConf = `[DEFAULT]
logging_folder=/var/log/mysqlrouter

[routing:primary]
bind_address = 0.0.0.0
bind_port = 6446
destinations = 10.0.0.11:3306
# destinations=commented out
routing_strategy = first-available

[routing:replicas]
bind_port=6447
destinations=10.0.0.12:3306,10.0.0.13:3306
routing_strategy=round-robin

[routing:other]
destinations=keep.example:3306
`

func TestMySQLRouter(t *testing.T) {
	e := newEnv(t)
	lists := filepath.Join(e.work, "lists")
	conf := filepath.Join(e.work, "router", "mysqlrouter.conf")
	for _, d := range []string{lists, filepath.Dir(conf)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(conf, routerConf, 0o640)
	write(filepath.Join(lists, "main-writers.txt"), "[fd00::14]:3306\n", 0o644)
	write(filepath.Join(lists, "main-readers.txt"), "10.0.0.13:3306\ndb5.example:3307\n", 0o644)
	vars := []string{"SHOAL_EVENT=pool-change", "SHOAL_POOL_LISTS_DIR=" + lists, "MYSQLROUTER_CONF=" + conf}
	doc := poolChange(t, mainChanges, mainCluster)

	r := e.run("mysqlrouter.sh", doc, vars...)
	wantCode(t, r, 0)
	want := strings.NewReplacer(
		"destinations = 10.0.0.11:3306", "destinations = [fd00::14]:3306",
		"destinations=10.0.0.12:3306,10.0.0.13:3306", "destinations=10.0.0.13:3306,db5.example:3307",
	).Replace(routerConf)
	checkConf := func(want string) {
		t.Helper()
		b, err := os.ReadFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s:\n%s\nwant:\n%s", conf, b, want)
		}
		if st, _ := os.Stat(conf); st.Mode().Perm() != 0o640 {
			t.Errorf("mode %v, want 0640 kept", st.Mode().Perm())
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(conf), ".*"))
		if len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
	checkConf(want)
	if got := e.log("systemctl"); got != "argv: restart mysqlrouter\n" {
		t.Errorf("systemctl calls:\n%s", got)
	}

	t.Run("unchanged: no restart", func(t *testing.T) {
		r := e.run("mysqlrouter.sh", doc, vars...)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "unchanged") {
			t.Errorf("stdout: %s", r.stdout)
		}
		checkConf(want)
		if got := e.log("systemctl"); got != "argv: restart mysqlrouter\n" {
			t.Errorf("restart ran again:\n%s", got)
		}
	})
	t.Run("empty writer list keeps the old destinations", func(t *testing.T) {
		write(filepath.Join(lists, "main-writers.txt"), "", 0o644)
		write(filepath.Join(lists, "main-readers.txt"), "10.0.0.13:3306\n", 0o644)
		// The restart command is split into arguments, never globbed.
		write(filepath.Join(e.work, "glob-me"), "", 0o644)
		r := e.run("mysqlrouter.sh", doc, append(vars, "MYSQLROUTER_RESTART=systemctl  reload-or-restart mysqlrouter@a *")...)
		wantCode(t, r, 0)
		if !strings.Contains(r.stderr, "[routing:primary]: no writer in the list; keeping the old destinations") {
			t.Errorf("stderr: %s", r.stderr)
		}
		want = strings.Replace(want, "destinations=10.0.0.13:3306,db5.example:3307", "destinations=10.0.0.13:3306", 1)
		checkConf(want)
		if got := e.log("systemctl"); got != "argv: restart mysqlrouter\nargv: reload-or-restart mysqlrouter@a *\n" {
			t.Errorf("systemctl calls:\n%s", got)
		}
	})
	t.Run("restart fails", func(t *testing.T) {
		write(filepath.Join(lists, "main-writers.txt"), "10.0.0.11:3306\n", 0o644)
		r := e.run("mysqlrouter.sh", doc, append(vars, "FAKE_EXIT=1")...)
		wantCode(t, r, 1)
		want = strings.Replace(want, "destinations = [fd00::14]:3306", "destinations = 10.0.0.11:3306", 1)
		checkConf(want)
	})
	t.Run("missing section", func(t *testing.T) {
		r := e.run("mysqlrouter.sh", doc, append(vars, "MYSQLROUTER_RO_SECTION=routing:nope")...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "[routing:nope] not found") {
			t.Errorf("stderr: %s", r.stderr)
		}
		checkConf(want)
	})
	t.Run("other events are ignored", func(t *testing.T) {
		r := e.run("mysqlrouter.sh", "", append(vars[1:], "SHOAL_EVENT=health-change")...)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "ignoring event health-change") {
			t.Errorf("stdout: %s", r.stdout)
		}
	})
}

// logLines runs log-json.sh for each event and returns the lines it wrote,
// decoded; each must be valid JSON.
func logLines(t *testing.T, e *env, log string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
			t.Errorf("line %d: time: %v", i+1, err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

const (
	hostileName    = "db1;touch PWNED"
	hostileAddr    = "$(touch PWNED):3306"
	hostileTag     = "a`touch PWNED`\\nb\"c'd\\\\" // serf escapes a newline in a tag as \n
	hostilePayload = "he said \"hi\" \\ $(touch PWNED) `touch PWNED`\n'; DROP TABLE x; --\n\x01\ttab\n"
)

func TestLogJSON(t *testing.T) {
	e := newEnv(t)
	log := filepath.Join(e.work, "events.jsonl")
	doc := poolChange(t, mainChanges, mainCluster)
	health := `{"version":1,"event":"health-change","time":"2026-11-22T10:00:00Z","node":"db1","data":{"from":"passing","to":"critical","reason":"timeout","message":"dial tcp: i/o timeout"}}`
	members := hostileName + "\t" + hostileAddr + "\tdb\trole=db,note=" + hostileTag + ",eq=a=b\n" +
		"app1\t10.0.0.2\tapp\t\n"
	runs := []struct {
		stdin string
		vars  []string
	}{
		{members, []string{"SERF_EVENT=member-join", "SERF_SELF_NAME=app1", "SERF_SELF_ROLE=app", "SERF_TAG_ROLE=app", "SERF_TAG_NOTE=x`touch PWNED`\ny"}},
		{hostilePayload, []string{"SERF_EVENT=user", "SERF_USER_EVENT=deploy\"$(touch PWNED)", "SERF_USER_LTIME=42", "SHOAL_EVENT=user"}},
		{"ping", []string{"SERF_EVENT=query", "SERF_QUERY_NAME=q`x`", "SERF_QUERY_LTIME=7"}},
		{doc, []string{"SHOAL_EVENT=pool-change", "SHOAL_SELF_NAME=app1"}},
		{health, []string{"SHOAL_EVENT=health-change"}},
		{"{broken\n", []string{"SHOAL_EVENT=pool-change"}},
	}
	for _, run := range runs {
		wantCode(t, e.run("log-json.sh", run.stdin, append(run.vars, "SHOAL_HOOK_LOG="+log)...), 0)
	}
	got := logLines(t, e, log)
	want := []map[string]any{
		{"event": "member-join", "node": "app1", "role": "app", "tags": map[string]any{"role": "app", "note": "x`touch PWNED`\ny"},
			"members": []any{
				map[string]any{"name": hostileName, "addr": hostileAddr, "role": "db", "tags": map[string]any{"role": "db", "note": hostileTag, "eq": "a=b"}},
				map[string]any{"name": "app1", "addr": "10.0.0.2", "role": "app", "tags": map[string]any{}},
			}},
		{"event": "user", "node": "", "role": "", "user_event": "deploy\"$(touch PWNED)", "ltime": 42.0, "payload": hostilePayload},
		{"event": "query", "node": "", "role": "", "query": "q`x`", "ltime": 7.0, "payload": "ping"},
		{"event": "pool-change", "node": "app1", "role": "", "document": decode(t, doc)},
		{"event": "health-change", "node": "", "role": "", "document": decode(t, health)},
		{"event": "pool-change", "node": "", "role": "", "payload": "{broken\n", "error": "stdin is not one JSON document"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
}

// hostileCluster mixes valid nodes with names and addresses that would run
// commands or inject SQL or runtime API commands if a script trusted them.
var hostileCluster = cluster{
	Name: "main",
	Writers: []node{
		{Name: "$(touch PWNED)", Addr: "[fd00::1;touch PWNED]:3306"},
	},
	Readers: []node{
		{Name: hostileName, Addr: hostileAddr},
		{Name: "x\nset server mysql_rw/db9 state ready", Addr: "10.0.0.9:3306\nUPDATE mysql_servers SET status='ONLINE'"},
		{Name: "db`touch PWNED`", Addr: "10.0.0.1' OR '1'='1:3306"},
		{Name: "db3", Addr: "10.0.0.13:3306"},
		// A regexp anchored with ^...$ would take these (a trailing newline).
		{Name: "db8\n", Addr: "10.0.0.18:3306\n"},
	},
	Out: []node{
		{Name: "ok-db", Addr: "10.0.0.21:99999", Reason: "critical", Detail: "$(touch PWNED)\n`touch PWNED`"},
		{Name: "db4", Addr: "10.0.0.14:3306", Reason: "lag", Detail: "\"quoted\"\\"},
	},
	Conflict: []string{},
}

func TestHostileInput(t *testing.T) {
	e := newEnv(t)
	doc := poolChange(t, []change{{"main", hostileName, hostileAddr, "none", "reader", "", "`touch PWNED`"}}, hostileCluster)
	clean := func(t *testing.T, what, s string) {
		t.Helper()
		for _, bad := range []string{"PWNED", "db8", "db9", "10.0.0.18", "OR '1'", "UPDATE mysql_servers SET status='ONLINE'\n"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s carries hostile text %q:\n%s", what, bad, s)
			}
		}
	}

	t.Run("haproxy.sh", func(t *testing.T) {
		r := e.run("haproxy.sh", doc, "SHOAL_EVENT=pool-change", "HAPROXY_ADDR=127.0.0.1:9999", "HAPROXY_WRITER_BACKEND=mysql_rw", "HAPROXY_READER_BACKEND=mysql_ro")
		wantCode(t, r, 3)
		calls := e.log("socat")
		clean(t, "socat calls", calls)
		var cmds []string
		for _, l := range strings.Split(calls, "\n") {
			if strings.HasPrefix(l, "set server") {
				cmds = append(cmds, l)
			}
		}
		want := []string{
			"set server mysql_rw/db3 state maint", "set server mysql_rw/db4 state maint", "set server mysql_rw/ok-db state maint",
			"set server mysql_ro/db3 state ready", "set server mysql_ro/db4 state maint", "set server mysql_ro/ok-db state maint",
		}
		if !reflect.DeepEqual(cmds, want) {
			t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
		}
		for _, n := range []string{`"$(touch PWNED)"`, `"db1;touch PWNED"`, `"x\nset server mysql_rw/db9 state ready"`, "\"db`touch PWNED`\"", `"db8\n"`} {
			if !strings.Contains(r.stderr, "skipping node with invalid server name "+n+"\n") {
				t.Errorf("stderr does not report %s:\n%s", n, r.stderr)
			}
		}
	})
	t.Run("proxysql.sh", func(t *testing.T) {
		r := e.run("proxysql.sh", doc, "SHOAL_EVENT=pool-change", "PROXYSQL_USER=a", "PROXYSQL_WRITER_HG=10", "PROXYSQL_READER_HG=20")
		wantCode(t, r, 3)
		calls := e.log("mysql")
		clean(t, "mysql input", calls)
		want := "argv: --protocol=TCP -h 127.0.0.1 -P 6032 -u a --connect-timeout=5 --batch --skip-column-names\nMYSQL_PWD=\n" +
			"UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=10 AND hostname='10.0.0.13' AND port=3306;\n" +
			"UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=10 AND hostname='10.0.0.14' AND port=3306;\n" +
			"UPDATE mysql_servers SET status='ONLINE' WHERE hostgroup_id=20 AND hostname='10.0.0.13' AND port=3306;\n" +
			"UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=20 AND hostname='10.0.0.14' AND port=3306;\n" +
			"LOAD MYSQL SERVERS TO RUNTIME;\n"
		if calls != want {
			t.Errorf("mysql call:\n%s\nwant:\n%s", calls, want)
		}
		for _, a := range []string{`"$(touch PWNED):3306"`, `"[fd00::1;touch PWNED]:3306"`, `"10.0.0.21:99999"`, `"10.0.0.1' OR '1'='1:3306"`, `"10.0.0.18:3306\n"`} {
			if !strings.Contains(r.stderr, "invalid address "+a+"\n") {
				t.Errorf("stderr does not report %s:\n%s", a, r.stderr)
			}
		}
	})
	t.Run("mysqlrouter.sh", func(t *testing.T) {
		lists := filepath.Join(e.work, "lists")
		conf := filepath.Join(e.work, "mysqlrouter.conf")
		_ = os.MkdirAll(lists, 0o755)
		_ = os.WriteFile(conf, []byte(routerConf), 0o644)
		_ = os.WriteFile(filepath.Join(lists, "main-writers.txt"), []byte(hostileAddr+"\n[fd00::1;touch PWNED]:3306\n"), 0o644)
		_ = os.WriteFile(filepath.Join(lists, "main-readers.txt"), []byte("10.0.0.1' OR '1'='1:3306\n10.0.0.13:3306\n`touch PWNED`:1\n"), 0o644)
		r := e.run("mysqlrouter.sh", doc, "SHOAL_EVENT=pool-change", "SHOAL_POOL_LISTS_DIR="+lists, "MYSQLROUTER_CONF="+conf,
			"MYSQLROUTER_RESTART=systemctl restart mysqlrouter")
		wantCode(t, r, 3)
		b, _ := os.ReadFile(conf)
		want := strings.Replace(routerConf, "destinations=10.0.0.12:3306,10.0.0.13:3306", "destinations=10.0.0.13:3306", 1)
		if string(b) != want {
			t.Errorf("conf:\n%s\nwant:\n%s", b, want)
		}
		clean(t, "conf", string(b))
		if n := strings.Count(r.stderr, "skipping invalid address"); n != 4 {
			t.Errorf("%d addresses reported invalid, want 4:\n%s", n, r.stderr)
		}
	})
	t.Run("log-json.sh", func(t *testing.T) {
		log := filepath.Join(e.work, "hostile.jsonl")
		wantCode(t, e.run("log-json.sh", doc, "SHOAL_EVENT=pool-change", "SHOAL_HOOK_LOG="+log), 0)
		wantCode(t, e.run("log-json.sh", hostileName+"\t"+hostileAddr+"\tdb\tnote="+hostileTag+"\n", "SERF_EVENT=member-failed", "SHOAL_HOOK_LOG="+log), 0)
		wantCode(t, e.run("log-json.sh", hostilePayload, "SERF_EVENT=user", "SERF_USER_EVENT=$(touch PWNED)", "SERF_USER_LTIME=1;touch PWNED", "SHOAL_HOOK_LOG="+log), 0)
		got := logLines(t, e, log)
		if len(got) != 3 {
			t.Fatalf("%d lines, want 3", len(got))
		}
		if !reflect.DeepEqual(got[0]["document"], decode(t, doc)) {
			t.Errorf("document not verbatim: %v", got[0]["document"])
		}
		m := got[1]["members"].([]any)[0].(map[string]any)
		if m["name"] != hostileName || m["addr"] != hostileAddr || m["tags"].(map[string]any)["note"] != hostileTag {
			t.Errorf("member not verbatim: %v", m)
		}
		if got[2]["payload"] != hostilePayload || got[2]["user_event"] != "$(touch PWNED)" || got[2]["ltime"] != "1;touch PWNED" {
			t.Errorf("user event not verbatim: %v", got[2])
		}
	})
	assertNoPWNED(t, e.bin, e.logs, e.work)
}
