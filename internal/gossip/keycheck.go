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

// keyCheck reads gossip packets as memberlist does before it handles them
// (net.go ingestPacket): it checks the label header and decrypts with the
// keyring's keys. It reads the keys from the keyring on every check (key
// rotation changes them at runtime). Not safe for concurrent use: the
// transport's read loop owns it.
type keyCheck struct {
	keyring   *memberlist.Keyring // nil: gossip is not encrypted
	label     string
	skipLabel bool // memberlist's SkipInboundLabelCheck
	// plainFallback: memberlist reads a packet that does not decrypt as
	// plaintext (GossipVerifyIncoming off).
	plainFallback bool

	ciphers []keyCipher // by key, built on first use
	scratch []byte      // plaintext of the last Open
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

// newPacketOpener returns what reads packets as memberlist's configuration
// does, for open; never nil.
func newPacketOpener(mc *memberlist.Config) *keyCheck {
	return &keyCheck{keyring: mc.Keyring, label: mc.Label, skipLabel: mc.SkipInboundLabelCheck, plainFallback: !mc.GossipVerifyIncoming}
}

// unlabel removes the label header as memberlist does, and reports false
// where memberlist drops the packet for its label.
func (k *keyCheck) unlabel(pkt []byte) ([]byte, string, bool) {
	buf, label, err := memberlist.RemoveLabelHeaderFromPacket(pkt)
	if err != nil {
		return nil, "", false
	}
	if k.skipLabel {
		if label != "" {
			return nil, "", false
		}
		label = k.label
	}
	if label != k.label {
		return nil, "", false
	}
	return buf, label, true
}

func (k *keyCheck) keys() [][]byte {
	if k.keyring == nil {
		return nil
	}
	return k.keyring.GetKeys()
}

// fromKeyHolder reports whether pkt, as received, would decrypt in
// memberlist with one of the keyring's current keys.
func (k *keyCheck) fromKeyHolder(pkt []byte) bool {
	buf, label, ok := k.unlabel(pkt)
	if !ok {
		return false
	}
	keys := k.keys()
	if len(keys) == 0 {
		return true // memberlist: encryption is off with an empty keyring
	}
	_, ok = k.decrypt(buf, label, keys)
	return ok
}

// open returns the plaintext memberlist reads from pkt (label header
// removed, decrypted, padding removed), or false where memberlist drops
// the packet. The plaintext may be k's scratch buffer or a part of pkt:
// valid until the next call, and not to be changed.
func (k *keyCheck) open(pkt []byte) ([]byte, bool) {
	buf, label, ok := k.unlabel(pkt)
	if !ok {
		return nil, false
	}
	keys := k.keys()
	if len(keys) == 0 {
		return buf, true
	}
	if plain, ok := k.decrypt(buf, label, keys); ok {
		return plain, true
	}
	if k.plainFallback {
		return buf, true
	}
	return nil, false
}

// decrypt is memberlist's decryptPayload into k's scratch buffer, with the
// padding of version 0 checked rather than trusted.
func (k *keyCheck) decrypt(buf []byte, label string, keys [][]byte) ([]byte, bool) {
	if len(buf) == 0 || buf[0] > encMaxVersion {
		return nil, false
	}
	minLen := encVersionSize + encNonceSize + encTagSize
	if buf[0] == 0 {
		minLen += aes.BlockSize // the padding of an empty message
	}
	if len(buf) < minLen {
		return nil, false
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
		if err != nil {
			continue
		}
		if buf[0] == 0 {
			pad := 0
			if len(plain) > 0 {
				pad = int(plain[len(plain)-1])
			}
			if pad == 0 || pad > len(plain) {
				return nil, false
			}
			plain = plain[:len(plain)-pad]
		}
		return plain, true
	}
	return nil, false
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
