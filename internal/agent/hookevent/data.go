// Package hookevent builds the shoal events the agent hands to its hooks:
// the pool-change and health-change events (their "data" in the hooks'
// JSON stdin, schema version 1), and the synthetic events of `shoal hooks
// test`, with the wait for the handlers that took one.
package hookevent

import (
	"encoding/json"

	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/pool"

	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/pkg/poolschema"
)

// poolChangeData is the "data" of a pool-change hook event (schema version 1
// of the hooks' JSON stdin): the changes and the routed pool, whose JSON is
// the pool schema (package poolschema).
type poolChangeData struct {
	Changes  []hookChange    `json:"changes"`
	Isolated bool            `json:"isolated"`
	Pool     poolschema.Pool `json:"pool"`
}

type hookChange struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Addr    string `json:"addr"`
	From    string `json:"from"`
	To      string `json:"to"`
	Reason  string `json:"reason,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// poolChangeJSON builds the data of a pool-change event from a router update:
// the routed pool (what sinks apply) and the changes.
func poolChangeJSON(u routing.Update) json.RawMessage {
	p := u.Routed
	if p == nil {
		p = u.Pool
	}
	d := poolChangeData{Changes: []hookChange{}, Isolated: u.Isolated, Pool: p.Schema()}
	for _, c := range u.Changes {
		d.Changes = append(d.Changes, hookChange{Cluster: c.Cluster, Node: c.Node, Addr: c.Addr,
			From: RoleName(c.From), To: RoleName(c.To), Reason: string(c.Reason), Detail: c.Detail})
	}
	b, _ := json.Marshal(d)
	return b
}

// healthChangeJSON builds the data of a health-change event.
func healthChangeJSON(e probe.Event) json.RawMessage {
	b, _ := json.Marshal(struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	}{e.PrevState.String(), e.Status.State.String(), string(e.Status.Reason), e.Status.Message})
	return b
}

// PoolChange is the pool-change event of a router update.
func PoolChange(u routing.Update) hooks.Event {
	return hooks.Event{Type: hooks.PoolChange, Time: u.At, Data: poolChangeJSON(u)}
}

// HealthChange is the health-change event of a change of the probe's state.
func HealthChange(e probe.Event) hooks.Event {
	return hooks.Event{Type: hooks.HealthChange, Time: e.Status.Since, Data: healthChangeJSON(e)}
}

// RoleName is a pool role as events and the history name it: "none" for
// no role.
func RoleName(r pool.Role) string {
	if r == pool.RoleNone {
		return "none"
	}
	return string(r)
}
