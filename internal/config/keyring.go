package config

import (
	"encoding/json"
	"fmt"
)

// DecodeKeyring decodes the contents of a keyring file (keyring_file, the
// serf format): a JSON array of base64 keys, primary first, at least one.
// name is the file's path, used in errors. The keys themselves are checked
// where they are used (CheckKey, memberlist.NewKeyring).
func DecodeKeyring(data []byte, name string) ([]string, error) {
	var keys []string
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("keyring file %s: want a JSON array of base64 keys: %w", name, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("keyring file %s holds no keys", name)
	}
	return keys, nil
}
