package consensus

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// newKey returns a fresh random keyring key, base64-encoded.
func newKey(t testing.TB) string {
	t.Helper()
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

func mustKeyring(t testing.TB, keys ...string) *Keyring {
	t.Helper()
	kr, err := ParseKeyring(keys)
	if err != nil {
		t.Fatalf("parse keyring: %v", err)
	}
	return kr
}

func TestParseKeyringErrors(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	zeros := base64.StdEncoding.EncodeToString(make([]byte, KeySize))
	notB64 := "!!" + k1[2:]
	urlB64 := strings.NewReplacer("+", "-", "/", "_").Replace(k1)
	if urlB64 == k1 {
		urlB64 = k1[:len(k1)-2] + "-=" // make sure it is not standard base64
	}
	tests := []struct {
		name string
		keys []string
		want string
	}{
		{"none", nil, "no keys"},
		{"empty", []string{k1, ""}, "key 1: empty"},
		{"not base64", []string{notB64}, "key 0: not standard base64"},
		{"url base64", []string{k2, urlB64}, "key 1: not standard base64"},
		{"short", []string{short}, "key 0: decodes to 16 bytes, want 32"},
		{"zeros", []string{k1, k2, zeros}, "key 2: all zeros"},
		{"duplicate", []string{k1, k2, k1}, "key 2: duplicate of key 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeyring(tc.keys)
			if err == nil {
				t.Fatalf("ParseKeyring(%s) = nil error, want %q", tc.name, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			for _, k := range tc.keys {
				if len(k) > 8 && strings.Contains(err.Error(), k[2:len(k)-2]) {
					t.Errorf("error %q contains a key", err)
				}
			}
		})
	}
}

func TestKeyringFormatHidesKeys(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	kr := mustKeyring(t, k1, k2)
	secrets := []string{k1, k2}
	for _, k := range []string{k1, k2} {
		raw, _ := base64.StdEncoding.DecodeString(k)
		secrets = append(secrets, hex.EncodeToString(raw), fmt.Sprint(raw), string(raw))
	}
	for _, dk := range kr.keys {
		secrets = append(secrets, hex.EncodeToString(dk.term.priv.Seed()), fmt.Sprint([]byte(dk.term.priv)),
			fmt.Sprint([]byte(dk.cert.PrivateKey.(ed25519.PrivateKey))))
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		type hidden struct {
			k  Keyring
			kp *Keyring
		}
		for _, arg := range []any{kr, *kr, []*Keyring{kr}, struct{ K *Keyring }{kr}, hidden{*kr, kr}, &hidden{*kr, kr}} {
			out := fmt.Sprintf(verb, arg)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("Sprintf(%q, %T) = %q contains key material", verb, arg, out)
				}
			}
		}
	}
	if got, want := kr.String(), "consensus keyring (2 keys, primary "+kr.Fingerprint()+")"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestKeyringDeterministic(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	a, b := mustKeyring(t, k1), mustKeyring(t, k1)
	if !bytes.Equal(a.keys[0].cert.Certificate[0], b.keys[0].cert.Certificate[0]) {
		t.Error("the same key gave two different certificates")
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("fingerprints %s and %s of the same key differ", a.Fingerprint(), b.Fingerprint())
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(a.Fingerprint()) {
		t.Errorf("fingerprint %q, want 8 hex digits", a.Fingerprint())
	}
	if c := mustKeyring(t, k2); c.Fingerprint() == a.Fingerprint() {
		t.Error("two keys gave the same fingerprint")
	}
	leaf := a.keys[0].cert.Leaf
	if leaf.Subject.CommonName != certName || leaf.SerialNumber.Int64() != 1 ||
		leaf.NotBefore.Year() != 2000 || leaf.NotAfter.Year() != 2200 {
		t.Errorf("certificate CN %q serial %v valid %v..%v, want %s, 1, 2000..2200",
			leaf.Subject.CommonName, leaf.SerialNumber, leaf.NotBefore, leaf.NotAfter, certName)
	}
	if err := leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature); err != nil {
		t.Errorf("certificate is not self-signed: %v", err)
	}
	// Rotation: the primary decides the fingerprint; all keys are listed.
	r := mustKeyring(t, k2, k1)
	if r.Fingerprint() != mustKeyring(t, k2).Fingerprint() || r.Len() != 2 {
		t.Errorf("keyring [k2 k1]: fingerprint %s, len %d, want k2's, 2", r.Fingerprint(), r.Len())
	}
	if fps := r.Fingerprints(); len(fps) != 2 || fps[1] != a.Fingerprint() {
		t.Errorf("Fingerprints() = %v, want [k2 k1]", fps)
	}
	// The TLS identity and the term-signing key are independent.
	if bytes.Equal(a.keys[0].tlsPub, a.keys[0].termPub) {
		t.Error("TLS and term-signing keys are equal")
	}
}
