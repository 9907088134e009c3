package hooks

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/serf/serf"
)

// InheritedEnv are the variables of the agent's own environment that every
// handler gets (when set); Config.EnvAllow adds more.
var InheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER"}

// DefaultPath is the PATH a handler gets when the agent has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sanitizeTagRegexp is Serf's: tag names are upper-cased and every
// character outside [A-Z0-9_] becomes '_'.
var sanitizeTagRegexp = regexp.MustCompile(`[^A-Z0-9_]`)

// TagEnvName returns the suffix of the SERF_TAG_/SHOAL_TAG_ variable for a
// tag name, exactly as Serf builds it.
func TagEnvName(tag string) string {
	return sanitizeTagRegexp.ReplaceAllString(strings.ToUpper(tag), "_")
}

// buildEnv returns a handler's environment, sorted: the inherited variables
// (lookup reads the agent's environment), then the event's own, which win.
func buildEnv(lookup func(string) (string, bool), inherit []string, self serf.Member, it *item) []string {
	env := map[string]string{}
	for _, k := range inherit {
		if v, ok := lookup(k); ok {
			env[k] = v
		}
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = DefaultPath
	}
	set := func(k, v string) {
		env["SERF_"+k] = v
		env["SHOAL_"+k] = v
	}
	set("EVENT", it.typ)
	set("SELF_NAME", self.Name)
	set("SELF_ROLE", self.Tags["role"])
	// Sorted, so that when two tag names sanitize to the same variable the
	// result is the same every time (Serf's depends on map order).
	for _, k := range slices.Sorted(maps.Keys(self.Tags)) {
		set("TAG_"+TagEnvName(k), self.Tags[k])
	}
	switch {
	case it.user != nil:
		set("USER_EVENT", it.user.Name)
		set("USER_LTIME", strconv.FormatUint(uint64(it.user.LTime), 10))
	case it.query != nil:
		set("QUERY_NAME", it.query.Name)
		set("QUERY_LTIME", strconv.FormatUint(uint64(it.query.LTime), 10))
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		// execve cannot pass a NUL byte; Serf fails the whole run, we
		// escape it the way Serf escapes tabs in stdin.
		out = append(out, k+"="+strings.ReplaceAll(env[k], "\x00", `\0`))
	}
	return out
}

// buildStdin returns what a handler reads on stdin.
func buildStdin(self serf.Member, it *item) ([]byte, error) {
	switch {
	case it.member != nil:
		return memberLines(it.member.Members), nil
	case it.user != nil:
		return payloadLine(it.user.Payload), nil
	case it.query != nil:
		return payloadLine(it.query.Payload), nil
	default:
		b, err := json.Marshal(stdinDoc{
			Version: StdinVersion,
			Event:   it.shoal.Type,
			Time:    it.shoal.Time,
			Node:    self.Name,
			Data:    it.shoal.Data,
		})
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
}

// memberLines formats members like Serf: one line per member,
// "NAME\tADDRESS\tROLE\tTAGS\n", TAGS being k=v pairs joined by ','; tabs
// and newlines in the name, role and tags are written as \t and \n. Unlike
// Serf (map order) the tags are sorted by name.
func memberLines(members []serf.Member) []byte {
	var b bytes.Buffer
	for _, m := range members {
		pairs := make([]string, 0, len(m.Tags))
		for _, k := range slices.Sorted(maps.Keys(m.Tags)) {
			pairs = append(pairs, k+"="+m.Tags[k])
		}
		b.WriteString(eventClean(m.Name))
		b.WriteByte('\t')
		b.WriteString(m.Addr.String())
		b.WriteByte('\t')
		b.WriteString(eventClean(m.Tags["role"]))
		b.WriteByte('\t')
		b.WriteString(eventClean(strings.Join(pairs, ",")))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// eventClean is Serf's: tabs and newlines become \t and \n.
func eventClean(v string) string {
	v = strings.ReplaceAll(v, "\t", `\t`)
	return strings.ReplaceAll(v, "\n", `\n`)
}

// payloadLine is Serf's stdin for user events and queries: the payload,
// with a newline appended when it is not empty and does not end in one.
func payloadLine(p []byte) []byte {
	out := make([]byte, len(p), len(p)+1)
	copy(out, p)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out
}
