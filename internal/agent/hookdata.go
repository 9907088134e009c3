package agent

import (
	"encoding/json"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
)

// poolChangeData is the "data" of a pool-change hook event (schema version 1
// of the hooks' JSON stdin).
type poolChangeData struct {
	Changes  []hookChange `json:"changes"`
	Isolated bool         `json:"isolated"`
	Pool     hookPool     `json:"pool"`
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

type hookPool struct {
	Clusters []hookCluster `json:"clusters"`
}

type hookCluster struct {
	Name     string     `json:"name"`
	Writers  []hookNode `json:"writers"`
	Readers  []hookNode `json:"readers"`
	Out      []hookNode `json:"out"`
	Conflict []string   `json:"conflict"`
}

type hookNode struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func hookNodes(ns []pool.Node) []hookNode {
	out := make([]hookNode, 0, len(ns))
	for _, n := range ns {
		out = append(out, hookNode{Name: n.Name, Addr: n.Addr, Reason: string(n.Reason), Detail: n.Detail})
	}
	return out
}

// poolChangeJSON builds the data of a pool-change event from a router update:
// the routed pool (what sinks apply) and the changes.
func poolChangeJSON(u routing.Update) json.RawMessage {
	d := poolChangeData{Changes: []hookChange{}, Isolated: u.Isolated, Pool: hookPool{Clusters: []hookCluster{}}}
	for _, c := range u.Changes {
		d.Changes = append(d.Changes, hookChange{Cluster: c.Cluster, Node: c.Node, Addr: c.Addr,
			From: roleName(c.From), To: roleName(c.To), Reason: string(c.Reason), Detail: c.Detail})
	}
	p := u.Routed
	if p == nil {
		p = u.Pool
	}
	for _, c := range p.Clusters {
		conflict := c.Conflict
		if conflict == nil {
			conflict = []string{}
		}
		d.Pool.Clusters = append(d.Pool.Clusters, hookCluster{Name: c.Name, Writers: hookNodes(c.Writers),
			Readers: hookNodes(c.Readers), Out: hookNodes(c.Out), Conflict: conflict})
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
