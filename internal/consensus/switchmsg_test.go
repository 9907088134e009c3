package consensus

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func sampleStep(now time.Time) SwitchStep {
	return SwitchStep{ID: "0123456789abcdef", Op: OpDemote, Node: "db1", By: "db3", Cluster: "main", From: 7,
		Old: "db1", Target: "db2", Addr: "10.0.0.2:3306", GTID: "0-1-1234,1-2-99", WaitMS: 5000, Expires: now.Add(time.Minute).UTC(), Group: "0a1b2c3d"}
}

func TestSwitchStepRoundTripAndForgeries(t *testing.T) {
	kr, other := mustKeyring(t, newKey(t)), mustKeyring(t, newKey(t))
	now := time.Now()
	b, err := EncodeSwitchStep(kr, sampleStep(now))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSwitchStep(b, kr.TermPublicKeys())
	if err != nil || got != sampleStep(now) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if err := got.CheckFresh(now); err != nil {
		t.Errorf("fresh step: %v", err)
	}
	if err := got.CheckFresh(now.Add(2 * time.Minute)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired step: %v", err)
	}
	if err := got.CheckFresh(now.Add(-10 * time.Minute)); err == nil || !strings.Contains(err.Error(), "clocks apart") {
		t.Errorf("a step living too long: %v", err)
	}
	// Another key, a flipped byte, an answer's domain, an unsigned step.
	if _, err := DecodeSwitchStep(b, other.TermPublicKeys()); !errors.Is(err, ErrTermSignature) {
		t.Errorf("another key: %v", err)
	}
	bad := append([]byte(nil), b...)
	bad[10] ^= 1
	if _, err := DecodeSwitchStep(bad, kr.TermPublicKeys()); !errors.Is(err, ErrTermSignature) {
		t.Errorf("flipped byte: %v", err)
	}
	ans, err := EncodeSwitchAnswer(kr, SwitchAnswer{ID: "0123456789abcdef", Op: OpDemote, Node: "db1", OK: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSwitchStep(ans, kr.TermPublicKeys()); !errors.Is(err, ErrTermSignature) {
		t.Errorf("an answer taken for a step: %v", err)
	}
	unsigned := append([]byte{switchUnsigned}, b[1:len(b)-64]...)
	if _, err := DecodeSwitchStep(unsigned, kr.TermPublicKeys()); !errors.Is(err, ErrTermSignature) {
		t.Errorf("an unsigned step: %v", err)
	}
}

func TestSwitchStepCheck(t *testing.T) {
	now := time.Now()
	for name, mod := range map[string]func(*SwitchStep){
		"bad id":        func(s *SwitchStep) { s.ID = "xyz" },
		"no group":      func(s *SwitchStep) { s.Group = "" },
		"bad group":     func(s *SwitchStep) { s.Group = "0A1B2C3D" },
		"unknown op":    func(s *SwitchStep) { s.Op = "drop" },
		"bad cluster":   func(s *SwitchStep) { s.Cluster = "a b" },
		"no term":       func(s *SwitchStep) { s.From = 0 },
		"control char":  func(s *SwitchStep) { s.Target = "db\x1b[2J" },
		"empty node":    func(s *SwitchStep) { s.Node = "" },
		"addr, no port": func(s *SwitchStep) { s.Addr = "10.0.0.2" },
		"long gtid":     func(s *SwitchStep) { s.GTID = strings.Repeat("1", 500) },
		"negative wait": func(s *SwitchStep) { s.WaitMS = -1 },
	} {
		s := sampleStep(now)
		mod(&s)
		if _, err := EncodeSwitchStep(mustKeyring(t, newKey(t)), s); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestSwitchAnswerSignedAndNot(t *testing.T) {
	kr := mustKeyring(t, newKey(t))
	a := SwitchAnswer{ID: "0123456789abcdef", Op: OpRepoint, Node: "db4", Error: strings.Repeat("é", 400)}
	for _, signer := range []*Keyring{kr, nil} {
		b, err := EncodeSwitchAnswer(signer, a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSwitchAnswer(b, kr.TermPublicKeys())
		if err != nil {
			t.Fatal(err)
		}
		if got.Signed != (signer != nil) || !strings.HasSuffix(got.Error, "…") || len(got.Error) > maxDetail {
			t.Errorf("signer %v: signed %v, error of %d bytes", signer != nil, got.Signed, len(got.Error))
		}
	}
	if _, err := DecodeSwitchAnswer([]byte{switchUnsigned, '{', '}'}, nil); err == nil {
		t.Error("an answer without a node was taken")
	}
}

func FuzzDecodeSwitchMessages(f *testing.F) {
	kr := mustKeyring(f, newKey(f))
	b, _ := EncodeSwitchStep(kr, sampleStep(time.Now()))
	f.Add(b)
	a, _ := EncodeSwitchAnswer(nil, SwitchAnswer{ID: "0123456789abcdef", Op: OpDemote, Node: "db1", OK: true, GTID: "0-1-2"})
	f.Add(a)
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := DecodeSwitchStep(b, kr.TermPublicKeys()); err == nil {
			if err := s.Check(); err != nil {
				t.Fatalf("decoded a step that does not check: %v", err)
			}
		}
		if a, err := DecodeSwitchAnswer(b, kr.TermPublicKeys()); err == nil && len(a.GTID) > maxGTID {
			t.Fatalf("decoded an answer out of bounds")
		}
	})
}
