package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/setting"
)

// LoadFile decodes the YAML (or JSON) file at path over c. Unknown keys are
// errors naming the file, the line and the key, with the nearest valid key;
// a value of the wrong type names its key and flag. Stock serf's config
// keys are read as their shoal equivalents (serfkeys.go), each with a
// notice (Config.Notices). Every error line names the file.
func LoadFile(path string, c *Config) error {
	data, fi, err := readConfigFile(path)
	if err != nil {
		c.unreadFiles = true
		return fmt.Errorf("config file: %w", err)
	}
	res, err := decodeFile(data, c)
	c.unreadFiles = c.unreadFiles || res.unread
	for _, n := range res.notices {
		c.notices = append(c.notices, inFile(path, n))
	}
	for key, line := range res.lines {
		c.setSource(key, fmt.Sprintf("config file %s, line %d", path, line))
	}
	if serr := checkSecretFile(path, fi, res.secrets, os.Geteuid()); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return inFileAll(path, err)
	}
	return nil
}

// readConfigFile reads a config file and returns what fstat says of the
// very file it read.
func readConfigFile(path string) ([]byte, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	return data, fi, err
}

// checkSecretFile applies the keyring file's rule (fsutil.ReadPrivateFile:
// no access for group or other) to a config file that holds a secret, and
// refuses one owned by another user than the agent's or root, who could
// read or change it. secrets are the keys found, "encrypt (line 3)".
func checkSecretFile(path string, fi fs.FileInfo, secrets []string, euid int) error {
	if len(secrets) == 0 || fi == nil {
		return nil
	}
	held := "the secret key " + secrets[0]
	if len(secrets) > 1 {
		held = "the secret keys " + strings.Join(secrets, ", ")
	}
	var errs []error
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		errs = append(errs, fmt.Errorf("holds %s and has mode %04o: a file holding a secret must not be accessible by group or other, like a keyring file (chmod 600 %s)",
			held, perm, path))
	}
	if uid, ok := fsutil.Owner(fi); ok && uid != euid && uid != 0 {
		errs = append(errs, fmt.Errorf("holds %s and is owned by uid %d: a file holding a secret must be owned by the agent's user (uid %d) or root (chown %d %s)",
			held, uid, euid, euid, path))
	}
	return errors.Join(errs...)
}

// inFile prefixes a message about the config file path with the file, and
// its line when the message starts with one: "config file F, line 3: ...",
// the form of every message about a file.
func inFile(path, msg string) string {
	if sm := leadingLineRe.FindStringSubmatch(msg); sm != nil {
		return fmt.Sprintf("config file %s, line %s:%s", path, sm[1], msg[len(sm[0]):])
	}
	return fmt.Sprintf("config file %s: %s", path, msg)
}

// fileError is an error about a config file, in inFile's form.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

// inFileAll puts every error of a joined error in inFile's form, keeping
// each error (a *FieldError) reachable with errors.As.
func inFileAll(path string, err error) error {
	var out []error
	for _, e := range setting.Leaves(err) {
		out = append(out, &fileError{msg: inFile(path, e.Error()), err: e})
	}
	return errors.Join(out...)
}

func decode(data []byte, c *Config) error {
	_, err := decodeFile(data, c)
	return err
}

// decoded is what decodeFile found besides the values: the line of every
// key set (dotted path), and the notices about serf keys.
type decoded struct {
	lines   map[string]int
	notices []string
	// unread: the file's values could not be applied at all.
	unread bool
	// secrets are the secret keys set, "encrypt (line 3)".
	secrets []string
}

func decodeFile(data []byte, c *Config) (decoded, error) {
	res := decoded{lines: map[string]int{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return res, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		res.unread = true
		return res, withLine(data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		res.unread = true
		return res, errors.New("more than one YAML document; put the whole configuration in one")
	}
	if len(doc.Content) == 0 {
		return res, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return res, nil
	}
	if root.Kind != yaml.MappingNode {
		res.unread = true
		return res, fmt.Errorf("line %d: want a mapping of config keys (key: value), found %s", root.Line, kindName(root))
	}
	var errs []error
	notices, err := applySerfKeys(root)
	res.notices = notices
	if err != nil {
		errs = append(errs, setting.Leaves(err)...)
	}
	w := &walker{lines: res.lines, values: map[int][]leaf{}, nodes: map[string]*yaml.Node{}}
	w.check(root, reflect.TypeOf(Config{}), "")
	errs = append(errs, w.errs...)
	for _, sec := range secrets {
		k := sec.key
		n := w.nodes[k]
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n != nil && n.Kind == yaml.ScalarNode && n.Value != "" {
			res.secrets = append(res.secrets, fmt.Sprintf("%s (line %d)", k, res.lines[k]))
		}
	}
	if err := root.Decode(c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			res.unread = true
			return res, errors.Join(append(errs, withLine(data, err))...)
		}
		for _, m := range te.Errors {
			errs = append(errs, w.typeError(m))
		}
	}
	slices.SortStableFunc(errs, func(a, b error) int { return errLine(a) - errLine(b) })
	return res, errors.Join(errs...)
}

var leadingLineRe = regexp.MustCompile(`^line (\d+):`)

// errLine is the line an error starts with, for sorting; 0 for none.
func errLine(err error) int {
	if sm := leadingLineRe.FindStringSubmatch(err.Error()); sm != nil {
		n, _ := strconv.Atoi(sm[1])
		return n
	}
	return 0
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}

// leaf is a value in the file: its key path and the node.
type leaf struct {
	key  string
	node *yaml.Node
}

// walker checks the keys of a mapping against a struct's yaml keys, and
// records where each key is set.
type walker struct {
	lines  map[string]int        // key path → line
	values map[int][]leaf        // line → values on it
	nodes  map[string]*yaml.Node // key path → value (the first one set)
	errs   []error
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

func (w *walker) check(n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := structKeys(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a YAML merge key: the merged mapping has the same keys
				w.check(v, t, path)
				continue
			}
			ft, ok := fields[k.Value]
			full := join(path, k.Value)
			if !ok {
				msg := fmt.Sprintf("line %d: unknown key %q", k.Line, full)
				if s := nearest(k.Value, keysOf(fields)); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", join(path, s))
				}
				w.errs = append(w.errs, errors.New(msg))
				continue
			}
			if _, seen := w.lines[full]; !seen {
				w.lines[full] = k.Line
				w.nodes[full] = v
			}
			w.values[v.Line] = append(w.values[v.Line], leaf{full, v})
			w.check(v, ft, full)
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			w.lines[key] = item.Line
			w.values[item.Line] = append(w.values[item.Line], leaf{key, item})
			w.check(item, t.Elem(), key)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structKeys maps the yaml keys of struct t to their field types.
func structKeys(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			maps.Copy(out, structKeys(f.Type))
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func keysOf(m map[string]reflect.Type) []string {
	return slices.Sorted(maps.Keys(m))
}

var typeErrRe = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")

// typeError turns a decoder message ("line 4: cannot unmarshal !!str `5
// seconds` into time.Duration") into one naming the key, its flag and what
// the key wants.
func (w *walker) typeError(m string) error {
	sm := typeErrRe.FindStringSubmatch(m)
	if sm == nil {
		return errors.New(m)
	}
	line, _ := strconv.Atoi(sm[1])
	shown := strings.TrimSuffix(sm[3], "...")
	var found *leaf
	for i, l := range w.values[line] {
		if strings.HasPrefix(l.node.Value, shown) {
			found = &w.values[line][i]
		}
	}
	if found == nil {
		return errors.New(m)
	}
	value := found.node.Value
	if found.node.Kind != yaml.ScalarNode {
		value = strings.TrimPrefix(sm[2], "!!")
	}
	return fmt.Errorf("line %d: %w", line, fieldErr(found.key, value, "%s", wants(sm[4])))
}

// wants describes a Go type for someone writing YAML.
func wants(goType string) string {
	switch {
	case goType == "time.Duration":
		return "not a duration: write a number with a unit, e.g. 500ms, 5s, 2m, 1h"
	case goType == "bool":
		return "not a boolean: write true or false"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "not a whole number"
	case goType == "string":
		return "not a single value (a text, number or boolean)"
	case strings.HasPrefix(goType, "[]"):
		return "want a list, e.g. [a, b]"
	case strings.HasPrefix(goType, "map["):
		return "want a mapping (key: value)"
	}
	return "want a " + goType
}

// nearest returns the candidate closest to s by edit distance, when it is
// close enough to be a plausible typo: at most 2 edits, or a third of s.
func nearest(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var lineNumRe = regexp.MustCompile(`\bline \d+\b`)

// withLine adds a line to a decoder error that names none, such as "yaml:
// control characters are not allowed" or "yaml: found unexpected end of
// stream": the line of the first character YAML refuses (invalid UTF-8, a
// control character), else the first line at which the file's beginning
// fails to parse with the same error.
func withLine(data []byte, err error) error {
	if lineNumRe.MatchString(err.Error()) {
		return err
	}
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 || !yamlPrintable(r, i) {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	if n, ok := syntaxErrorLine(data, err.Error()); ok {
		return fmt.Errorf("line %d: %w", n, err)
	}
	return err
}

// syntaxErrorLine finds, by binary search over the file's first lines, the
// first line at which parsing fails with the error msg: log2(lines) parses.
func syntaxErrorLine(data []byte, msg string) (int, bool) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(k int) bool {
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		return err != nil && err.Error() == msg
	}
	if !fails(len(lines)) {
		return 0, false
	}
	lo, hi := 1, len(lines) // fails(hi) holds
	for lo < hi {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, true
}

// yamlPrintable is YAML's set of characters allowed in a stream (a byte
// order mark only at its start).
func yamlPrintable(r rune, offset int) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		return true
	case r == 0xFEFF:
		return offset == 0
	case r >= 0x20 && r <= 0x7E, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}
