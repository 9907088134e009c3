package cli

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// sanitize is the one function through which the CLI prints text that came
// from another machine or from the agent (node names, addresses, tags,
// reasons, errors, query responses, log lines): nothing in it can reach the
// terminal as a control sequence or forge a line.
//
// Text without anything to escape is returned unchanged, so ordinary UTF-8
// (accents, CJK, emoji) prints as it is. Otherwise, Go-style:
//   - invalid UTF-8 bytes become \xff;
//   - control characters (C0 with tab, newline and CR, DEL, and C1, which
//     holds the one-byte CSI U+009B) become \t, \n, \r, \x1b, \u009b...;
//   - bidirectional formatting characters (U+202A-U+202E, U+2066-U+2069,
//     U+200E, U+200F, U+061C), which reorder what follows them on screen,
//     and the line and paragraph separators U+2028, U+2029 become \u202e...;
//   - a backslash becomes \\, so that an escape shown can only be one.
//
// JSON output (--format json) does not go through it: encoding/json
// already escapes control characters, and the reader is a program.
func sanitize(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case escapeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.IndexFunc(s, escapeRune) >= 0
}

// escapeRune reports whether r must not reach a terminal raw.
func escapeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// sanitizeLines is sanitize for multi-line text the CLI itself composed
// (configuration errors, one per line): every line is escaped, the line
// breaks are kept.
func sanitizeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = sanitize(l)
	}
	return strings.Join(lines, "\n")
}
