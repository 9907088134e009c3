package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseOptionFile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ClientOptions
	}{
		{"basic", "[client]\nuser=shoal\npassword=pw\nhost=127.0.0.1\nport=3307\n",
			ClientOptions{User: "shoal", Password: "pw", PasswordSet: true, Host: "127.0.0.1", Port: 3307}},
		{"spaces and comments", "# top\n; also a comment\n[client]   # group comment\n  user = shoal  \n\npassword = p w # trailing\n",
			ClientOptions{User: "shoal", Password: "p w", PasswordSet: true}},
		{"double quotes keep #", "[client]\npassword=\"a#b c\"  # comment\n",
			ClientOptions{Password: "a#b c", PasswordSet: true}},
		{"single quotes", "[client]\npassword='x \"y\" #z'\n", ClientOptions{Password: `x "y" #z`, PasswordSet: true}},
		{"escapes", `[client]` + "\n" + `password="a\"b\\c\sd\te"` + "\n",
			ClientOptions{Password: "a\"b\\c d\te", PasswordSet: true}},
		{"unquoted escape", "[client]\npassword=a\\sb\\x\n", ClientOptions{Password: "a b\\x", PasswordSet: true}},
		{"unquoted # is a comment even escaped", "[client]\npassword=a\\#b\n", ClientOptions{Password: "a\\", PasswordSet: true}},
		{"quotes inside an unquoted value", "[client]\npassword=ab\"c#d\"\n", ClientOptions{Password: "ab\"c#d\"", PasswordSet: true}},
		{"empty password", "[client]\npassword=\n", ClientOptions{PasswordSet: true}},
		{"other groups ignored", "[mysqld]\nuser=mysql\nport=1\n[client]\nuser=shoal\n[mysql]\nuser=other\n",
			ClientOptions{User: "shoal"}},
		{"later wins, groups merge", "[client]\nuser=a\n[mysqld]\n[CLIENT]\nuser=b\nsocket=/run/m.sock\n",
			ClientOptions{User: "b", Socket: "/run/m.sock"}},
		{"dash underscore loose", "[client]\nloose-user=x\nDefault-Character-Set=utf8mb4\nssl-mode=DISABLED\nno-auto-rehash\n",
			ClientOptions{User: "x"}},
		{"bom and crlf", "\uFEFF[client]\r\nuser=shoal\r\n", ClientOptions{User: "shoal"}},
		{"no client section", "[mysqld]\nuser=mysql\n", ClientOptions{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOptionFile(strings.NewReader(tc.in), "my.cnf")
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseOptionFileErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unclosed group", "[client\nuser=x\n", "my.cnf line 1: group header"},
		{"text after group", "[client] junk\n", "my.cnf line 1: unexpected text"},
		{"unclosed quote", "[client]\nuser=x\npassword=\"abc\n", `my.cnf line 3: password: value has no closing " quote`},
		{"text after quote", "[client]\npassword='a' b\n", "my.cnf line 2: password: unexpected text"},
		{"bad port", "[client]\nport=33o6\n", `my.cnf line 2: port "33o6"`},
		{"port range", "[client]\nport=0\n", "my.cnf line 2: port"},
		{"password without value", "[client]\npassword\n", "my.cnf line 2: password has no value"},
		{"include", "[client]\n!include /etc/other.cnf\n", `my.cnf line 2: "!include" is not supported`},
		{"includedir", "!includedir /etc/mysql/conf.d/\n", `my.cnf line 1: "!includedir"`},
		{"empty name", "[client]\n=value\n", "my.cnf line 2: option name missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseOptionFile(strings.NewReader(tc.in), "my.cnf")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadOptionFileAndFill(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "client.cnf")
	body := "[client]\nuser=shoal\npassword=\"pw#1\"\nsocket=/run/mysqld/mysqld.sock\nhost=localhost\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOptionFile(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("group/other-readable option file: err %v, want one naming %s and mode 0644", err, path)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := LoadOptionFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.Fill(Config{}).WithDefaults()
	if cfg.User != "shoal" || cfg.Password != "pw#1" || cfg.Socket != "/run/mysqld/mysqld.sock" || cfg.Host != "" || cfg.Port != 0 {
		t.Errorf("filled config %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}

	// Explicit settings win; a remote host means TCP (socket ignored).
	cfg = ClientOptions{User: "file", Host: "10.0.0.5", Port: 3310, Socket: "/x.sock", Password: "f", PasswordSet: true}.
		Fill(Config{User: "explicit"})
	if cfg.User != "explicit" || cfg.Host != "10.0.0.5" || cfg.Port != 3310 || cfg.Socket != "" || cfg.Password != "f" {
		t.Errorf("fill precedence: %+v", cfg)
	}
	cfg = ClientOptions{Socket: "/x.sock", Port: 3310}.Fill(Config{Host: "127.0.0.1"})
	if cfg.Socket != "" || cfg.Port != 3310 {
		t.Errorf("explicit host must keep TCP: %+v", cfg)
	}
}
