package leave

import (
	"fmt"

	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/view"
)

// ForceAction is what a force-leave asks of serf.
type ForceAction int

// The force-leave actions.
const (
	ForceNothing ForceAction = iota // alive, leaving or left: nothing to do
	ForceLeft                       // a failed member: mark it left
	ForcePrune                      // remove it entirely
)

// PlanForce decides a force-leave of node among the members ms: which raw
// member name serf gets, what to ask of it, and the answer (its Result set
// for when serf succeeds). node is a member's name or its display form
// (member.Escape, what `shoal members` shows), so that a member whose raw
// name cannot travel in a JSON string (invalid UTF-8) can still be named.
//
// An unknown node is an error wrapping view.ErrNoSuchMember. An alive
// member is never touched (serf would mark it leaving everywhere until it
// refutes, taking it out of the pool meanwhile).
func PlanForce(ms []serf.Member, node string, prune bool) (name string, act ForceAction, resp view.ForceLeave, err error) {
	name, err = resolveName(ms, node)
	if err != nil {
		return "", ForceNothing, view.ForceLeave{}, err
	}
	var m *serf.Member
	for i := range ms {
		if ms[i].Name == name {
			m = &ms[i]
			break
		}
	}
	if m == nil {
		return "", ForceNothing, view.ForceLeave{}, fmt.Errorf("%w %q (shoal members lists the members)", view.ErrNoSuchMember, node)
	}
	resp = view.ForceLeave{Node: member.Escape(name), Before: m.Status.String(), Result: view.ForceLeaveUnchanged}
	switch {
	case m.Status == serf.StatusAlive:
		return name, ForceNothing, resp, nil
	case prune:
		resp.Result = view.ForceLeavePruned
		return name, ForcePrune, resp, nil
	case m.Status == serf.StatusFailed:
		resp.Result = view.ForceLeaveLeft
		return name, ForceLeft, resp, nil
	}
	return name, ForceNothing, resp, nil // leaving or left: serf would change nothing
}

// resolveName returns the raw name of the member node names: the member of
// that exact name, else the one whose display form is node. An unknown
// node is returned as it is.
func resolveName(ms []serf.Member, node string) (string, error) {
	var byDisplay []string
	for _, m := range ms {
		if m.Name == node {
			return node, nil
		}
		if member.Escape(m.Name) == node {
			byDisplay = append(byDisplay, m.Name)
		}
	}
	switch len(byDisplay) {
	case 0:
		return node, nil
	case 1:
		return byDisplay[0], nil
	}
	return "", fmt.Errorf("node %q: the display name of %d members; remove them with the serf RPC by raw name", node, len(byDisplay))
}
