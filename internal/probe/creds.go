package probe

import (
	"fmt"
	"strings"

	"github.com/shoaldb/shoal/internal/fsutil"
)

// PasswordEnv is the environment variable the agent reads the probe's
// password from when mysql.password_file is not set (Settings.Config).
const PasswordEnv = "SHOAL_MYSQL_PASSWORD"

// maxSecretFile bounds what is read from a password file.
const maxSecretFile = fsutil.MaxSecretFile

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
