package gossip

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"

	"github.com/hashicorp/memberlist"
)

// memberlist v0.7.0's packet encryption (security.go): a version byte, a
// 12-byte nonce, then AES-GCM ciphertext and its 16-byte tag; version 0
// also PKCS7-pads the plaintext, so it is at least one block long. The
// additional data is the packet label (net.go ingestPacket).
const (
	encVersionSize = 1
	encNonceSize   = 12
	encTagSize     = 16
	encMaxVersion  = 1
	// maxCachedKeys bounds the ciphers kept: keys are few (a rotation
	// adds one at a time); more means old keys are gone, so start afresh.
	maxCachedKeys = 8
)

// keyCheck tells whether a gossip packet was sealed with a key of the
// keyring, exactly as memberlist checks it before it reads a packet. It
// reads the keys from the keyring on every check (key rotation changes
// them at runtime). Not safe for concurrent use: the transport's read loop
// owns it.
type keyCheck struct {
	keyring   *memberlist.Keyring
	label     string
	skipLabel bool // memberlist's SkipInboundLabelCheck

	ciphers []keyCipher // by key, built on first use
	scratch []byte      // plaintext of the last Open, discarded
}

type keyCipher struct {
	key  []byte
	aead cipher.AEAD
}

// newKeyCheck returns the check memberlist's configuration calls for, or
// nil when memberlist takes packets without one: no keyring, or
// GossipVerifyIncoming off (it then reads undecryptable packets as
// plaintext).
func newKeyCheck(mc *memberlist.Config) *keyCheck {
	if mc.Keyring == nil || !mc.GossipVerifyIncoming {
		return nil
	}
	return &keyCheck{keyring: mc.Keyring, label: mc.Label, skipLabel: mc.SkipInboundLabelCheck}
}

// fromKeyHolder reports whether pkt, as received, would decrypt in
// memberlist with one of the keyring's current keys.
func (k *keyCheck) fromKeyHolder(pkt []byte) bool {
	buf, label, err := memberlist.RemoveLabelHeaderFromPacket(pkt)
	if err != nil {
		return false
	}
	if k.skipLabel {
		if label != "" {
			return false
		}
		label = k.label
	}
	if label != k.label {
		return false
	}
	keys := k.keyring.GetKeys()
	if len(keys) == 0 {
		return true // memberlist: encryption is off with an empty keyring
	}
	if len(buf) == 0 || buf[0] > encMaxVersion {
		return false
	}
	minLen := encVersionSize + encNonceSize + encTagSize
	if buf[0] == 0 {
		minLen += aes.BlockSize // the padding of an empty message
	}
	if len(buf) < minLen {
		return false
	}
	nonce := buf[encVersionSize : encVersionSize+encNonceSize]
	sealed := buf[encVersionSize+encNonceSize:]
	for _, key := range keys {
		aead := k.cipher(key)
		if aead == nil {
			continue
		}
		plain, err := aead.Open(k.scratch[:0], nonce, sealed, []byte(label))
		if cap(plain) > cap(k.scratch) {
			k.scratch = plain[:0]
		}
		if err == nil {
			return true
		}
	}
	return false
}

func (k *keyCheck) cipher(key []byte) cipher.AEAD {
	for _, c := range k.ciphers {
		if bytes.Equal(c.key, key) {
			return c.aead
		}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil // memberlist's keyring holds only 16, 24 or 32-byte keys
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil
	}
	if len(k.ciphers) >= maxCachedKeys {
		k.ciphers = k.ciphers[:0]
	}
	k.ciphers = append(k.ciphers, keyCipher{key: bytes.Clone(key), aead: aead})
	return aead
}
