package consensus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/tags"
)

// The AppliedQuery (for `shoal switchover`): the agent running a
// switchover asks every agent which term of one cluster its sinks have
// applied, and waits until every router says the new one. The question is
// one version byte and the cluster's name, like a TermQuery; each answer
// is a small JSON object, AppliedAnswer.
//
// Neither is signed: an answer reveals only routing state that `shoal
// pool` already shows (and any holder of the gossip key can compute from
// the members' tags). A forged answer changes no routing: it can only
// make a switchover's report wrong, and the terms it reports on are
// signed and verified on their own (termmsg.go).
const (
	appliedV1 = 1
	// MaxAppliedAnswer bounds an answer's payload: it fits serf's query
	// response limit (1024 bytes, serf's default, which the agent keeps)
	// with the response's own framing and a sender name of
	// member.MaxNameLen bytes (TestAppliedAnswerFitsQueryResponse).
	MaxAppliedAnswer = 800
	// MaxAppliedWhy bounds an answer's why, in bytes.
	MaxAppliedWhy = 400
	// MaxAppliedSinks bounds the number of sinks an answer may claim: an
	// agent has one of each kind.
	MaxAppliedSinks = 16
	// maxAppliedAddr bounds a writer address, like a term's (pool.CheckTerm).
	maxAppliedAddr = 256
)

// ErrAppliedMalformed is the error of every applied question or answer
// that does not decode or breaks a rule.
var ErrAppliedMalformed = errors.New("malformed applied message")

// AppliedAnswer is one router's answer to an AppliedQuery: the writer
// term of Cluster that every sink of Node has applied, and the writer it
// routes to. Term 0 means none (nothing applied yet, or a cluster that
// requires no term); Writer "" means the applied pool has no writer.
// Sinks 0 says Node drives no sink: it is no router, and a switchover
// does not wait for it.
type AppliedAnswer struct {
	V       int    `json:"v"`
	Node    string `json:"node"`
	Cluster string `json:"cluster"`
	Term    uint64 `json:"term"`
	Writer  string `json:"writer"`
	Addr    string `json:"addr"`
	Sinks   int    `json:"sinks"`
	// Why says why a sink has not applied this agent's newest pool (for
	// example "haproxy: failing: dial unix ...: connection refused", or
	// "file: frozen (isolated)"); "" when every sink has.
	Why string `json:"why,omitempty"`
}

// EncodeAppliedQuery is an AppliedQuery payload asking for cluster's
// applied term.
func EncodeAppliedQuery(cluster string) []byte {
	return append([]byte{appliedV1}, cluster...)
}

// DecodeAppliedQuery returns the cluster an AppliedQuery payload asks for.
func DecodeAppliedQuery(b []byte) (string, error) {
	if len(b) < 2 || b[0] != appliedV1 || !tags.ValidCluster(string(b[1:])) {
		return "", fmt.Errorf("%w: applied query of %d bytes", ErrAppliedMalformed, len(b))
	}
	return string(b[1:]), nil
}

// EncodeAppliedAnswer encodes an answer within MaxAppliedAnswer bytes.
// Control characters in Why become spaces, and Why is shortened (at a
// UTF-8 boundary, with "…") to MaxAppliedWhy bytes and then to whatever
// room the rest leaves; an answer that breaks a rule even without it is
// an error, so that only answers DecodeAppliedAnswer accepts are sent.
func EncodeAppliedAnswer(a AppliedAnswer) ([]byte, error) {
	a.V = appliedV1
	a.Why = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(a.Why, "?"))
	if len(a.Why) > MaxAppliedWhy {
		a.Why = shorten(a.Why, MaxAppliedWhy-len("…"))
	}
	if err := checkAppliedAnswer(a); err != nil {
		return nil, err
	}
	for {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // so that no character takes more than twice its bytes
		if err := enc.Encode(a); err != nil {
			return nil, fmt.Errorf("encode applied answer of %q: %w", a.Cluster, err)
		}
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if len(b) <= MaxAppliedAnswer {
			return b, nil
		}
		if a.Why == "" {
			return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrAppliedMalformed, len(b), MaxAppliedAnswer)
		}
		// A character JSON escapes (a quote, a backslash, U+2028) takes
		// two bytes for one: cutting half the excess may not be enough,
		// and the loop cuts again; it never cuts more than needed twice.
		a.Why = shorten(a.Why, len(a.Why)-(len(b)-MaxAppliedAnswer+1)/2-len("…"))
	}
}

// DecodeAppliedAnswer decodes and checks an answer from another agent: the
// version, every name (member and cluster rules), the address, the
// number of sinks and the why's length and text.
func DecodeAppliedAnswer(b []byte) (AppliedAnswer, error) {
	if len(b) > MaxAppliedAnswer {
		return AppliedAnswer{}, fmt.Errorf("%w: %d bytes, more than %d", ErrAppliedMalformed, len(b), MaxAppliedAnswer)
	}
	var a AppliedAnswer
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&a); err != nil {
		return AppliedAnswer{}, fmt.Errorf("%w: %w", ErrAppliedMalformed, err)
	}
	if dec.More() {
		return AppliedAnswer{}, fmt.Errorf("%w: data after the answer", ErrAppliedMalformed)
	}
	if err := checkAppliedAnswer(a); err != nil {
		return AppliedAnswer{}, err
	}
	return a, nil
}

// checkAppliedAnswer reports the first rule a breaks.
func checkAppliedAnswer(a AppliedAnswer) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrAppliedMalformed, fmt.Sprintf(format, args...))
	}
	switch {
	case a.V != appliedV1:
		return bad("version %d", a.V)
	case member.CheckName(a.Node) != "":
		return bad("node: %s", member.CheckName(a.Node))
	case !tags.ValidCluster(a.Cluster):
		return bad("cluster %q: want 1-%d bytes of [A-Za-z0-9._-]", a.Cluster, tags.MaxClusterLen)
	case a.Writer != "" && member.CheckName(a.Writer) != "":
		return bad("writer: %s", member.CheckName(a.Writer))
	case (a.Writer == "") != (a.Addr == ""):
		return bad("writer %q with address %q: both or neither", a.Writer, a.Addr)
	case a.Addr != "" && !validHostPort(a.Addr):
		return bad("addr %q: want host:port of at most %d bytes", a.Addr, maxAppliedAddr)
	case a.Sinks < 0 || a.Sinks > MaxAppliedSinks:
		return bad("sinks %d: want 0 to %d", a.Sinks, MaxAppliedSinks)
	case len(a.Why) > MaxAppliedWhy:
		return bad("why of %d bytes, more than %d", len(a.Why), MaxAppliedWhy)
	case !utf8.ValidString(a.Why) || strings.ContainsFunc(a.Why, unicode.IsControl):
		return bad("why is not printable text")
	case a.Sinks == 0 && (a.Term != 0 || a.Writer != "" || a.Why != ""):
		return bad("no sinks, yet a term, writer or why")
	}
	return nil
}

// validHostPort reports whether s is a short host:port with a host, a
// port and no control characters.
func validHostPort(s string) bool {
	if len(s) > maxAppliedAddr || !member.Printable(s) {
		return false
	}
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != ""
}
