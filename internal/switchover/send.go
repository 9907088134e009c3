package switchover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/consensus"
	"github.com/shoaldb/shoal/internal/gossip"
)

// sendLeader sends a leader's step (begin, grant, end) to the raft
// leader, following the leadership if it moves, until stepLimit.
func (s *Switcher) sendLeader(ctx context.Context, st consensus.SwitchStep) (consensus.SwitchAnswer, error) {
	deadline := s.cfg.Clock.Now().Add(stepLimit)
	for {
		ans, err := s.sendStep(ctx, st, stepTimeout, s.cfg.Clock.Until(deadline))
		if err == nil || s.cfg.Clock.Now().After(deadline) || ctx.Err() != nil {
			return ans, err
		}
		n := s.voter()
		if n == nil {
			return ans, err
		}
		leader := n.Status().Leader
		if leader == "" || leader == st.Node {
			return ans, err
		}
		st.Node = leader
	}
}

// retryEvery spaces the attempts at a step.
const retryEvery = 100 * time.Millisecond

// sendStep sends a step to its node and returns the node's answer: it is
// sent again while no answer comes (each attempt waits up to timeout) or
// the answer says to retry, until limit; an answer that is not OK is an
// error. Answers to every step but repoint must be signed.
func (s *Switcher) sendStep(ctx context.Context, st consensus.SwitchStep, timeout, limit time.Duration) (consensus.SwitchAnswer, error) {
	clk := s.cfg.Clock
	deadline := clk.Now().Add(limit)
	var last error = errNoAnswer
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if !clk.Now().Add(retryEvery).Before(deadline) {
				return consensus.SwitchAnswer{Node: st.Node}, fmt.Errorf("%s on %s: %w (after %d attempts in %s)", st.Op, st.Node, last, attempt, limit)
			}
			select {
			case <-ctx.Done():
				return consensus.SwitchAnswer{Node: st.Node}, ctx.Err()
			case <-clk.After(retryEvery):
			}
		}
		st.Expires = clk.Now().Add(timeout + 30*time.Second)
		ans, err := s.ask(ctx, st, min(timeout, clk.Until(deadline)+time.Second))
		switch {
		case err != nil:
			last = err
		case ans.Retry:
			last = errors.New(ans.Error)
		case !ans.OK:
			return ans, fmt.Errorf("%s on %s: %s", st.Op, st.Node, ans.Error)
		default:
			return ans, nil
		}
	}
}

// askStep sends one attempt of a step and waits for st.Node's answer.
func (s *Switcher) askStep(ctx context.Context, st consensus.SwitchStep, timeout time.Duration) (consensus.SwitchAnswer, error) {
	b, err := consensus.EncodeSwitchStep(s.cfg.Terms.Signer(), st)
	if err != nil {
		return consensus.SwitchAnswer{}, err
	}
	resp, err := s.cfg.Gossip.Query(consensus.SwitchQuery, b, &serf.QueryParam{FilterNodes: []string{st.Node}, Timeout: timeout, RelayFactor: 2})
	if err != nil {
		return consensus.SwitchAnswer{}, fmt.Errorf("send: %w", err)
	}
	var ans consensus.SwitchAnswer
	err = fmt.Errorf("%w within %s", errNoAnswer, timeout)
	gossip.EachAnswer(ctx, resp, func(r serf.NodeResponse) bool {
		if r.From != st.Node {
			return true
		}
		ans, err = s.checkAnswer(st, r.Payload)
		return false
	})
	if ctx.Err() != nil {
		return consensus.SwitchAnswer{}, ctx.Err()
	}
	return ans, err
}

// checkAnswer decodes a node's answer to st and checks that it is one.
func (s *Switcher) checkAnswer(st consensus.SwitchStep, payload []byte) (consensus.SwitchAnswer, error) {
	ans, err := consensus.DecodeSwitchAnswer(payload, s.cfg.Terms.Verify())
	switch {
	case err != nil:
		return consensus.SwitchAnswer{}, fmt.Errorf("answer: %w", err)
	case ans.ID != st.ID || ans.Op != st.Op || ans.Node != st.Node:
		return consensus.SwitchAnswer{}, fmt.Errorf("answer for %s/%s from %s, not this step", ans.Op, ans.ID, ans.Node)
	case !ans.Signed && st.Op != consensus.OpRepoint:
		return consensus.SwitchAnswer{}, errors.New("unsigned answer: the node has no consensus key")
	}
	return ans, nil
}
