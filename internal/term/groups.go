package term

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/serf/serf"

	gossiped "github.com/shoaldb/shoal/internal/member"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/tags"
)

// Groups is what this agent knows of the fleet's raft groups (docs/
// consensus.md, "Fleet identity"): the group each alive voter's tag says
// it is in, and the group this agent follows. A fleet has one group; two
// mean voters bootstrapped apart (a wrong bootstrap_expect, or a copied
// consensus key): no writes are routed in a cluster that follows terms
// until one is left, and the terms of any other group are never followed.
type Groups struct {
	// Voters lists, by group, the alive voters whose tag names it.
	Voters map[string][]string
	// Own is the group this agent follows: its own FSM's when it is a
	// voter in a configuration, else the one group the voters name ("":
	// none known, or more than one).
	Own string
}

// Conflict says why writes are not routed, "" when one group or none is
// seen.
func (g Groups) Conflict() string {
	if len(g.Voters) < 2 {
		return ""
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(g.Voters)) {
		parts = append(parts, fmt.Sprintf("%s (%s)", id, strings.Join(g.Voters[id], ", ")))
	}
	return fmt.Sprintf("voters of %d raft groups in the gossip: %s; no writes are routed until one group is left (bootstrapped apart: wipe the raft data of the voters of one group)",
		len(g.Voters), strings.Join(parts, ", "))
}

// Follows reports whether t may be followed: its group is the one this
// agent follows, or none is known yet.
func (g Groups) Follows(t pool.Term) bool {
	return g.Own == "" || t.Group == g.Own
}

// ReadGroups reads the groups from the members' voter tags; own is the
// group of this agent's own FSM ("" when it is no voter or in no
// configuration), self its node name.
func ReadGroups(self, own string, members []serf.Member) Groups {
	g := Groups{Voters: map[string][]string{}}
	if own != "" {
		g.Voters[own] = append(g.Voters[own], gossiped.Escape(self))
	}
	for _, m := range members {
		if m.Status != serf.StatusAlive || m.Name == self {
			continue
		}
		vt, ok := tags.Voter(m.Tags)
		if !ok || !vt.InConfig || vt.Group == "" {
			continue
		}
		g.Voters[vt.Group] = append(g.Voters[vt.Group], gossiped.Escape(m.Name))
	}
	for id := range g.Voters {
		slices.Sort(g.Voters[id])
	}
	switch {
	case own != "":
		g.Own = own
	case len(g.Voters) == 1:
		for id := range g.Voters {
			g.Own = id
		}
	}
	return g
}

// Groups reads the groups now: this voter's own and the gossip's.
func (b *Book) Groups() Groups {
	own := ""
	if v := b.voter(); v != nil {
		own = v.Group()
	}
	var members []serf.Member
	if b.cfg.Gossip != nil {
		members = b.cfg.Gossip.Members()
	}
	return ReadGroups(b.cfg.Node, own, members)
}

// OwnGroup is the raft group this agent follows ("": none known, or more
// than one).
func (b *Book) OwnGroup() string { return b.Groups().Own }
