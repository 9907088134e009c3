package leave

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/view"
)

func TestResolveName(t *testing.T) {
	ms := []serf.Member{{Name: "db1"}, {Name: "db\xff"}, {Name: `a\b`}, {Name: `a\\b`}, {Name: "x\x1b"}}
	for _, tt := range []struct{ node, want string }{
		{"db1", "db1"},
		{`db\xff`, "db\xff"},     // the display form of an invalid name
		{`a\\b`, `a\\b`},         // an exact name wins over a display form
		{`a\b`, `a\b`},           // exact
		{`x\x1b`, "x\x1b"},       // display form of a name with ESC
		{"x\x1b", "x\x1b"},       // the raw name, when it can be sent
		{"nobody", "nobody"},     // unknown: returned as is
		{"db\ufffd", "db\ufffd"}, // what JSON makes of \xff is not a match
	} {
		got, err := resolveName(ms, tt.node)
		if err != nil || got != tt.want {
			t.Errorf("resolveName(%q) = %q, %v; want %q", tt.node, got, err, tt.want)
		}
	}
}

// TestPlanForce: an unknown node wraps view.ErrNoSuchMember (the API's
// 404); an alive member is never touched; a failed one is marked left or
// pruned; a leaving or left one is left alone unless pruned.
func TestPlanForce(t *testing.T) {
	ms := []serf.Member{
		{Name: "alive", Status: serf.StatusAlive}, {Name: "failed", Status: serf.StatusFailed},
		{Name: "left", Status: serf.StatusLeft}, {Name: "db\xff", Status: serf.StatusFailed},
	}
	if _, _, _, err := PlanForce(ms, "nobody", false); !errors.Is(err, view.ErrNoSuchMember) {
		t.Fatalf("unknown node: err = %v, want ErrNoSuchMember", err)
	}
	for _, tt := range []struct {
		node   string
		prune  bool
		name   string
		act    ForceAction
		result string
	}{
		{"alive", false, "alive", ForceNothing, view.ForceLeaveUnchanged},
		{"alive", true, "alive", ForceNothing, view.ForceLeaveUnchanged},
		{"failed", false, "failed", ForceLeft, view.ForceLeaveLeft},
		{"failed", true, "failed", ForcePrune, view.ForceLeavePruned},
		{"left", false, "left", ForceNothing, view.ForceLeaveUnchanged},
		{"left", true, "left", ForcePrune, view.ForceLeavePruned},
		{`db\xff`, false, "db\xff", ForceLeft, view.ForceLeaveLeft},
	} {
		name, act, resp, err := PlanForce(ms, tt.node, tt.prune)
		if err != nil || name != tt.name || act != tt.act || resp.Result != tt.result {
			t.Errorf("PlanForce(%q, prune %v) = %q, %v, %+v, %v; want %q, %v, %s", tt.node, tt.prune, name, act, resp, err, tt.name, tt.act, tt.result)
		}
	}
}

// TestUnconfirmedNamesOpenPeers: the error of an unconfirmed leave names
// the peers that are neither leaving nor left, at most
// maxLeavePeersListed, and says why.
func TestUnconfirmedNamesOpenPeers(t *testing.T) {
	var ms []serf.Member
	var peers []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		ms = append(ms, serf.Member{Name: n, Status: serf.StatusAlive})
		peers = append(peers, n)
	}
	ms = append(ms, serf.Member{Name: "gone", Status: serf.StatusLeft}, serf.Member{Name: "other", Status: serf.StatusFailed})
	peers = append(peers, "gone")
	err := unconfirmed(ms, peers, false, 3*time.Second).Error()
	for _, want := range []string{"leave_timeout 3s", "no peer answered", "a (alive), b (alive), c (alive), d (alive), e (alive) and 2 more"} {
		if !strings.Contains(err, want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err, "gone") || strings.Contains(err, "other") {
		t.Errorf("error %q names a settled or unrelated member", err)
	}
	if err := unconfirmed(ms, peers, true, time.Second).Error(); !strings.Contains(err, "could not send the leave broadcast") {
		t.Errorf("timed out broadcast: %q", err)
	}
}

// TestNothingToLeave: without serf there is nothing to leave, and every
// call gets the one outcome.
func TestNothingToLeave(t *testing.T) {
	l := New(Config{Node: "n1", Log: slog.New(slog.DiscardHandler)})
	for range 2 {
		if err := l.Leave(nil, time.Second); err != nil {
			t.Fatalf("Leave(nil) = %v", err)
		}
	}
	if !l.Completed() {
		t.Fatal("not completed")
	}
}
