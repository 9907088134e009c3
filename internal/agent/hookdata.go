package agent

import (
	"encoding/json"

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
			From: roleName(c.From), To: roleName(c.To), Reason: string(c.Reason), Detail: c.Detail})
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
