package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/testutil/testkit"
)

// checkEnv is an environment with nothing set.
func checkEnv(string) string { return "" }

// TestCheckFiles: every check the agent runs at start on the files a
// configuration names fails here, with the key, the real flag and the
// file and line where the key was set; the configuration is otherwise valid,
// so Validate alone (all --config-check did before) accepts it.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string { return testkit.WriteFile(t, dir, name, body, mode) }
	pw644 := write("pw644", "secret\n", 0o644)
	tagsBad := write("tags-bad.json", `{"dc":`, 0o600)
	tagsRole := write("tags-role.json", `{"role":"web","dc":"east"}`, 0o600)
	tagsRule := write("tags-rule.json", `{"bad key":"x"}`, 0o600)
	tok644 := write("token644", "0123456789abcdefghijklmnop\n", 0o644)
	ring644 := write("ring644.json", `["`+testKey+`"]`, 0o644)
	ringBad := write("ringbad.json", `["bm90IGEga2V5"]`, 0o600)
	cert := write("cert.pem", "not a certificate", 0o600)
	tok := filepath.Join(dir, "api-token")
	missing := filepath.Join(dir, "missing") // never created
	for _, tc := range []struct {
		name, body string
		want       string
	}{
		{"mysql without user", "mysql: {addr: 127.0.0.1:3306}\n",
			`line 2: mysql.user (--mysql-user) "": required`},
		{"password file 0644", "mysql:\n  addr: 127.0.0.1:3306\n  user: probe\n  password_file: " + pw644 + "\n",
			`line 5: mysql.password_file (--mysql-password-file) "` + pw644 + `": read mysql password: ` + pw644 + ` has mode 0644`},
		{"option file missing", "mysql:\n  option_file: " + missing + "/my.cnf\n",
			`line 3: mysql.option_file (--mysql-option-file) "` + missing + `/my.cnf": read option file: open ` + missing + `/my.cnf: no such file`},
		{"keyring missing without encrypt", "keyring_file: " + missing + "\n",
			`line 2: keyring_file (--keyring-file) "` + missing + `": does not exist, and no encrypt key`},
		{"keyring readable by others", "keyring_file: " + ring644 + "\n",
			`keyring_file (--keyring-file) "` + ring644 + `": ` + ring644 + ` has mode 0644`},
		{"keyring bad key", "keyring_file: " + ringBad + "\n",
			`keyring_file (--keyring-file) "` + ringBad + `": keyring file ` + ringBad + `: key 1: key is 9 bytes`},
		{"keyring in a missing directory", "encrypt: " + testKey + "\nkeyring_file: " + missing + "/ring.json\n",
			`keyring_file (--keyring-file) "` + missing + `/ring.json": cannot be created from encrypt: directory ` + missing},
		{"corrupt tags file", "tags_file: " + tagsBad + "\n",
			`line 2: tags_file (--tags-file) "` + tagsBad + `": want a JSON object of string values`},
		{"tags file with a reserved key", "tags_file: " + tagsRole + "\n",
			`tags_file (--tags-file) "` + tagsRole + `": tag "role" is reserved by shoal`},
		{"tags file breaking the tag rules", "tags_file: " + tagsRule + "\n",
			`tags_file (--tags-file) "` + tagsRule + `": tag "bad key": tag key must be`},
		{"api token file readable by others", "api_token_file: " + tok644 + "\n",
			`line 2: api_token_file (--api-token-file) "` + tok644 + `": api token file: ` + tok644 + ` has mode 0644`},
		{"tls certificate unreadable", "http_tls_cert_file: " + cert + "\nhttp_tls_key_file: " + cert + "\n",
			`http_tls_cert_file (--http-tls-cert-file) "` + cert + `": with http_tls_key_file`},
		{"history file is a directory", "history:\n  file: " + dir + "\n",
			`history.file (--history-file) "` + dir + `": is not a regular file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "insecure_no_encryption: true\n" + tc.body
			if !strings.Contains(tc.body, "api_token_file") {
				body += "api_token_file: " + tok + "\n"
			}
			p := writeFile(t, body)
			c := Default()
			c.Node = "n1"
			if err := LoadFile(p, c); err != nil {
				t.Fatalf("load: %v", err)
			}
			if err := c.Validate(); err != nil && !strings.Contains(tc.name, "history") {
				t.Fatalf("Validate already refuses it (the test wants a CheckFiles case): %v", err)
			}
			_, err := c.CheckFiles(checkEnv, os.Geteuid())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckFiles: %v\nwant %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "config file "+p) {
				t.Errorf("error does not name the file %s: %v", p, err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("not a FieldError: %T", err)
			}
		})
	}
}

const testKey = "c2hvYWwtdGVzdC1rZXkxNg==" // "shoal-test-key16"

// TestCheckFilesAccepts: the same files, right, pass and are returned for
// the agent to start from; nothing is created.
func TestCheckFilesAccepts(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("secret\n"), 0o600)
	tagsFile := filepath.Join(dir, "tags.json")
	os.WriteFile(tagsFile, []byte(`{"dc":"east","maint":"upgrade"}`), 0o600)
	c := Default()
	c.Node, c.Encrypt = "n1", testKey
	c.KeyringFile = filepath.Join(dir, "ring.json") // created at start, not here
	c.TagsFile = tagsFile
	c.APITokenFile = filepath.Join(dir, "sub", "api-token")
	c.MySQL.Addr, c.MySQL.User, c.MySQL.PasswordFile = "127.0.0.1:3306", "probe", pw
	f, err := c.CheckFiles(checkEnv, os.Geteuid())
	if err != nil {
		t.Fatal(err)
	}
	if f.Probe.User != "probe" || f.Probe.Password != "secret" || f.Tags["dc"] != "east" || f.Tags["maint"] != "upgrade" || f.Keys != nil {
		t.Errorf("files = %+v", f)
	}
	for _, p := range []string{c.KeyringFile, c.APITokenFile} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: CheckFiles created it (%v)", p, err)
		}
	}
}

// TestCheckFilesHandlerWarnings: a handler whose program is missing or not
// executable is reported; the agent starts with it (it may be installed
// later), so it is a warning, not an error.
func TestCheckFilesHandlerWarnings(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec.sh")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	c := Default()
	c.Node, c.InsecureNoEncryption, c.APITokenFile = "n1", true, filepath.Join(dir, "tok")
	c.EventHandlers = []string{"member-join=/bin/true", "user:x=" + noexec, "/nonexistent/handler"}
	f, err := c.CheckFiles(checkEnv, os.Geteuid())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 2 ||
		!strings.Contains(f.Warnings[0], `event_handlers[1] (--event-handler) "user:x=`+noexec+`": program `+noexec+` cannot be run`) ||
		!strings.Contains(f.Warnings[0], "permission denied") ||
		!strings.Contains(f.Warnings[1], `event_handlers[2] (--event-handler) "/nonexistent/handler"`) {
		t.Errorf("warnings:\n%s", strings.Join(f.Warnings, "\n"))
	}
}

// TestTagsFileLegacyMaintReason: a maintenance reason of up to
// LegacyMaxMaintLen bytes, which older releases wrote, keeps the node in
// maintenance, cut to tags.MaxMaintLen bytes on a character boundary with a
// warning; a longer one is still refused, naming the limit.
func TestTagsFileLegacyMaintReason(t *testing.T) {
	dir := t.TempDir()
	// 63 ASCII bytes then "é" (2 bytes) straddles the 64-byte limit.
	old := strings.Repeat("a", tags.MaxMaintLen-1) + "é" + strings.Repeat("b", LegacyMaxMaintLen-tags.MaxMaintLen-1)
	if len(old) != LegacyMaxMaintLen {
		t.Fatalf("test reason is %d bytes", len(old))
	}
	for _, tc := range []struct {
		reason, want, warn, err string
	}{
		{"upgrade", "upgrade", "", ""},
		{strings.Repeat("x", tags.MaxMaintLen), strings.Repeat("x", tags.MaxMaintLen), "", ""},
		{old, strings.Repeat("a", tags.MaxMaintLen-1), "128 bytes, over the 64 this release allows", ""},
		{strings.Repeat("x", LegacyMaxMaintLen+1), "", "", "maintenance reason is 129 bytes; the most is 64"},
		{strings.Repeat("x", 100) + "\x01", "", "", "non-printable"},
	} {
		path := filepath.Join(dir, "tags.json")
		data, _ := json.Marshal(map[string]string{"dc": "east", "maint": tc.reason})
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c := Default()
		c.Node, c.Role, c.TagsFile = "n1", tags.RoleApp, path
		f, err := c.CheckFiles(checkEnv, os.Geteuid())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("reason of %d bytes: error %v, want %q", len(tc.reason), err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("reason of %d bytes: %v", len(tc.reason), err)
		}
		if got := f.Tags[tags.KeyMaint]; got != tc.want || !utf8.ValidString(got) || f.Tags["dc"] != "east" {
			t.Errorf("reason of %d bytes: loaded %q, want %q", len(tc.reason), got, tc.want)
		}
		warned := strings.Join(f.Warnings, "\n")
		if (tc.warn == "") != (warned == "") || !strings.Contains(warned, tc.warn) || tc.warn != "" && !strings.Contains(warned, path) {
			t.Errorf("reason of %d bytes: warnings %q, want one with %q", len(tc.reason), f.Warnings, tc.warn)
		}
	}
}

// TestTagsFileLegacyUserTags: user tags over this release's budget but
// within the older release's, which its tags file may hold, are kept with a
// warning (the agent must start with them); over that, refused.
func TestTagsFileLegacyUserTags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		size      int // UserTagsSize of the file's user tags
		warn, err string
	}{
		{tags.UserTagBudget, "", ""},
		{LegacyUserTagBudget, "150 bytes, over the 128 this release guarantees", ""},
		{LegacyUserTagBudget + 1, "", "151 bytes"},
	} {
		user := map[string]string{"k": strings.Repeat("v", tc.size-5)} // fixstr key (2) + str8 value (3 + n)
		if got := tags.UserTagsSize(user); got != tc.size {
			t.Fatalf("test tags take %d bytes, want %d", got, tc.size)
		}
		path := filepath.Join(dir, "tags.json")
		data, _ := json.Marshal(user)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, warn, err := ReadTagsFile(path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%d bytes: error %v, want %q", tc.size, err, tc.err)
			}
			continue
		}
		if err != nil || got["k"] != user["k"] {
			t.Fatalf("%d bytes: %v, %v", tc.size, got, err)
		}
		if (tc.warn == "") != (warn == "") || !strings.Contains(warn, tc.warn) {
			t.Errorf("%d bytes: warning %q, want %q", tc.size, warn, tc.warn)
		}
	}
}
