package term

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/pool"
)

func termKeyring(t *testing.T) *consensus.Keyring {
	t.Helper()
	raw := make([]byte, consensus.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	kr, err := consensus.ParseKeyring([]string{base64.StdEncoding.EncodeToString(raw)})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func signedTerm(t *testing.T, kr *consensus.Keyring, n uint64, writer string) []byte {
	t.Helper()
	b, err := consensus.EncodeSignedTerm(kr, pool.Term{Cluster: "main", Number: n, Writer: writer, Addr: writer + ":3306", Granted: time.Now(), Group: "0a1b2c3d"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An agent keeps the highest term it can verify; forged, malformed and
// older terms change nothing and are counted.
func TestTermsVerifiedAndHighestKept(t *testing.T) {
	fleet, stranger := termKeyring(t), termKeyring(t)
	b := New(Config{})
	if b.View().Unverifiable == "" {
		t.Fatal("an agent with no key says it can verify terms")
	}
	// An app agent given only the public key (consensus.term_key).
	b.SetKeys(nil, fleet.TermPublicKeys(), false)
	if b.Signer() != nil || b.View().Unverifiable != "" {
		t.Fatalf("term_key alone: signer %v, unverifiable %q", b.Signer(), b.View().Unverifiable)
	}
	event := func(data []byte) {
		b.Handle(context.Background(), serf.UserEvent{Name: consensus.TermEvent, Payload: data})
	}
	event(signedTerm(t, fleet, 2, "db2"))
	event(signedTerm(t, stranger, 9, "evil"))
	event(signedTerm(t, fleet, 1, "db1"))
	event([]byte("garbage"))
	event(signedTerm(t, fleet, 2, "db2"))
	got := b.View().Terms["main"]
	if got.Number != 2 || got.Writer != "db2" {
		t.Fatalf("term = %+v, want 2 to db2", got)
	}
	s := b.Stats()
	if s.Learned.Load() != 1 || s.BadSignature.Load() != 1 || s.Stale.Load() != 2 || s.Malformed.Load() != 1 {
		t.Fatalf("learned %d, bad signature %d, stale %d, malformed %d; want 1, 1, 2, 1",
			s.Learned.Load(), s.BadSignature.Load(), s.Stale.Load(), s.Malformed.Load())
	}
	// A query for terms is answered only by a voter: this agent has no
	// raft server and no signer, and must not panic.
	b.Handle(context.Background(), &serf.Query{Name: consensus.TermQuery, Payload: consensus.EncodeTermQuery("main")})
}

// serf's event loop never blocks on the term loop: a full queue drops and
// counts; hooks never see term events or queries.
func TestTermEventsBoundedAndHiddenFromHooks(t *testing.T) {
	b := New(Config{})
	for range QueueLen + 3 {
		b.Offer(serf.UserEvent{Name: consensus.TermEvent})
	}
	if d := b.Stats().Dropped.Load(); d != 3 {
		t.Fatalf("dropped %d, want 3", d)
	}
	var seen []string
	h := HideEvents(handlerFunc(func(e serf.Event) { seen = append(seen, e.String()) }))
	h.HandleEvent(serf.UserEvent{Name: consensus.TermEvent})
	h.HandleEvent(&serf.Query{Name: consensus.TermQuery})
	h.HandleEvent(serf.UserEvent{Name: "deploy"})
	if len(seen) != 1 {
		t.Fatalf("hooks saw %v, want only the user's own event", seen)
	}
}

type handlerFunc func(serf.Event)

func (f handlerFunc) HandleEvent(e serf.Event) { f(e) }

// A restarted agent starts from the terms it learned before (the terms
// file next to the snapshot), each verified again; a forged or corrupt
// file changes nothing.
func TestTermsSurviveARestart(t *testing.T) {
	fleet, stranger := termKeyring(t), termKeyring(t)
	dir := t.TempDir()
	newBook := func() *Book {
		b := New(Config{File: dir + "/snapshot.terms"})
		b.SetKeys(fleet, nil, false)
		return b
	}
	a := newBook()
	a.Handle(context.Background(), serf.UserEvent{Name: consensus.TermEvent, Payload: signedTerm(t, fleet, 3, "db2")})
	st, err := os.Stat(dir + "/snapshot.terms")
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("terms file: %v, mode %v", err, st.Mode())
	}
	b := newBook()
	b.Load()
	if got := b.View().Terms["main"]; got.Number != 3 || got.Writer != "db2" {
		t.Fatalf("after a restart: term %+v, want 3 to db2", got)
	}

	// A file whose term another key signed, or that is not JSON, teaches
	// nothing.
	forged, _ := json.Marshal(termsFile{V: fileVersion, Terms: map[string][]byte{"main": signedTerm(t, stranger, 9, "evil")}})
	for _, data := range [][]byte{forged, []byte("{not json")} {
		if err := os.WriteFile(dir+"/snapshot.terms", data, 0o600); err != nil {
			t.Fatal(err)
		}
		c := newBook()
		c.Load()
		if got := c.View().Terms["main"]; got.Number != 0 {
			t.Fatalf("file %.20q: learned %+v", data, got)
		}
	}
}
