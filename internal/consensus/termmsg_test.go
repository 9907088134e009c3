package consensus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/internal/pool"
)

func sampleTerm() pool.Term {
	return pool.Term{Cluster: "main", Number: 7, Writer: "db2", Addr: "10.0.0.2:3306",
		Granted: time.Date(2026, 11, 27, 6, 1, 2, 345e6, time.UTC), Why: "db1 was the writer (term 6) and is read-only", Group: "0a1b2c3d"}
}

func TestSignedTermRoundTrip(t *testing.T) {
	k1 := newKey(t)
	kr := mustKeyring(t, k1)
	b, err := EncodeSignedTerm(kr, sampleTerm())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSignedTerm(b, kr.TermPublicKeys())
	if err != nil {
		t.Fatal(err)
	}
	if want := sampleTerm(); got != want {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	// A rotated keyring (new primary, old key second) still verifies.
	rotated := mustKeyring(t, newKey(t), k1)
	if _, err := DecodeSignedTerm(b, rotated.TermPublicKeys()); err != nil {
		t.Fatalf("old key second in the keyring: %v", err)
	}
}

func TestSignedTermRefusesForgeries(t *testing.T) {
	kr, other := mustKeyring(t, newKey(t)), mustKeyring(t, newKey(t))
	good, err := EncodeSignedTerm(kr, sampleTerm())
	if err != nil {
		t.Fatal(err)
	}
	forged, err := EncodeSignedTerm(other, sampleTerm())
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[10] ^= 1 // a byte of the JSON: "term":7 and the like
	higher := []byte(strings.Replace(string(good), `"term":7`, `"term":9`, 1))
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"signed with another key", forged, ErrTermSignature},
		{"one bit flipped", flipped, ErrTermSignature},
		{"number raised", higher, ErrTermSignature},
		{"truncated", good[:len(good)-1], ErrTermSignature},
		{"empty", nil, ErrTermMalformed},
		{"version 1 (no group: a term of an older release)", append([]byte{1}, good[1:]...), ErrTermMalformed},
		{"too long", make([]byte, MaxSignedTerm+1), ErrTermMalformed},
	}
	for _, tc := range cases {
		if _, err := DecodeSignedTerm(tc.b, kr.TermPublicKeys()); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := DecodeSignedTerm(good, nil); !errors.Is(err, ErrTermSignature) {
		t.Errorf("no keys: err = %v, want %v", err, ErrTermSignature)
	}
}

// A signed but invalid term (a bug or a stolen key) is still refused.
func TestSignedTermChecksTheTerm(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	for name, msg := range map[string]string{
		"term 0":    `{"cluster":"main","term":0,"writer":"db1","addr":"x:1","granted":"2026-11-27T06:00:00Z","group":"0a1b2c3d"}`,
		"no group":  `{"cluster":"main","term":1,"writer":"db1","addr":"x:1","granted":"2026-11-27T06:00:00Z"}`,
		"bad group": `{"cluster":"main","term":1,"writer":"db1","addr":"x:1","granted":"2026-11-27T06:00:00Z","group":"0A1B2C3D"}`,
	} {
		b := append(append([]byte{signedTermV2}, msg...), kr.SignTerm(append([]byte(termDomain), msg...))...)
		if _, err := DecodeSignedTerm(b, kr.TermPublicKeys()); !errors.Is(err, ErrTermMalformed) {
			t.Errorf("%s: err = %v, want %v", name, err, ErrTermMalformed)
		}
	}
	// A term signed with the same key in the format before groups.
	msg := `{"cluster":"main","term":9,"writer":"y1","addr":"x:1","granted":"2026-11-27T06:00:00Z"}`
	b := append(append([]byte{1}, msg...), kr.SignTerm(append([]byte("shoal writer term v1\x00"), msg...))...)
	if _, err := DecodeSignedTerm(b, kr.TermPublicKeys()); !errors.Is(err, ErrTermMalformed) {
		t.Errorf("version 1 term: err = %v, want %v", err, ErrTermMalformed)
	}
}

func TestSignedTermFitsTheLimit(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	tm := sampleTerm()
	tm.Cluster = strings.Repeat("c", 64)
	tm.Writer = strings.Repeat("w", 256)
	tm.Addr = strings.Repeat("h", 250) + ":3306"
	tm.Why = strings.Repeat("é", 128) // 256 bytes
	b, err := EncodeSignedTerm(kr, tm)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxSignedTerm {
		t.Fatalf("%d bytes, limit %d", len(b), MaxSignedTerm)
	}
	got, err := DecodeSignedTerm(b, kr.TermPublicKeys())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.Why, "…") || len(got.Why) >= len(tm.Why) || got.Writer != tm.Writer {
		t.Fatalf("why %q (%d bytes): want it shortened with a mark", got.Why, len(got.Why))
	}
}

func TestTermQueryPayload(t *testing.T) {
	c, err := DecodeTermQuery(EncodeTermQuery("main"))
	if err != nil || c != "main" {
		t.Fatalf("round trip = %q, %v", c, err)
	}
	for _, b := range [][]byte{nil, {1}, {2, 'a'}, append([]byte{1}, strings.Repeat("c", 65)...), []byte("\x01a b")} {
		if _, err := DecodeTermQuery(b); !errors.Is(err, ErrTermMalformed) {
			t.Errorf("%q: err = %v, want %v", b, err, ErrTermMalformed)
		}
	}
}
