package switchover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
)

// The answers an agent remembers are bounded, the oldest forgotten
// first; a demote is remembered per cluster and term.
func TestSwitchPartsMemory(t *testing.T) {
	s := New(Config{Node: "db1"})
	for i := range maxAnswers + 10 {
		s.remember(fmt.Sprintf("id%d/demote", i), []byte{byte(i)})
	}
	if _, ok := s.cached("id0/demote"); ok {
		t.Error("the oldest answer is still remembered past the bound")
	}
	if b, ok := s.cached(fmt.Sprintf("id%d/demote", maxAnswers+9)); !ok || b[0] != byte(maxAnswers+9) {
		t.Error("the newest answer is forgotten")
	}
	if len(s.answers) != maxAnswers || len(s.order) != maxAnswers {
		t.Errorf("%d answers, %d in order; want %d", len(s.answers), len(s.order), maxAnswers)
	}
	s.setDemoted("main", 4)
	if !s.WasDemoted("main", 4) || !s.WasDemoted("main", 3) || s.WasDemoted("main", 5) || s.WasDemoted("other", 1) {
		t.Error("wasDemoted")
	}
	s.setDemoted("main", 0)
	if s.WasDemoted("main", 1) {
		t.Error("a forgotten demote is still remembered")
	}
}

// A step signed with another key is refused and counted, never taken nor
// answered; a step for another node is ignored.
func TestSwitchStepForgeriesRefused(t *testing.T) {
	fleet, stranger := termKeyring(t), termKeyring(t)
	sw := New(Config{Node: "db1", Terms: &fakeTerms{verify: fleet.TermPublicKeys()}})
	step := consensus.SwitchStep{ID: "0123456789abcdef", Op: consensus.OpDemote, Node: "db1", By: "db3", Cluster: "main", From: 1,
		Old: "db1", Target: "db2", Addr: "10.0.0.2:3306", Expires: time.Now().Add(time.Minute), Group: "0a1b2c3d"}
	forged, err := consensus.EncodeSwitchStep(stranger, step)
	if err != nil {
		t.Fatal(err)
	}
	// A serf.Query that is not serf's own cannot be answered: a refused
	// step must never get that far (it would panic in Respond).
	sw.Answer(context.Background(), &serf.Query{Name: consensus.SwitchQuery, Payload: forged})
	sw.Answer(context.Background(), &serf.Query{Name: consensus.SwitchQuery, Payload: []byte("garbage")})
	if got := sw.stats.Refused.Load(); got != 2 {
		t.Errorf("refused %d, want 2", got)
	}
	step.Node = "db9"
	other, err := consensus.EncodeSwitchStep(fleet, step)
	if err != nil {
		t.Fatal(err)
	}
	sw.Answer(context.Background(), &serf.Query{Name: consensus.SwitchQuery, Payload: other})
	if sw.stats.Taken.Load() != 0 || sw.busy.Load() {
		t.Error("a step was taken")
	}
}
