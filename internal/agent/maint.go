package agent

import (
	"github.com/shoaldb/shoal/internal/agent/maint"
	"github.com/shoaldb/shoal/internal/view"
)

// Maintenance mode is package maint's.

// ErrNotDB means an operation needs a database agent.
var ErrNotDB = maint.ErrNotDB

// SetMaint puts this node in maintenance (every agent then keeps it out of
// the pool, reason "maintenance") or takes it out; see maint.Maint.Set.
func (a *Agent) SetMaint(enable bool, reason string) (view.Maint, error) {
	return a.maint.Set(enable, reason)
}

// Maint returns this node's maintenance state, whether the tags file holds
// it, and whether this agent's pool holds the node out by flap damping.
func (a *Agent) Maint() view.Maint { return a.maint.State() }
