package hooks

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   \t ", nil},
		{"/bin/true", []string{"/bin/true"}},
		{"  a   b\tc  ", []string{"a", "b", "c"}},
		{`a 'b c' d`, []string{"a", "b c", "d"}},
		{`'it''s'`, []string{"its"}},
		{`'it'\''s'`, []string{"it's"}},
		{`"it's"`, []string{"it's"}},
		{`''`, []string{""}},
		{`a "" b`, []string{"a", "", "b"}},
		{`'$(touch PWNED)'`, []string{"$(touch PWNED)"}},
		{"'`x`'", []string{"`x`"}},
		{`'a|b;c&d<e>f(g)'`, []string{"a|b;c&d<e>f(g)"}},
		{`a\ b`, []string{"a b"}},
		{`\'`, []string{"'"}},
		{`\"`, []string{`"`}},
		{`\\`, []string{`\`}},
		{`\$HOME`, []string{"$HOME"}},
		{`\|`, []string{"|"}},
		{"a\\\nb", []string{"ab"}},
		{"a \\\n b", []string{"a", "b"}},
		{`"a\"b"`, []string{`a"b`}},
		{`"a\\b"`, []string{`a\b`}},
		{`"a\$b"`, []string{`a$b`}},
		{"\"a\\`b\"", []string{"a`b"}},
		{`"a\nb"`, []string{`a\nb`}}, // backslash kept before other characters, as in sh
		{"\"a\\\nb\"", []string{"ab"}},
		{"'a\nb'", []string{"a\nb"}},
		{"\"a\nb\"", []string{"a\nb"}},
		{`a"b"'c'd`, []string{"abcd"}},
		{`sh -c 'echo "$SERF_EVENT" >> out'`, []string{"sh", "-c", `echo "$SERF_EVENT" >> out`}},
		{`--opt=x*y? [z]`, []string{"--opt=x*y?", "[z]"}},
		{`a#b c~d`, []string{"a#b", "c~d"}},
		{`'#x' "~y"`, []string{"#x", "~y"}},
		{`héllo wörld`, []string{"héllo", "wörld"}},
		{`\é`, []string{"é"}},
	}
	for _, tt := range tests {
		got, err := SplitArgs(tt.in)
		if err != nil {
			t.Errorf("SplitArgs(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSplitArgsErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`echo 'abc`, "unterminated single quote at offset 5"},
		{`echo "abc`, "unterminated double quote at offset 5"},
		{`echo "a\"`, "unterminated double quote at offset 5"},
		{`echo abc\`, "trailing backslash at offset 8"},
		{`a | b`, `unquoted '|' at offset 2`},
		{`a; b`, `unquoted ';' at offset 1`},
		{`a && b`, `unquoted '&' at offset 2`},
		{`a > out`, `unquoted '>' at offset 2`},
		{`a < in`, `unquoted '<' at offset 2`},
		{`(a)`, `unquoted '(' at offset 0`},
		{`echo $HOME`, `unquoted '$' at offset 5`},
		{"echo `id`", "unquoted '`' at offset 5"},
		{`echo "$HOME"`, `'$' inside double quotes at offset 6`},
		{"echo \"`id`\"", "'`' inside double quotes at offset 6"},
		{"a\nb", "unquoted newline at offset 1"},
		{`echo #comment`, `unquoted '#' at the start of a word at offset 5`},
		{`~/bin/x`, `unquoted '~' at the start of a word at offset 0`},
	}
	for _, tt := range tests {
		got, err := SplitArgs(tt.in)
		if err == nil {
			t.Errorf("SplitArgs(%q) = %q, want error %q", tt.in, got, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("SplitArgs(%q) error %q, want it to contain %q", tt.in, err, tt.want)
		}
	}
}

// shQuote quotes s for SplitArgs (and sh).
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestShQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a", "it's", `$(x) "y" \z`, "a\nb", "''''"} {
		got, err := SplitArgs(shQuote(s) + " " + shQuote(s))
		if err != nil || !slices.Equal(got, []string{s, s}) {
			t.Errorf("SplitArgs(shQuote(%q)) = %q, %v", s, got, err)
		}
	}
}

func FuzzSplitArgs(f *testing.F) {
	for _, s := range []string{`a 'b c' "d\"e" f\ g`, `'`, `"`, `\`, "a\\\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args, err := SplitArgs(s)
		if err != nil {
			return
		}
		// Re-quoting the words must give them back.
		var b strings.Builder
		for _, a := range args {
			b.WriteString(shQuote(a) + " ")
		}
		again, err := SplitArgs(b.String())
		if err != nil || !slices.Equal(again, args) {
			t.Fatalf("round trip of %q: %q → %q, %v", s, args, again, err)
		}
	})
}
