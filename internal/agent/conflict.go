package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/serf/serf"
)

// Name conflicts. serf's own resolution asks the other members which
// address they hold for the contested name and shuts down the side in the
// minority. With no other member to answer (a cluster of one plus the
// newcomer) it counts 0 of 0 and shuts BOTH sides down, the established
// node included. shoal turns serf's resolution off and runs the same vote
// itself, with one difference: when nobody answers, the side that was in
// the middle of joining when the conflict appeared is the newcomer and
// steps down; the established node never does.

const (
	// serf's internal conflict query and its response message type
	// (serf/internal_query.go, serf/messages.go; stable since serf 0.6).
	conflictQuery               = "_serf_conflict"
	messageConflictResponseType = 6
)

const conflictPrefix = "Node name conflicts with another node at "

// observeSerfLog watches serf's log for the timeouts of its leave
// (observeLeaveLog) and for a conflict over our own name, which
// serf reports only there. It runs synchronously in the goroutine that found
// the conflict: during our own Join call when we are the newcomer.
func (a *Agent) observeSerfLog(_ slog.Level, component, msg string) {
	a.observeLeaveLog(component, msg)
	if component != "serf" || !strings.HasPrefix(msg, conflictPrefix) {
		return
	}
	addr := msg[len(conflictPrefix):]
	if j := strings.Index(addr, ". Names"); j > 0 {
		addr = addr[:j]
	}
	joining := a.joinInFlight.Load() > 0
	a.mu.Lock()
	busy := a.resolving
	a.resolving = true
	a.mu.Unlock()
	if busy {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.resolveConflict(addr, joining)
		a.mu.Lock()
		a.resolving = false
		a.mu.Unlock()
	}()
}

func (a *Agent) resolveConflict(other string, joining bool) {
	s := a.Serf()
	local := s.Memberlist().LocalNode()
	resp, err := s.Query(conflictQuery, []byte(a.cfg.Node), nil)
	if err != nil {
		a.log.Error("name conflict: resolution query failed", "other", other, "err", err)
		return
	}
	responses, matching := 0, 0
	for r := range resp.ResponseCh() {
		if len(r.Payload) < 1 || r.Payload[0] != messageConflictResponseType {
			continue
		}
		var m serf.Member
		if err := codec.NewDecoder(bytes.NewReader(r.Payload[1:]), &codec.MsgpackHandle{}).Decode(&m); err != nil {
			a.log.Warn("name conflict: undecodable answer", "from", r.From, "err", err)
			continue
		}
		responses++
		if m.Addr.Equal(local.Addr) && m.Port == local.Port {
			matching++
		}
	}
	lose := joining
	if responses > 0 {
		lose = matching < responses/2+1
	}
	if !lose {
		a.log.Warn("another node claims our name; the cluster keeps us", "node", a.cfg.Node, "other", other,
			"answers", responses, "for_us", matching)
		return
	}
	a.mu.Lock()
	a.conflict = other
	a.mu.Unlock()
	a.fail(fmt.Errorf("node name %q is already used by a live member at %s: refusing to run with a duplicate name; pick another --node (%d of %d members answered for us)",
		a.cfg.Node, other, matching, responses))
}
