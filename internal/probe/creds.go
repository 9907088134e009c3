package probe

import (
	"fmt"
	"os"
	"strings"

	"github.com/shoaldb/shoal/internal/fsutil"
)

// DefaultPasswordEnv is the environment variable PasswordFromEnv reads when
// given no name.
const DefaultPasswordEnv = "SHOAL_MYSQL_PASSWORD"

// maxSecretFile bounds what is read from a password file.
const maxSecretFile = fsutil.MaxSecretFile

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
	b, err := fsutil.ReadPrivateFile(path)
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
