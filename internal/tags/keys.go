package tags

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tag keys reserved by shoal. User tags must not use them.
const (
	KeyRole    = "role"
	KeyCluster = "cluster"
	KeyMaint   = "maint"
	KeyHealth  = "sh"
	// KeyVoter marks a consensus voter: its raft port, with "+" once it is
	// in a raft configuration (see Voter).
	KeyVoter = "rv"
)

// Values of the role tag.
const (
	RoleDB  = "db"
	RoleApp = "app"
)

// DefaultCluster is the cluster of a member without a cluster tag.
const DefaultCluster = "default"

// Limits enforced by Encode and Merge. Together with UserTagBudget they are
// chosen so that the worst case fits in MetaMaxSize (see TestWorstCaseFits).
const (
	// MetaMaxSize is memberlist.MetaMaxSize: the most bytes of node metadata
	// memberlist will gossip.
	MetaMaxSize = 512
	// MaxClusterLen is the longest cluster name, in bytes.
	MaxClusterLen = 64
	// MaxMaintLen is the longest maintenance reason, in bytes. It was 128
	// until the GTID position took 67 bytes of the worst case.
	MaxMaintLen = 64
	// MaxReasonLen is the longest health reason code Encode writes, in
	// bytes; it truncates longer ones, and Decode truncates the longer ones
	// (up to maxTokenLen) that earlier releases could write. Reason codes
	// are short words (the longest is cannot-publish, 14 bytes); the 13
	// bytes this saves (32 before) make room for a 32-bit optional fact and
	// the replica's not-receiving flag (";nr=1").
	MaxReasonLen = 19
	// maxTokenLen is the longest reason code or unknown field value Decode
	// accepts, in bytes (earlier releases wrote reason codes this long).
	maxTokenLen = 32
	// MaxLagSeconds is the largest lag that can be published; Encode clamps.
	MaxLagSeconds = 999_999_999
	// MaxHealthLen is the longest health tag value Decode accepts.
	MaxHealthLen = 256
	// UserTagBudget is the user tag allowance: user tags whose encoded size
	// (see UserTagsSize) is at most this many bytes always fit, whatever
	// the cluster name, maintenance reason and health state. Larger user tags
	// may fit today and fail later, for example when a long maintenance reason
	// is set. The worst case with this budget, every optional health field
	// at its longest, fits (TestWorstCaseFits, which logs the bytes to
	// spare: 16 before the replication source's server_id took 15, and the
	// GTID position's 67 came from the maintenance reason, 128 bytes before,
	// and this budget, 150 before; the consensus voter tag's 10 came from
	// this budget, 140 before); a new optional health field must fit there
	// too.
	UserTagBudget = 128
)

// IsReserved reports whether key is a tag key reserved by shoal.
func IsReserved(key string) bool {
	switch key {
	case KeyRole, KeyCluster, KeyMaint, KeyHealth, KeyVoter:
		return true
	}
	return false
}

// Cluster returns the cluster named by a member's tags, DefaultCluster when
// the tag is absent or empty.
func Cluster(t map[string]string) string {
	if c := t[KeyCluster]; c != "" {
		return c
	}
	return DefaultCluster
}

// Maint reports whether a member's tags put it in maintenance, and the reason
// cleaned for display: at most MaxMaintLen bytes, control characters replaced.
func Maint(t map[string]string) (reason string, ok bool) {
	r, ok := t[KeyMaint]
	if !ok {
		return "", false
	}
	return cleanText(r, MaxMaintLen), true
}

// cleanText makes outside text safe to show: invalid UTF-8 and control
// characters become '?', and the result is cut to at most max bytes on a
// rune boundary.
func cleanText(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ValidCluster reports whether c is a valid cluster name: 1 to MaxClusterLen
// bytes of [A-Za-z0-9._-]. Only such a name is ever part of a file name.
func ValidCluster(c string) bool {
	if c == "" || len(c) > MaxClusterLen {
		return false
	}
	for i := 0; i < len(c); i++ {
		if !isClusterByte(c[i]) {
			return false
		}
	}
	return true
}

// MaxKeyLen is the longest tag key, in bytes.
const MaxKeyLen = 64

// ValidKey reports whether k is a valid tag key: 1 to MaxKeyLen bytes of
// [A-Za-z0-9_.-]. Keys set locally (config, API) and keys gossiped by other
// members follow this one rule.
func ValidKey(k string) bool {
	if k == "" || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isClusterByte(k[i]) {
			return false
		}
	}
	return true
}

func isClusterByte(b byte) bool {
	return isAlnum(b) || b == '.' || b == '_' || b == '-'
}

// isReasonByte reports whether b may appear in a reason code (and in the
// value of an unknown field).
func isReasonByte(b byte) bool {
	return isAlnum(b) || b == '.' || b == '_' || b == '-' || b == ':' || b == '/'
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// MaxVoterLen is the longest voter tag value: a port, "+" and a raft group
// (GroupLen), or a port, "e" and a bootstrap_expect of one digit.
const MaxVoterLen = 5 + 1 + GroupLen

// GroupLen is the length of a raft group ID: lowercase hex digits.
const GroupLen = 8

// VoterTag is what a voter's tag says: the raft port it serves on its
// gossip address; whether it is in a raft configuration, and then of which
// raft group (Group, "" while its group is not yet set); before, the
// bootstrap_expect it was given (Expect, 0 when not said).
type VoterTag struct {
	Port     uint16
	InConfig bool
	Group    string
	Expect   int
}

// Voter reads a member's voter tag: "PORT", "PORTeN" (not in a
// configuration, bootstrap_expect N), "PORT+" or "PORT+GROUP" (in a
// configuration of raft group GROUP). ok is false without the tag or when
// it is none of these, with a port in 1-65535 (a value from another
// machine: never trusted further).
func Voter(t map[string]string) (v VoterTag, ok bool) {
	s, present := t[KeyVoter]
	if !present || len(s) > MaxVoterLen {
		return VoterTag{}, false
	}
	i := strings.IndexAny(s, "+e")
	port := s
	if i >= 0 {
		port = s[:i]
		switch rest := s[i+1:]; s[i] {
		case '+':
			if rest != "" && !ValidGroup(rest) {
				return VoterTag{}, false
			}
			v.InConfig, v.Group = true, rest
		case 'e':
			if len(rest) != 1 || rest[0] < '1' || rest[0] > '9' {
				return VoterTag{}, false
			}
			v.Expect = int(rest[0] - '0')
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || port[0] == '0' || port[0] == '+' {
		return VoterTag{}, false
	}
	v.Port = uint16(n)
	return v, true
}

// ValidGroup reports whether g is a raft group ID: GroupLen lowercase hex
// digits.
func ValidGroup(g string) bool {
	if len(g) != GroupLen {
		return false
	}
	for i := 0; i < len(g); i++ {
		if !(g[i] >= '0' && g[i] <= '9' || g[i] >= 'a' && g[i] <= 'f') {
			return false
		}
	}
	return true
}

// FormatVoter is the voter tag's value for Voter: the group when in a
// configuration, else the expect (when 1-9).
func FormatVoter(v VoterTag) string {
	s := strconv.Itoa(int(v.Port))
	switch {
	case v.InConfig:
		s += "+" + v.Group
	case v.Expect >= 1 && v.Expect <= 9:
		s += "e" + strconv.Itoa(v.Expect)
	}
	return s
}
