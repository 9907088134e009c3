package consensus

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

func TestSignTerm(t *testing.T) {
	k1, k2, k3 := newKey(t), newKey(t), newKey(t)
	signer := mustKeyring(t, k1)
	msg := []byte("cluster db1 term 7 writer db1-a")
	sig := signer.SignTerm(msg)

	tests := []struct {
		name string
		pubs []ed25519.PublicKey
		msg  []byte
		sig  []byte
		want bool
	}{
		{"same key", signer.TermPublicKeys(), msg, sig, true},
		{"rotation [k2 k1]", mustKeyring(t, k2, k1).TermPublicKeys(), msg, sig, true},
		{"other key", mustKeyring(t, k3).TermPublicKeys(), msg, sig, false},
		{"other keys [k2 k3]", mustKeyring(t, k2, k3).TermPublicKeys(), msg, sig, false},
		{"tampered message", signer.TermPublicKeys(), []byte("cluster db1 term 8 writer db1-a"), sig, false},
		{"short signature", signer.TermPublicKeys(), msg, sig[:10], false},
		{"no keys", nil, msg, sig, false},
		{"malformed key", []ed25519.PublicKey{{1, 2, 3}}, msg, sig, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := VerifyTerm(tc.pubs, tc.msg, tc.sig); got != tc.want {
				t.Errorf("VerifyTerm = %v, want %v", got, tc.want)
			}
		})
	}
	// The term keys are not the TLS keys: a TLS identity cannot sign terms.
	for _, pub := range signer.TermPublicKeys() {
		if signer.tlsIndex(pub) >= 0 {
			t.Error("a term public key is also a TLS public key")
		}
	}
}

func TestPublicKeyEncoding(t *testing.T) {
	pub := mustKeyring(t, newKey(t)).TermPublicKeys()[0]
	got, err := ParsePublicKey(EncodePublicKey(pub))
	if err != nil || !got.Equal(pub) {
		t.Fatalf("ParsePublicKey(EncodePublicKey(k)) = %v, %v, want k", got, err)
	}
	for in, want := range map[string]string{
		"not base64!": "not standard base64",
		"AAAA":        "decodes to 3 bytes, want 32",
		"":            "decodes to 0 bytes, want 32",
	} {
		if _, err := ParsePublicKey(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePublicKey(%q) error %v, want %q", in, err, want)
		}
	}
}
