package config

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// A stock serf agent's JSON config file (serf agent -config-file) is a
// valid shoal config file: YAML reads JSON, the keys serf and shoal share
// (bind, advertise, tags, tags_file, keyring_file, rpc_addr, rpc_auth,
// log_level, event_handlers, profile, retry_interval) mean the same, and
// serf's other keys are read here as their shoal equivalents, each with a
// notice. A serf key with no shoal equivalent is accepted with a notice
// when its value is what shoal does anyway, and is an error otherwise, so
// that no setting is dropped silently.

// serfAlias is a serf key with a shoal equivalent.
type serfAlias struct {
	shoal string // dotted shoal key
	merge bool   // a list merged into the shoal key's list
}

var serfAliases = map[string]serfAlias{
	"node_name":                 {shoal: "node"},
	"encrypt_key":               {shoal: "encrypt"},
	"start_join":                {shoal: "join", merge: true},
	"retry_join":                {shoal: "join", merge: true},
	"retry_max_attempts":        {shoal: "retry_max"},
	"snapshot_path":             {shoal: "snapshot"},
	"rejoin_after_leave":        {shoal: "rejoin"},
	"reconnect_interval":        {shoal: "gossip.reconnect_interval"},
	"reconnect_timeout":         {shoal: "gossip.reconnect_timeout"},
	"tombstone_timeout":         {shoal: "gossip.tombstone_timeout"},
	"query_response_size_limit": {shoal: "hooks.query_response_limit"},
}

// serfNoEquivalent is a serf key shoal has no setting for: harmless
// reports whether the value is what shoal does anyway.
type serfNoEquivalent struct {
	harmless func(v *yaml.Node) bool
	why      string
}

func isFalse(v *yaml.Node) bool {
	return v.Kind == yaml.ScalarNode && (v.Value == "false" || v.Tag == "!!null")
}
func isTrue(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Value == "true" }
func isEmpty(v *yaml.Node) bool {
	return v.Kind == yaml.ScalarNode && (v.Value == "" || v.Value == "false" || v.Value == "0" || v.Tag == "!!null") ||
		(v.Kind == yaml.SequenceNode || v.Kind == yaml.MappingNode) && len(v.Content) == 0
}
func equals(s string) func(*yaml.Node) bool {
	return func(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Value == s }
}

var serfOnly = map[string]serfNoEquivalent{
	"leave_on_terminate":      {func(*yaml.Node) bool { return true }, "shoal always leaves the cluster gracefully on SIGTERM and SIGINT (a second signal exits at once)"},
	"skip_leave_on_interrupt": {func(*yaml.Node) bool { return true }, "shoal always leaves the cluster gracefully on SIGTERM and SIGINT (a second signal exits at once)"},
	"protocol":                {equals("5"), "shoal speaks serf protocol 5, serf v0.11's newest"},
	"disable_coordinates":     {isFalse, "shoal always computes network coordinates"},
	"replay_on_join":          {isFalse, "shoal never replays old user events when it joins"},
	"query_size_limit":        {equals("1024"), "shoal keeps serf's query size limit, 1024 bytes"},
	"user_event_size_limit":   {equals("512"), "shoal keeps serf's user event size limit, 512 bytes"},
	"broadcast_timeout":       {isEmpty, "shoal bounds the leave broadcast with leave_timeout (--leave-timeout)"},
	"discover":                {isEmpty, "shoal has no mDNS discovery: list peers under join (--join)"},
	"mdns":                    {isEmpty, "shoal has no mDNS discovery: list peers under join (--join)"},
	"interface":               {isEmpty, "give bind (--bind) the interface's IP address"},
	"disable_ipv4":            {isFalse, "give bind (--bind) the address to use"},
	"disable_ipv6":            {isFalse, "give bind (--bind) the address to use"},
	"enable_syslog":           {isFalse, "shoal logs to stderr (the journal under systemd); see log_format (--log-format)"},
	"syslog_facility":         {isEmpty, "shoal logs to stderr (the journal under systemd)"},
	"statsite_addr":           {isEmpty, "shoal exports metrics for Prometheus at /metrics on http_addr"},
	"statsd_addr":             {isEmpty, "shoal exports metrics for Prometheus at /metrics on http_addr"},
	"disable_name_resolution": {isFalse, "shoal's node names are checked and never resolved"},
	"enable_compression":      {isFalse, "shoal gossips uncompressed"},
	"validate_node_names":     {isTrue, "shoal always validates node names"},
}

// applySerfKeys rewrites serf's keys in the top-level mapping root into
// their shoal equivalents, and removes the serf-only ones, returning a
// notice for each.
func applySerfKeys(root *yaml.Node) ([]string, error) {
	var notices []string
	var errs []error
	var kept []*yaml.Node
	var moved [][2]*yaml.Node // key (renamed), value, to place after the scan
	present := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		present[root.Content[i].Value] = root.Content[i].Line
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if a, ok := serfAliases[k.Value]; ok {
			if line, both := present[a.shoal]; both && !a.merge {
				errs = append(errs, fmt.Errorf("line %d: serf key %q and shoal key %q (line %d) are both set; keep %q", k.Line, k.Value, a.shoal, line, a.shoal))
				continue
			}
			notices = append(notices, fmt.Sprintf("line %d: serf key %q read as shoal's %q%s", k.Line, k.Value, a.shoal, flagNote(a.shoal)))
			nk := *k
			nk.Value = a.shoal
			moved = append(moved, [2]*yaml.Node{&nk, v})
			continue
		}
		if s, ok := serfOnly[k.Value]; ok {
			if s.harmless(v) {
				notices = append(notices, fmt.Sprintf("line %d: serf key %q ignored: %s", k.Line, k.Value, s.why))
			} else {
				errs = append(errs, fmt.Errorf("line %d: serf key %q has no shoal equivalent: %s; remove it", k.Line, k.Value, s.why))
			}
			continue
		}
		kept = append(kept, k, v)
	}
	root.Content = kept
	for _, kv := range moved {
		if err := place(root, kv[0], kv[1]); err != nil {
			errs = append(errs, err)
		}
	}
	return notices, errors.Join(errs...)
}

func flagNote(key string) string {
	if f := flagFor(key); f != "" {
		return " (--" + f + ")"
	}
	return ""
}

// place sets the dotted key k.Value to v in root, creating sections as
// needed; a list (join) is appended to an existing one.
func place(root, k, v *yaml.Node) error {
	m := root
	name := k.Value
	for {
		section, rest, nested := strings.Cut(name, ".")
		if !nested {
			break
		}
		var found *yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == section {
				found = m.Content[i+1]
			}
		}
		if found == nil {
			found = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: k.Line, Column: k.Column}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: section, Line: k.Line, Column: k.Column}, found)
		}
		if found.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %s is not a mapping, so serf's key cannot go under it", found.Line, section)
		}
		m, name = found, rest
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != name {
			continue
		}
		old := m.Content[i+1]
		if old.Kind == yaml.SequenceNode && v.Kind == yaml.SequenceNode {
			old.Content = append(old.Content, v.Content...)
			return nil
		}
		return fmt.Errorf("line %d: serf's key and shoal's %q (line %d) are both set; keep one", k.Line, k.Value, m.Content[i].Line)
	}
	nk := *k
	nk.Value = name
	m.Content = append(m.Content, &nk, v)
	return nil
}
