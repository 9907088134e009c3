package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/internal/fsutil"
)

// ClientOptions are the connection settings of a MySQL client option file's
// [client] section. Empty strings and a zero Port mean "not set".
type ClientOptions struct {
	User        string
	Password    string
	PasswordSet bool // distinguishes "password=" (empty) from no password line
	Host        string
	Port        int
	Socket      string
}

// Fill returns cfg with its empty connection fields taken from o: explicit
// settings win over the option file. Call it before Config.WithDefaults
// (which would fill Host and Port).
func (o ClientOptions) Fill(cfg Config) Config {
	if cfg.User == "" {
		cfg.User = o.User
	}
	if cfg.Password == "" && o.PasswordSet {
		cfg.Password = o.Password
	}
	if cfg.Socket == "" && cfg.Host == "" {
		// As with mysql clients: a host other than localhost means TCP and
		// the socket is ignored; localhost (or no host) means the socket.
		switch {
		case o.Host != "" && o.Host != "localhost":
			cfg.Host = o.Host
		case o.Socket != "":
			cfg.Socket = o.Socket
		default:
			cfg.Host = o.Host
		}
	}
	if cfg.Port == 0 && cfg.Socket == "" {
		cfg.Port = o.Port
	}
	return cfg
}

// LoadOptionFile reads the [client] section of a MySQL client option file
// (as used with mysql --defaults-file). Like a password file, it must not be
// accessible by group or other.
func LoadOptionFile(path string) (ClientOptions, error) {
	b, err := fsutil.ReadPrivateFile(path)
	if err != nil {
		return ClientOptions{}, fmt.Errorf("read option file: %w", err)
	}
	return ParseOptionFile(bytes.NewReader(b), path)
}

// ParseOptionFile parses MySQL option-file syntax and returns the settings
// of every [client] group (later lines win). name is used in errors, which
// give the line number.
//
// Supported syntax, as read by mysys: [group] headers (case-insensitive);
// "#" and ";" comment lines; a "#" outside quotes starts a comment anywhere;
// "name=value" with spaces allowed around "="; values in single or double
// quotes; the escapes \b \t \n \r \\ \s (space) \" \' in any value; "-" and
// "_" alike in names; the "loose-" prefix. Other options in [client] are
// ignored; "!include" and "!includedir" are rejected because a password
// could hide there.
func ParseOptionFile(r io.Reader, name string) (ClientOptions, error) {
	var o ClientOptions
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSecretFile)
	inClient := false
	for lineNo := 1; sc.Scan(); lineNo++ {
		fail := func(format string, args ...any) (ClientOptions, error) {
			return ClientOptions{}, fmt.Errorf("option file %s line %d: %s", name, lineNo, fmt.Sprintf(format, args...))
		}
		line := strings.TrimSpace(sc.Text())
		if lineNo == 1 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '!':
			return fail("%q is not supported; put the settings in this file", strings.Fields(line)[0])
		case line[0] == '[':
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return fail("group header %q has no closing ]", line)
			}
			if rest := strings.TrimSpace(line[end+1:]); rest != "" && rest[0] != '#' && rest[0] != ';' {
				return fail("unexpected text %q after group header", rest)
			}
			inClient = strings.EqualFold(strings.TrimSpace(line[1:end]), "client")
			continue
		}
		key, rawValue, hasValue := strings.Cut(line, "=")
		key = normalizeOptionName(key)
		if key == "" {
			return fail("option name missing before =")
		}
		if !inClient {
			continue
		}
		var value string
		if hasValue {
			v, err := parseOptionValue(rawValue)
			if err != nil {
				return fail("%s: %v", key, err)
			}
			value = v
		}
		switch key {
		case "user", "password", "host", "port", "socket":
			if !hasValue {
				return fail("%s has no value (write %s=...)", key, key)
			}
		default:
			continue // other client options are not ours
		}
		switch key {
		case "user":
			o.User = value
		case "password":
			o.Password, o.PasswordSet = value, true
		case "host":
			o.Host = value
		case "socket":
			o.Socket = value
		case "port":
			p, err := strconv.Atoi(value)
			if err != nil || p < 1 || p > 65535 {
				return fail("port %q is not a number within 1-65535", value)
			}
			o.Port = p
		}
	}
	if err := sc.Err(); err != nil {
		return ClientOptions{}, fmt.Errorf("read option file %s: %w", name, err)
	}
	return o, nil
}

// normalizeOptionName lower-cases, trims, maps "-" to "_" and drops the
// "loose_" prefix.
func normalizeOptionName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.ReplaceAll(s, "-", "_")
	return strings.TrimPrefix(s, "loose_")
}

// parseOptionValue follows mysys' option-file reader: cut a "#" comment
// outside quotes, trim, strip one pair of surrounding quotes, then process
// escapes (in quoted and unquoted values alike). A value that opens a quote
// and does not end with it is an error here (mysys keeps it verbatim, which
// is never what was meant).
func parseOptionValue(s string) (string, error) {
	s = strings.TrimSpace(stripComment(s))
	if s == "" {
		return "", nil
	}
	if q := s[0]; q == '"' || q == '\'' {
		end := closingQuote(s, q)
		if end < 0 {
			return "", fmt.Errorf("value has no closing %c quote", q)
		}
		if rest := strings.TrimSpace(s[end+1:]); rest != "" {
			return "", fmt.Errorf("unexpected text %q after closing quote", rest)
		}
		s = s[1:end]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			b.WriteString(unescape(s[i]))
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// stripComment cuts s at the first "#" outside quotes (a backslash escapes
// a quote character inside quotes).
func stripComment(s string) string {
	var quote byte
	escape := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == '\'' || c == '"') && !escape {
			switch quote {
			case 0:
				quote = c
			case c:
				quote = 0
			}
		}
		if quote == 0 && c == '#' {
			return s[:i]
		}
		escape = quote != 0 && c == '\\' && !escape
	}
	return s
}

// closingQuote returns the index of the quote q closing s[0], or -1.
func closingQuote(s string, q byte) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i
		}
	}
	return -1
}

func unescape(c byte) string {
	switch c {
	case 'b':
		return "\b"
	case 't':
		return "\t"
	case 'n':
		return "\n"
	case 'r':
		return "\r"
	case 's':
		return " "
	case '\\', '"', '\'':
		return string(c)
	}
	return "\\" + string(c)
}
