package agent

import (
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// DefaultMaintReason is the reason recorded when the operator gives none.
const DefaultMaintReason = "maintenance mode enabled, no reason given"

// ErrNotDB means an operation needs a database agent.
var ErrNotDB = errors.New("this agent has no database (role app): maintenance applies to database nodes")

// maintReason returns the reason to publish for r.
func maintReason(r string) string {
	if r == "" {
		return DefaultMaintReason
	}
	return r
}

// checkMaintReason rejects reasons that the tag would not carry as given.
func checkMaintReason(r string) error { return config.CheckMaintReason(r) }

// SetMaint puts this node in maintenance (every agent then keeps it out of
// the pool, reason "maintenance") or takes it out, like Consul's node
// maintenance mode. It returns once the new tags are queued for gossip. With
// a tags file the state survives restarts.
func (a *Agent) SetMaint(enable bool, reason string) (view.Maint, error) {
	if a.role != tags.RoleDB {
		return view.Maint{}, ErrNotDB
	}
	if err := checkMaintReason(reason); err != nil {
		return view.Maint{}, err
	}
	a.mu.Lock()
	prev := a.maint
	a.maint = ""
	if enable {
		a.maint = maintReason(reason)
	}
	a.mu.Unlock()
	restore := func() {
		a.mu.Lock()
		a.maint = prev
		a.mu.Unlock()
	}
	user := a.wantedUserTags()
	if err := a.writeTagsFile(user); err != nil {
		restore()
		return view.Maint{}, fmt.Errorf("persist maintenance state: %w", err)
	}
	if err := a.publish(user); err != nil {
		restore()
		_ = a.writeTagsFile(user)
		return view.Maint{}, err
	}
	st := a.Maint()
	if enable {
		a.log.Warn("maintenance enabled: this node leaves the pool on every agent", "reason", st.Reason)
	} else if prev != "" {
		a.log.Info("maintenance disabled: this node may return to the pool", "was", prev)
	}
	a.recordMaint(prev, st)
	return st, nil
}

// Maint returns this node's maintenance state, and whether this agent's
// pool holds the node out by flap damping.
func (a *Agent) Maint() view.Maint {
	a.mu.Lock()
	st := view.Maint{
		Node:      a.cfg.Node,
		Enabled:   a.maint != "",
		Reason:    a.maint,
		Persisted: a.cfg.TagsFile != "",
	}
	a.mu.Unlock()
	if a.router != nil {
		if n, ok := dampedNode(a.router.Current().Pool, st.Node); ok {
			st.Damped, st.DampedUntil, st.DampDetail = true, n.Until, n.Detail
		}
	}
	return st
}

// dampedNode returns node's entry in p when it is out with reason damped.
func dampedNode(p *pool.Pool, node string) (pool.Node, bool) {
	if p == nil {
		return pool.Node{}, false
	}
	for _, c := range p.Clusters {
		for _, n := range c.Out {
			if n.Name == node && n.Reason == pool.ReasonDamped {
				return n, true
			}
		}
	}
	return pool.Node{}, false
}
