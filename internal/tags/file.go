package tags

import (
	"encoding/json"
	"fmt"
)

// DecodeFile decodes the contents of a tags file (tags_file): a JSON object
// of string values. An empty object or null gives an empty, non-nil map.
// It only decodes; which keys and values are allowed is the caller's rule.
func DecodeFile(data []byte) (map[string]string, error) {
	var t map[string]string
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("want a JSON object of string values: %w", err)
	}
	if t == nil {
		t = map[string]string{}
	}
	return t, nil
}
