package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shoaldb/shoal/internal/tags"
)

// shownFacts are the facts of the schema (tags.Facts) that shoal health
// writes on rows of their own; factsText lists the others.
var shownFacts = map[string]bool{
	"state": true, "reason": true, "server_id": true, "read_only": true,
	"replica": true, "io_running": true, "sql_running": true, "lag_seconds": true,
	"gtid_position": true,
}

// factsText lists the facts of v (a client.LocalHealth or MemberHealth)
// that the fact schema names and shownFacts does not, each by its label, when
// set: "super_read_only true, port 3307". A fact added to the schema shows
// here with no change to the CLI.
func factsText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // a server_id keeps its digits
	if dec.Decode(&m) != nil {
		return ""
	}
	var parts []string
	for _, f := range tags.Facts() {
		for _, fl := range f.Fields {
			val, ok := m[fl.JSON]
			if shownFacts[fl.JSON] || !ok || val == nil || val == false || val == json.Number("0") || val == "" {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %v", fl.Label, val))
		}
	}
	return strings.Join(parts, ", ")
}
