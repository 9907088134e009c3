package haproxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/sink"
)

// Action is what a Command does to a server.
type Action string

// Actions.
const (
	ActionState    Action = "state"    // set server B/S state V
	ActionWeight   Action = "weight"   // set server B/S weight V
	ActionShutdown Action = "shutdown" // shutdown sessions server B/S
)

// Command is one runtime API command of a plan.
type Command struct {
	Backend string
	Server  string
	Node    string // the pool node the server maps to
	Action  Action
	Value   string // the state or weight to set; "" for ActionShutdown
	From    string // the current state or weight, for logs
}

// String is the runtime API command line.
func (c Command) String() string {
	switch c.Action {
	case ActionShutdown:
		return fmt.Sprintf("shutdown sessions server %s/%s", c.Backend, c.Server)
	default:
		return fmt.Sprintf("set server %s/%s %s %s", c.Backend, c.Server, c.Action, c.Value)
	}
}

// ServerRef names a server of a backend.
type ServerRef struct{ Backend, Server string }

func (r ServerRef) String() string { return r.Backend + "/" + r.Server }

// NodeRef names a pool node that a mapped backend lacks.
type NodeRef struct{ Backend, Cluster, Node string }

func (r NodeRef) String() string { return r.Backend + ": " + r.Cluster + "/" + r.Node }

// Plan is the work of one reconcile.
type Plan struct {
	// Commands to send, in order.
	Commands []Command
	// Held are the commands that would take servers out, withheld because
	// the agent is frozen.
	Held []Command
	// Unmapped are servers of mapped backends that map to no node of the
	// mapping's cluster; they are left alone.
	Unmapped []ServerRef
	// Missing are nodes of a mapping's cluster with no server in its
	// backend.
	Missing []NodeRef
	// Naming are nodes whose server name or address cannot be worked out,
	// or that share one with another node; the servers concerned are left
	// alone.
	Naming []string
	// Errors are mapped backends HAProxy does not have (or that have no
	// servers). The reconcile fails.
	Errors []string
}

// Planner turns HAProxy's server states and a pool into a Plan. It is a pure
// function of its inputs and safe for concurrent use.
type Planner struct {
	cfg   Config
	names *namer
}

// NewPlanner validates cfg and compiles its naming rule.
func NewPlanner(cfg Config) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	names, err := newNamer(cfg)
	if err != nil {
		return nil, fmt.Errorf("haproxy server_name: %w", err)
	}
	return &Planner{cfg: cfg, names: names}, nil
}

// Plan computes the commands that make servers follow pool p. Servers are
// those of `show servers state`, in its order; p may be nil (then every
// server is unmapped and nothing is sent). When frozen, a command takes a
// server out only where sink.Withholds lets it.
func (pl *Planner) Plan(servers []Server, p *pool.Pool, frozen bool) Plan {
	var plan Plan
	for _, m := range pl.cfg.Backends {
		var bs []Server
		for _, s := range servers {
			if s.Backend == m.Backend {
				bs = append(bs, s)
			}
		}
		if len(bs) == 0 {
			plan.Errors = append(plan.Errors, fmt.Sprintf("backend %s: not in haproxy or has no servers", m.Backend))
			continue
		}
		pl.planBackend(&plan, m, bs, p.Cluster(m.Cluster), frozen)
	}
	return plan
}

// planBackend adds one mapping's work to plan.
func (pl *Planner) planBackend(plan *Plan, m Mapping, servers []Server, c *pool.Cluster, frozen bool) {
	nodes, inRole := clusterNodes(c, m.Role)
	byKey := map[string]pool.Node{}
	ambiguous := map[string]bool{}
	matched := map[string]bool{} // nodes with a server, or reported in Naming
	for _, n := range nodes {
		key, err := pl.names.nodeKey(m.Cluster, n)
		if err != nil {
			matched[n.Name] = true
			plan.Naming = append(plan.Naming, fmt.Sprintf("backend %s: %v", m.Backend, err))
			continue
		}
		if other, ok := byKey[key]; ok {
			ambiguous[key] = true
			matched[n.Name], matched[other.Name] = true, true
			plan.Naming = append(plan.Naming, fmt.Sprintf("backend %s: nodes %s and %s both map to server %s; left alone",
				m.Backend, other.Name, n.Name, key))
			continue
		}
		byKey[key] = n
	}

	var ins, outs []Command
	for _, s := range servers {
		node, found, skip := pl.lookup(s, byKey, ambiguous)
		if skip {
			continue
		}
		if !found {
			plan.Unmapped = append(plan.Unmapped, ServerRef{m.Backend, s.Name})
			continue
		}
		matched[node.Name] = true
		cmd := Command{Backend: m.Backend, Server: s.Name, Node: node.Name}
		if inRole[node.Name] {
			if w := pl.cfg.Weight; w > 0 && s.Weight != w {
				ins = append(ins, with(cmd, ActionWeight, strconv.Itoa(w), strconv.Itoa(s.Weight)))
			}
			if from := s.Forced(); from != StateReady {
				ins = append(ins, with(cmd, ActionState, string(StateReady), string(from)))
			}
			continue
		}
		want, from := pl.cfg.DrainState, s.Forced()
		if from == want {
			continue
		}
		out := []Command{with(cmd, ActionState, string(want), string(from))}
		if want == StateMaint {
			out = append(out, with(cmd, ActionShutdown, "", ""))
		}
		if sink.Withholds(frozen, c, m.Role == RoleWriter, node.Name) {
			plan.Held = append(plan.Held, out...)
		} else {
			outs = append(outs, out...)
		}
	}
	// Writers: out before in, never two at once. Readers: in before out,
	// never an empty pool on the way.
	if m.Role == RoleWriter {
		plan.Commands = append(append(plan.Commands, outs...), ins...)
	} else {
		plan.Commands = append(append(plan.Commands, ins...), outs...)
	}
	for _, n := range nodes {
		if !matched[n.Name] {
			plan.Missing = append(plan.Missing, NodeRef{m.Backend, m.Cluster, n.Name})
		}
	}
}

// lookup finds the node of server s. skip is true when s matches a key that
// several nodes share: it is left alone and not reported as unmapped.
func (pl *Planner) lookup(s Server, byKey map[string]pool.Node, ambiguous map[string]bool) (node pool.Node, found, skip bool) {
	for _, k := range pl.names.serverKeys(s) {
		if ambiguous[k] {
			return pool.Node{}, false, true
		}
		if n, ok := byKey[k]; ok {
			return n, true, false
		}
	}
	return pool.Node{}, false, false
}

func with(c Command, a Action, value, from string) Command {
	c.Action, c.Value, c.From = a, value, from
	return c
}

// clusterNodes returns every node of c once, sorted by name, and the names of
// those in role. c may be nil.
func clusterNodes(c *pool.Cluster, role string) ([]pool.Node, map[string]bool) {
	inRole := map[string]bool{}
	if c == nil {
		return nil, inRole
	}
	members := c.Readers
	if role == RoleWriter {
		members = c.Writers
	}
	for _, n := range members {
		inRole[n.Name] = true
	}
	seen := map[string]bool{}
	var nodes []pool.Node
	for _, list := range [][]pool.Node{c.Writers, c.Readers, c.Out} {
		for _, n := range list {
			if !seen[n.Name] {
				seen[n.Name] = true
				nodes = append(nodes, n)
			}
		}
	}
	slices.SortFunc(nodes, func(a, b pool.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, inRole
}
