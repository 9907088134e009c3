package probe

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultPasswordEnv is the environment variable PasswordFromEnv reads when
// given no name.
const DefaultPasswordEnv = "SHOAL_MYSQL_PASSWORD"

// maxSecretFile bounds what is read from a password file.
const maxSecretFile = 64 << 10

// PasswordFromEnv returns the value of the environment variable name
// (DefaultPasswordEnv when empty). An unset variable is an error; a set but
// empty one is an empty password.
func PasswordFromEnv(name string) (string, error) {
	if name == "" {
		name = DefaultPasswordEnv
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("read mysql password: environment variable %s is not set", name)
	}
	return v, nil
}

// PasswordFromFile reads a password from a file holding only the password;
// one trailing newline (\n or \r\n) is removed. The file must not be
// accessible by group or other (mode 0600 or stricter), like an ssh key.
func PasswordFromFile(path string) (string, error) {
	b, err := readPrivateFile(path)
	if err != nil {
		return "", fmt.Errorf("read mysql password: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("read mysql password: password file %s is empty", path)
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("read mysql password: password file %s has more than one line", path)
	}
	return s, nil
}

// readPrivateFile opens path, refuses it when group or other have any
// access, and reads it. The mode is checked on the opened file, so a rename
// between check and read cannot swap it.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %s)", path, fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o: it holds a secret and must not be accessible by group or other (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return nil, errors.New(path + ": larger than 64 KiB")
	}
	return b, nil
}
