package consensus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// How terms reach every agent (docs/consensus.md, "Publishing"): the
// leader broadcasts each term it grants as a serf user event, TermEvent,
// and again after it is elected; an agent that may lack a term asks with
// the serf query TermQuery, which every voter answers from its own copy of
// the terms. Both carry a signed term, so an agent that holds only the
// gossip key cannot forge one: routers verify it with the term-signing
// public key (Keyring.TermPublicKeys, or consensus.term_key).
const (
	// TermEvent is the user event that carries one signed term.
	TermEvent = "shoal:term"
	// TermQuery asks the voters for one cluster's term; its payload is
	// EncodeTermQuery's, each answer a signed term.
	TermQuery = "shoal:term?"
	// AppliedQuery asks the routers which term of a cluster their sinks
	// have applied (a switchover waits on the answers).
	AppliedQuery = "shoal:applied?"
	// SwitchQuery carries one signed step of a switchover to the agent
	// that must take it (package switchover).
	SwitchQuery = "shoal:switch"
	// InternalPrefix begins every user event and query name of shoal's own.
	InternalPrefix = "shoal:"
)

// IsInternalEvent reports whether a user event or query name is one of
// shoal's own (it begins with InternalPrefix), which event hooks never see.
func IsInternalEvent(name string) bool { return strings.HasPrefix(name, InternalPrefix) }

// Wire format of a signed term: one version byte, the term as JSON, and
// the ed25519 signature of termDomain followed by that JSON. Version 2
// added the raft group; a version 1 term (no group) is refused, so that a
// term captured before cannot be replayed into a fleet of this release.
const (
	signedTermV2 = 2
	termDomain   = "shoal writer term v2\x00"
	// MaxSignedTerm bounds a signed term on the wire: it fits the user
	// event and query response limits the agent gives serf.
	MaxSignedTerm = 800
)

// signedFields are the term's fields as signed.
type signedFields struct {
	Cluster string    `json:"cluster"`
	Number  uint64    `json:"term"`
	Writer  string    `json:"writer"`
	Addr    string    `json:"addr"`
	Granted time.Time `json:"granted"`
	Why     string    `json:"why,omitempty"`
	Group   string    `json:"group"`
}

// EncodeSignedTerm signs t with the keyring's primary term key. Why is
// shortened (at a UTF-8 boundary, with "…") when the whole would exceed
// MaxSignedTerm; a term too large even without it is an error.
func EncodeSignedTerm(kr *Keyring, t pool.Term) ([]byte, error) {
	if err := pool.CheckTerm(t); err != nil {
		return nil, fmt.Errorf("sign term: %w", err)
	}
	if t.Group == "" {
		return nil, fmt.Errorf("sign term of %q: no raft group", t.Cluster)
	}
	f := signedFields{Cluster: t.Cluster, Number: t.Number, Writer: t.Writer, Addr: t.Addr, Granted: t.Granted.UTC(), Why: t.Why, Group: t.Group}
	for {
		msg, err := json.Marshal(f)
		if err != nil {
			return nil, fmt.Errorf("sign term of %q: %w", t.Cluster, err)
		}
		if n := 1 + len(msg) + ed25519.SignatureSize; n > MaxSignedTerm {
			if f.Why == "" {
				return nil, fmt.Errorf("sign term of %q: %d bytes, more than %d", t.Cluster, n, MaxSignedTerm)
			}
			f.Why = shorten(f.Why, len(f.Why)-(n-MaxSignedTerm)-8)
			continue
		}
		out := make([]byte, 0, 1+len(msg)+ed25519.SignatureSize)
		out = append(out, signedTermV2)
		out = append(out, msg...)
		return append(out, kr.SignTerm(append([]byte(termDomain), msg...))...), nil
	}
}

// shorten cuts s to at most n bytes at a rune boundary and marks the cut.
func shorten(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// Errors of DecodeSignedTerm, for counting by kind.
var (
	ErrTermMalformed = errors.New("malformed signed term")
	ErrTermSignature = errors.New("signature does not verify with any term key")
)

// DecodeSignedTerm verifies a signed term with pubs and returns it. It
// never trusts a byte before the signature verifies.
func DecodeSignedTerm(b []byte, pubs []ed25519.PublicKey) (pool.Term, error) {
	if len(b) > MaxSignedTerm || len(b) < 1+2+ed25519.SignatureSize {
		return pool.Term{}, fmt.Errorf("%w: %d bytes", ErrTermMalformed, len(b))
	}
	if b[0] != signedTermV2 {
		return pool.Term{}, fmt.Errorf("%w: version %d", ErrTermMalformed, b[0])
	}
	msg, sig := b[1:len(b)-ed25519.SignatureSize], b[len(b)-ed25519.SignatureSize:]
	if !VerifyTerm(pubs, append([]byte(termDomain), msg...), sig) {
		return pool.Term{}, ErrTermSignature
	}
	var f signedFields
	dec := json.NewDecoder(bytes.NewReader(msg))
	if err := dec.Decode(&f); err != nil {
		return pool.Term{}, fmt.Errorf("%w: %w", ErrTermMalformed, err)
	}
	t := pool.Term{Cluster: f.Cluster, Number: f.Number, Writer: f.Writer, Addr: f.Addr, Granted: f.Granted, Why: f.Why, Group: f.Group}
	if t.Group == "" {
		return pool.Term{}, fmt.Errorf("%w: no raft group", ErrTermMalformed)
	}
	if err := pool.CheckTerm(t); err != nil {
		return pool.Term{}, fmt.Errorf("%w: %w", ErrTermMalformed, err)
	}
	return t, nil
}

// termQueryV1 is the version byte of a term query.
const termQueryV1 = 1

// EncodeTermQuery is a TermQuery payload asking for cluster's term.
func EncodeTermQuery(cluster string) []byte {
	return append([]byte{termQueryV1}, cluster...)
}

// DecodeTermQuery returns the cluster a TermQuery payload asks for.
func DecodeTermQuery(b []byte) (string, error) {
	if len(b) < 2 || b[0] != termQueryV1 || !tags.ValidCluster(string(b[1:])) {
		return "", fmt.Errorf("%w: term query of %d bytes", ErrTermMalformed, len(b))
	}
	return string(b[1:]), nil
}
