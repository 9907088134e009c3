package agent

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/hashicorp/memberlist"
	"github.com/shoaldb/shoal/internal/config"
)

// GenerateKey returns a new random 32-byte gossip key, base64 encoded.
func GenerateKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// setupKeyring returns the keyring to gossip with, or nil for none. A keyring
// file, when it exists, wins; when it does not and a key is given, the file
// is created from the key (mode 0600) so that later rotations persist.
func setupKeyring(encrypt, keyringFile string) (kr *memberlist.Keyring, warning string, err error) {
	if keyringFile != "" {
		keys, err := readKeyringFile(keyringFile)
		switch {
		case err == nil:
			if encrypt != "" && !slices.Contains(keys, encrypt) {
				warning = fmt.Sprintf("keyring file %s exists and does not contain the --encrypt key; the keyring file wins (install the key with shoal keys install)", keyringFile)
			}
			kr, err := newKeyring(keys)
			if err != nil {
				return nil, "", fmt.Errorf("keyring file %s: %w", keyringFile, err)
			}
			return kr, warning, nil
		case errors.Is(err, fs.ErrNotExist):
			if encrypt == "" {
				return nil, "", fmt.Errorf("keyring file %s does not exist and no --encrypt key was given to create it", keyringFile)
			}
			if err := config.WriteKeyringFile(keyringFile, []string{encrypt}); err != nil {
				return nil, "", err
			}
		default:
			return nil, "", err
		}
	}
	if encrypt == "" {
		return nil, "", nil
	}
	kr, err = newKeyring([]string{encrypt})
	return kr, "", err
}

func newKeyring(keys []string) (*memberlist.Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	decoded := make([][]byte, len(keys))
	for i, k := range keys {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return nil, fmt.Errorf("key %d is not base64: %w", i+1, err)
		}
		decoded[i] = b
	}
	return memberlist.NewKeyring(decoded, decoded[0])
}

// readKeyringFile reads a keyring file. Like a password file, it must not be
// readable by group or other: it holds the cluster's keys.
func readKeyringFile(path string) ([]string, error) { return config.ReadKeyringFile(path) }
