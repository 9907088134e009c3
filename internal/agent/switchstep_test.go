package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/consensus"
)

// The answers an agent remembers are bounded, the oldest forgotten
// first; a demote is remembered per cluster and term.
func TestSwitchPartsMemory(t *testing.T) {
	s := newSwitchParts()
	for i := range maxSwitchAnswers + 10 {
		s.remember(fmt.Sprintf("id%d/demote", i), []byte{byte(i)})
	}
	if _, ok := s.cached("id0/demote"); ok {
		t.Error("the oldest answer is still remembered past the bound")
	}
	if b, ok := s.cached(fmt.Sprintf("id%d/demote", maxSwitchAnswers+9)); !ok || b[0] != byte(maxSwitchAnswers+9) {
		t.Error("the newest answer is forgotten")
	}
	if len(s.answers) != maxSwitchAnswers || len(s.order) != maxSwitchAnswers {
		t.Errorf("%d answers, %d in order; want %d", len(s.answers), len(s.order), maxSwitchAnswers)
	}
	s.setDemoted("main", 4)
	if !s.wasDemoted("main", 4) || !s.wasDemoted("main", 3) || s.wasDemoted("main", 5) || s.wasDemoted("other", 1) {
		t.Error("wasDemoted")
	}
	s.setDemoted("main", 0)
	if s.wasDemoted("main", 1) {
		t.Error("a forgotten demote is still remembered")
	}
}

// A step signed with another key is refused and counted, never taken nor
// answered; a step for another node is ignored.
func TestSwitchStepForgeriesRefused(t *testing.T) {
	fleet, stranger := termKeyring(t), termKeyring(t)
	a := &Agent{cfg: &config.Config{Node: "db1"}, log: slog.New(slog.DiscardHandler), cons: consensusParts{sw: newSwitchParts()}}
	a.cons.terms = a.newTermBook()
	a.cons.terms.SetKeys(nil, fleet.TermPublicKeys(), false)
	step := consensus.SwitchStep{ID: "0123456789abcdef", Op: consensus.OpDemote, Node: "db1", By: "db3", Cluster: "main", From: 1,
		Old: "db1", Target: "db2", Addr: "10.0.0.2:3306", Expires: time.Now().Add(time.Minute), Group: "0a1b2c3d"}
	forged, err := consensus.EncodeSwitchStep(stranger, step)
	if err != nil {
		t.Fatal(err)
	}
	// A serf.Query that is not serf's own cannot be answered: a refused
	// step must never get that far (it would panic in Respond).
	a.cons.terms.Handle(context.Background(), &serf.Query{Name: consensus.SwitchQuery, Payload: forged})
	a.cons.terms.Handle(context.Background(), &serf.Query{Name: consensus.SwitchQuery, Payload: []byte("garbage")})
	if got := a.cons.sw.refused.Load(); got != 2 {
		t.Errorf("refused %d, want 2", got)
	}
	step.Node = "db9"
	other, err := consensus.EncodeSwitchStep(fleet, step)
	if err != nil {
		t.Fatal(err)
	}
	a.cons.terms.Handle(context.Background(), &serf.Query{Name: consensus.SwitchQuery, Payload: other})
	if a.cons.sw.taken.Load() != 0 || a.cons.sw.busy.Load() {
		t.Error("a step was taken")
	}
}

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
