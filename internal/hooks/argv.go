package hooks

import (
	"fmt"
	"strings"
)

// SplitArgs splits a handler command into argv with the quoting rules of a
// POSIX shell, without any expansion:
//
//   - blanks (space, tab) separate words; an empty pair of quotes makes an
//     empty word;
//   - 'single quotes' keep everything literally up to the next ';
//   - "double quotes" keep everything literally, except that a backslash
//     escapes $ ` " \ and newline (and is kept before any other character);
//   - outside quotes a backslash makes the next character literal, and
//     backslash-newline is a line continuation.
//
// Whatever sh would interpret but this splitter would pass on literally is
// an error instead, so that an accepted command means what it looks like:
// unquoted | & ; < > ( ) $ ` and newline, $ and ` inside double quotes, and
// # or ~ at the start of a word. Glob characters (* ? [) are kept literally.
// Errors give the byte offset of the offending character.
func SplitArgs(s string) ([]string, error) {
	var (
		args   []string
		cur    strings.Builder
		inWord bool
	)
	endWord := func() {
		if inWord {
			args = append(args, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			endWord()
			i++
		case c == '\n':
			return nil, fmt.Errorf("unquoted newline at offset %d: sh would start a new command there; quote it or use sh -c", i)
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("trailing backslash at offset %d", i)
			}
			if s[i+1] == '\n' { // line continuation
				i += 2
				continue
			}
			cur.WriteByte(s[i+1])
			inWord = true
			i += 2
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote at offset %d", i)
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '"':
			n, err := doubleQuoted(s, i, &cur)
			if err != nil {
				return nil, err
			}
			inWord = true
			i = n
		case strings.IndexByte("|&;<>()", c) >= 0:
			return nil, fmt.Errorf("unquoted %q at offset %d: commands are run without a shell; quote it, or write sh -c '...' to use a shell", c, i)
		case c == '$' || c == '`':
			return nil, fmt.Errorf("unquoted %q at offset %d: nothing is expanded (commands are run without a shell); quote it with '...', or write sh -c '...' to use a shell", c, i)
		case (c == '#' || c == '~') && !inWord:
			return nil, fmt.Errorf("unquoted %q at the start of a word at offset %d: sh would treat it specially, this runner does not; quote it", c, i)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	endWord()
	return args, nil
}

// doubleQuoted appends the contents of the double-quoted string opening at
// s[start] to cur and returns the offset after its closing quote.
func doubleQuoted(s string, start int, cur *strings.Builder) (int, error) {
	for i := start + 1; i < len(s); {
		switch c := s[i]; c {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 < len(s) {
				switch s[i+1] {
				case '$', '`', '"', '\\':
					cur.WriteByte(s[i+1])
					i += 2
					continue
				case '\n':
					i += 2
					continue
				}
			}
			cur.WriteByte(c)
			i++
		case '$', '`':
			return 0, fmt.Errorf("%q inside double quotes at offset %d: nothing is expanded; use single quotes or \\%c", c, i, c)
		default:
			cur.WriteByte(c)
			i++
		}
	}
	return 0, fmt.Errorf("unterminated double quote at offset %d", start)
}
