package consensus

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"time"
)

// KeySize is the length in bytes of a consensus keyring key (before base64).
const KeySize = 32

// HKDF info strings: one per derived key, so the TLS identity and the
// term-signing key of one keyring key are independent.
const (
	infoTLS  = "shoal consensus tls v1"
	infoTerm = "shoal consensus term signing v1"
)

// certName is the common name, DNS name and TLS server name of every
// consensus certificate. Voters are told apart by the identity their
// certificate binds (identity.go), not by this name.
const certName = "shoal-consensus"

// alpnPrefix starts the ALPN name by which a client announces each key it
// holds (the prefix and 16 hex digits of the SHA-256 of the key's TLS public
// key), so that a server can present a key the client accepts during a key
// rotation.
const alpnPrefix = "shoal-consensus/"

// Fixed certificate fields, so that a key always gives the same certificate.
var (
	certSerial    = big.NewInt(1)
	certNotBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	certNotAfter  = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Keyring is the consensus keyring: the keys a voter accepts from its peers,
// the first of which (the primary) it presents and signs with. It holds, per
// key, only what was derived from it: the TLS identity (a certificate and
// its private key) and the term-signing key pair. A Keyring is immutable and
// safe for concurrent use. Formatting a Keyring (String, Format) shows only
// the number of keys and the primary's fingerprint.
type Keyring struct {
	keys        []*derivedKey // keys[0] is the primary
	fingerprint string
}

// derivedKey is what one keyring key yields. Private keys sit two pointers
// deep (cert, term): fmt, even with a bad verb on a struct that holds a
// Keyring, expands at most one pointer level of unexported fields.
type derivedKey struct {
	tlsPub ed25519.PublicKey
	// cert is the self-signed certificate of the TLS key: the issuer of
	// the voters' certificates (Keyring.Issue), which ca signs.
	cert    *tls.Certificate
	ca      *caKey
	proto   string // ALPN name announcing that this key is held
	term    *termKey
	termPub ed25519.PublicKey
}

// termKey holds a term-signing private key (see derivedKey).
type termKey struct{ priv ed25519.PrivateKey }

// caKey holds the TLS private key that signs voters' certificates (see
// derivedKey).
type caKey struct{ priv ed25519.PrivateKey }

// ParseKeyring parses a consensus keyring: each key is the standard base64
// encoding of exactly KeySize bytes; there is at least one key, no two are
// equal, and the first is the primary. Errors name the key by its index and
// never contain the key.
func ParseKeyring(keys []string) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("consensus keyring: no keys, want at least one")
	}
	kr := &Keyring{keys: make([]*derivedKey, 0, len(keys))}
	raws := make([][]byte, 0, len(keys))
	for i, s := range keys {
		raw, err := decodeKey(s)
		if err != nil {
			return nil, fmt.Errorf("consensus keyring key %d: %w", i, err)
		}
		for j, prev := range raws {
			if bytes.Equal(prev, raw) {
				return nil, fmt.Errorf("consensus keyring key %d: duplicate of key %d", i, j)
			}
		}
		raws = append(raws, raw)
		dk, err := deriveKey(raw)
		if err != nil {
			return nil, fmt.Errorf("consensus keyring key %d: %w", i, err)
		}
		kr.keys = append(kr.keys, dk)
	}
	kr.fingerprint = fingerprint(kr.keys[0].tlsPub)
	return kr, nil
}

// decodeKey decodes one base64 key and checks its length and that it is not
// all zeros. Its errors never contain the key.
func decodeKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// CorruptInputError holds only an offset, never the input.
		return nil, fmt.Errorf("not standard base64: %w", err)
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("decodes to %d bytes, want %d", len(raw), KeySize)
	}
	if bytes.Equal(raw, make([]byte, KeySize)) {
		return nil, errors.New("all zeros")
	}
	return raw, nil
}

// deriveKey derives the TLS identity and the term-signing key pair of one
// raw key.
func deriveKey(raw []byte) (*derivedKey, error) {
	tlsPriv, err := deriveEd25519(raw, infoTLS)
	if err != nil {
		return nil, err
	}
	cert, err := selfSigned(tlsPriv)
	if err != nil {
		return nil, err
	}
	termPriv, err := deriveEd25519(raw, infoTerm)
	if err != nil {
		return nil, err
	}
	tlsPub := tlsPriv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(tlsPub)
	return &derivedKey{
		tlsPub:  tlsPub,
		cert:    cert,
		ca:      &caKey{priv: tlsPriv},
		proto:   alpnPrefix + hex.EncodeToString(sum[:8]),
		term:    &termKey{priv: termPriv},
		termPub: termPriv.Public().(ed25519.PublicKey),
	}, nil
}

// deriveEd25519 derives an ed25519 private key from raw with HKDF-SHA256
// and the given info string.
func deriveEd25519(raw []byte, info string) (ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, raw, nil, info, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("derive %q key: %w", info, err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// noRand fails every read: certificate creation must not use randomness, so
// that a key always gives the same certificate.
type noRand struct{}

func (noRand) Read([]byte) (int, error) {
	return 0, errors.New("certificate creation must be deterministic")
}

var _ io.Reader = noRand{}

// selfSigned builds the self-signed TLS certificate of a TLS identity.
// Every field is fixed and ed25519 signatures are deterministic, so the same
// key always gives the same certificate.
func selfSigned(priv ed25519.PrivateKey) (*tls.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          certSerial,
		Subject:               pkix.Name{CommonName: certName},
		DNSNames:              []string{certName},
		NotBefore:             certNotBefore,
		NotAfter:              certNotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(noRand{}, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, fmt.Errorf("create tls certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse tls certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}

// fingerprint is the first 8 hex digits of the SHA-256 of a public key.
func fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:4])
}

// Fingerprint is a short, non-secret identifier of the primary key (the
// first 8 hex digits of the SHA-256 of its TLS public key), for logs.
func (k *Keyring) Fingerprint() string { return k.fingerprint }

// Fingerprints lists the fingerprints of all keys, primary first.
func (k *Keyring) Fingerprints() []string {
	out := make([]string, len(k.keys))
	for i, dk := range k.keys {
		out[i] = fingerprint(dk.tlsPub)
	}
	return out
}

// Len is the number of keys.
func (k *Keyring) Len() int { return len(k.keys) }

// String describes the keyring without any secret.
func (k *Keyring) String() string {
	if k == nil {
		return "consensus keyring <nil>"
	}
	return fmt.Sprintf("consensus keyring (%d keys, primary %s)", len(k.keys), k.fingerprint)
}

// Format prints String for every verb, so no format verb reaches a key.
func (k *Keyring) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, k.String())
}

// tlsIndex is the index of the key whose TLS public key is pub, or -1.
func (k *Keyring) tlsIndex(pub ed25519.PublicKey) int {
	for i, dk := range k.keys {
		if bytes.Equal(dk.tlsPub, pub) {
			return i
		}
	}
	return -1
}

// protos lists the ALPN names of all keys, primary first.
func (k *Keyring) protos() []string {
	out := make([]string, len(k.keys))
	for i, dk := range k.keys {
		out[i] = dk.proto
	}
	return out
}

// offeredIndex is the index of the first key (in keyring order) whose ALPN
// name a peer offered, or -1.
func (k *Keyring) offeredIndex(offered []string) int {
	for i, dk := range k.keys {
		if slices.Contains(offered, dk.proto) {
			return i
		}
	}
	return -1
}
