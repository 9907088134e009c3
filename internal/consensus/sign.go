package consensus

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
)

// SignTerm signs msg with the primary key's term-signing key (ed25519).
func (k *Keyring) SignTerm(msg []byte) []byte {
	return ed25519.Sign(k.keys[0].term.priv, msg)
}

// TermPublicKeys lists the term-signing public keys of all keys, primary
// first: a signature by any of them is accepted (key rotation).
func (k *Keyring) TermPublicKeys() []ed25519.PublicKey {
	out := make([]ed25519.PublicKey, len(k.keys))
	for i, dk := range k.keys {
		out[i] = append(ed25519.PublicKey(nil), dk.termPub...)
	}
	return out
}

// VerifyTerm reports whether sig is a valid signature of msg by any of pubs.
// Keys or signatures of the wrong length never verify.
func VerifyTerm(pubs []ed25519.PublicKey, msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	for _, pub := range pubs {
		if len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, sig) {
			return true
		}
	}
	return false
}

// EncodePublicKey encodes a public key in standard base64.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey parses a public key written by EncodePublicKey.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("parse term public key %.64q: not standard base64: %w", s, err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("parse term public key %.64q: decodes to %d bytes, want %d",
			s, len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}
