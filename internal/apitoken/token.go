// Package apitoken creates and reads the agent's API token: the secret that
// every state-changing or secret-revealing request to the HTTP API and the
// Serf-compatible RPC must carry.
//
// The agent creates the token at its first start in a file only its own user
// can read (mode 0600, like an ssh key), so the API is protected without any
// configuration. The CLI reads the file at DefaultPath (or the one its
// --token-file or SHOAL_API_TOKEN_FILE names, never one an agent reports)
// when it runs as the agent's user or root; any other local user cannot
// read it, which is the point.
package apitoken

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/fsutil"
)

// FileName is the token file's name in the agent's state directory.
const FileName = "api-token"

// MinLen is the shortest token accepted from a file or the environment.
const MinLen = 16

// Generate returns a new random token: 32 bytes from crypto/rand,
// base64url-encoded (43 characters).
func Generate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate api token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DefaultPath is where the agent keeps its token when api_token_file is not
// set: $STATE_DIRECTORY (set by systemd's StateDirectory=), else
// /var/lib/shoal for root, else $XDG_STATE_HOME/shoal or
// ~/.local/state/shoal.
func DefaultPath(getenv func(string) string, euid int) string {
	if d := getenv("STATE_DIRECTORY"); d != "" {
		// systemd may list several directories, separated by colons.
		d, _, _ = strings.Cut(d, ":")
		return filepath.Join(d, FileName)
	}
	if euid == 0 {
		return filepath.Join("/var/lib/shoal", FileName)
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "shoal", FileName)
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "shoal", FileName)
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("shoal-%d", euid), FileName)
}

// CheckDir checks the directory of the API token file, whether
// configured or the fallback in /tmp: one that another user could have
// created, or may write in, could hand the agent a token of theirs or take
// its own. It must be owned by the agent's user (euid) or root and
// writable by no one else. A missing one is fine: the agent creates it,
// mode 0700, and LoadOrCreate checks it again once it exists, so one
// another user creates after the config check is refused too.
func CheckDir(dir string, euid int) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("state directory %s is not a directory (mode %s)", dir, st.Mode())
	}
	owner, _ := fsutil.Owner(st)
	perm := st.Mode().Perm()
	if (owner == euid || owner == 0) && perm&0o022 == 0 {
		return nil
	}
	return fmt.Errorf("state directory %s is owned by uid %d and has mode %04o: it holds the API token, so it must be owned by the agent's user (uid %d) or root and writable by no one else (chown %d %s; chmod 700 %s)",
		dir, owner, perm, euid, euid, dir, dir)
}

// Check validates a token's text.
func Check(tok string) error {
	if len(tok) < MinLen {
		return fmt.Errorf("token is %d characters; want at least %d", len(tok), MinLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("token has a space, control or non-ASCII character at byte %d", i)
		}
	}
	return nil
}

// Read reads a token file: mode 0600 or stricter, one line of at least
// MinLen printable ASCII characters.
func Read(path string) (string, error) {
	b, err := fsutil.ReadPrivateFile(path)
	if err != nil {
		return "", fmt.Errorf("api token file: %w", err)
	}
	tok := strings.TrimRight(string(b), "\r\n")
	if err := Check(tok); err != nil {
		return "", fmt.Errorf("api token file %s: %w", path, err)
	}
	return tok, nil
}

// LoadOrCreate returns the token in path, creating the file (and its
// directory, mode 0700) with a new token when it does not exist. created
// reports whether it did. Two agents starting at once with the same path
// end up with the same token.
func LoadOrCreate(path string) (tok string, created bool, err error) {
	tok, err = Read(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("api token file: %w", err)
	}
	// Checked again now that it exists: the one the config check saw
	// missing may have been made by another user in between.
	if err := CheckDir(filepath.Dir(path), os.Geteuid()); err != nil {
		return "", false, fmt.Errorf("api token file: %w", err)
	}
	tok, err = Generate()
	if err != nil {
		return "", false, err
	}
	// Write a temporary file, then link it into place: the token file
	// appears complete or not at all, and an existing one is never replaced.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", false, fmt.Errorf("api token file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.WriteString(tok + "\n")
	if werr == nil {
		werr = f.Chmod(0o600)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", false, fmt.Errorf("api token file %s: %w", path, werr)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another agent won the race; use its token.
			for range 10 {
				if tok, err = Read(path); err == nil {
					return tok, false, nil
				}
				time.Sleep(10 * time.Millisecond)
			}
			return "", false, err
		}
		return "", false, fmt.Errorf("api token file %s: %w", path, err)
	}
	return tok, true, nil
}
