package member

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// Limits on what a member may gossip.
const (
	MaxNameLen     = 128 // bytes
	MaxTags        = 64
	MaxTagValueLen = 512 // bytes
	// MaxEscapedLen is the longest form Escape returns, in bytes.
	MaxEscapedLen = 512
	// maxDetailQuote bounds each piece of outside text quoted in a detail.
	maxDetailQuote = 40
)

// Problem says which rule a member breaks; the zero value means none.
type Problem struct {
	Reason pool.Reason // pool.ReasonBadName or pool.ReasonBadTags
	Detail string      // which rule, as safe text
}

// OK reports whether p is no problem.
func (p Problem) OK() bool { return p.Reason == pool.ReasonNone }

// Member is a gossip member as shoal may use it once admitted. For a valid
// member Name and Tags are the gossiped ones (Tags is not copied); for an
// invalid one they are escaped display forms (see the package doc).
type Member struct {
	Name    string
	Tags    map[string]string
	Problem Problem
	// Health is a valid member's health tag, decoded here once for every
	// reader (the pool, the API): nil when it publishes none or the tag
	// does not decode, and then HealthErr says why. An invalid member's is
	// never decoded.
	Health    *tags.Health
	HealthErr string
}

// Admit checks a gossiped name and tag set against the rules and returns
// the member as shoal may use it, its health tag decoded. It is pure and
// deterministic: every agent admits the same member the same way.
func Admit(name string, t map[string]string) Member {
	p := Check(name, t)
	if !p.OK() {
		return Member{Name: Escape(name), Tags: escapeTags(t), Problem: p}
	}
	m := Member{Name: name, Tags: t}
	var err error
	if m.Health, err = tags.Published(t); err != nil {
		m.HealthErr = err.Error()
	}
	return m
}

// Check returns the first rule name or t breaks: name rules first, then
// the tag count, then each tag in key order.
func Check(name string, t map[string]string) Problem {
	if d := CheckName(name); d != "" {
		return Problem{Reason: pool.ReasonBadName, Detail: d}
	}
	if d := CheckTags(t); d != "" {
		return Problem{Reason: pool.ReasonBadTags, Detail: d}
	}
	return Problem{}
}

// CheckName describes the name rule name breaks, or returns "".
func CheckName(name string) string {
	switch {
	case name == "":
		return "name is empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("name is %d bytes, limit %d", len(name), MaxNameLen)
	}
	if d := checkText(name, strconv.IsPrint); d != "" {
		return "name " + d
	}
	if i := strings.IndexByte(name, '\\'); i >= 0 {
		return fmt.Sprintf("name has a backslash at byte %d (reserved for escaped names)", i)
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' {
		return "name has a leading or trailing space"
	}
	return ""
}

// CheckTags describes the first tag rule t breaks, or returns "".
func CheckTags(t map[string]string) string {
	if len(t) > MaxTags {
		return fmt.Sprintf("%d tags, limit %d", len(t), MaxTags)
	}
	for _, k := range slices.Sorted(keys(t)) {
		v := t[k]
		if !tags.ValidKey(k) {
			return fmt.Sprintf("tag key %s: want 1-%d bytes of [A-Za-z0-9_.-]", quote(k), tags.MaxKeyLen)
		}
		switch k {
		case tags.KeyCluster:
			if !tags.ValidCluster(v) {
				return fmt.Sprintf("tag cluster %s: want 1-%d bytes of [A-Za-z0-9._-]", quote(v), tags.MaxClusterLen)
			}
			continue
		case tags.KeyHealth:
			continue // tags.Decode's own rules, applied by Admit
		}
		if len(v) > MaxTagValueLen {
			return fmt.Sprintf("tag %s: value is %d bytes, limit %d", k, len(v), MaxTagValueLen)
		}
		if d := checkText(v, notControl); d != "" {
			return fmt.Sprintf("tag %s: value %s", k, d)
		}
	}
	return ""
}

func keys(t map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range t {
			if !yield(k) {
				return
			}
		}
	}
}

func notControl(r rune) bool { return !unicode.IsControl(r) }

// checkText describes where s is not valid UTF-8 or has a character ok
// refuses, or returns "".
func checkText(s string, ok func(rune) bool) string {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Sprintf("is not valid UTF-8 (byte %#02x at byte %d)", s[i], i)
		}
		if !ok(r) {
			return fmt.Sprintf("has the character %U at byte %d", r, i)
		}
		i += size
	}
	return ""
}

// Printable reports whether s is valid UTF-8 whose every character is
// printable (strconv.IsPrint): text that is safe to show or to use as a
// metric label as it is. Escape's results are all printable.
func Printable(s string) bool {
	return checkText(s, strconv.IsPrint) == ""
}

// Escape returns the display form of s: s itself when it is printable, has
// no backslash (every valid name) and is at most MaxEscapedLen bytes; else s
// quoted the way strconv.Quote does, without the surrounding quotes. A
// quoted form longer than MaxEscapedLen bytes is cut on an escape boundary
// and ends in `\...#` and 16 hex digits of the SHA-256 of s. The three kinds
// of result cannot be mistaken for one another (no backslash; only whole
// escapes; a backslash that starts no escape), so Escape is injective up to
// the hash, and every result is printable ASCII escapes and printable text.
func Escape(s string) string {
	plain := Printable(s) && !strings.Contains(s, `\`)
	if plain && len(s) <= MaxEscapedLen {
		return s
	}
	const suffixLen = len(`\...#`) + 16
	var b strings.Builder
	cut := 0 // length of the longest prefix of whole escapes that leaves room for the suffix
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		q := strconv.Quote(s[i : i+size])
		b.WriteString(q[1 : len(q)-1])
		i += size
		if b.Len() <= MaxEscapedLen-suffixLen {
			cut = b.Len()
		}
		if b.Len() > MaxEscapedLen {
			break
		}
	}
	if b.Len() <= MaxEscapedLen {
		return b.String()
	}
	sum := sha256.Sum256([]byte(s))
	return b.String()[:cut] + `\...#` + hex.EncodeToString(sum[:8])
}

// quote returns s, at most maxDetailQuote bytes of it, escaped and in
// double quotes, for a detail message.
func quote(s string) string {
	cut := ""
	if len(s) > maxDetailQuote {
		i := maxDetailQuote
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, cut = s[:i], "..."
	}
	return `"` + Escape(s) + cut + `"`
}

// escapeTags returns the display form of an invalid member's tags: keys
// and values escaped, at most MaxTags of them, shoal's reserved keys first,
// then by key. Keys that escape alike keep the first value.
func escapeTags(t map[string]string) map[string]string {
	if t == nil {
		return nil
	}
	ks := slices.Sorted(keys(t))
	slices.SortStableFunc(ks, func(a, b string) int {
		switch ra, rb := tags.IsReserved(a), tags.IsReserved(b); {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return 0
	})
	out := make(map[string]string, min(len(ks), MaxTags))
	for _, k := range ks {
		if len(out) == MaxTags {
			break
		}
		ek := Escape(k)
		if _, dup := out[ek]; !dup {
			out[ek] = Escape(t[k])
		}
	}
	return out
}

// Safe returns s when it is printable and at most MaxEscapedLen bytes, else
// Escape(s): text that may be outside input or an already escaped display
// form, made safe to show or to use as a metric label without escaping a
// display form twice.
func Safe(s string) string {
	if len(s) <= MaxEscapedLen && Printable(s) {
		return s
	}
	return Escape(s)
}
