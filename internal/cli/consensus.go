package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shoaldb/shoal/pkg/client"
)

// consensusTime is a time of the consensus section, in local time: a last
// contact or a grant may be days old.
func consensusTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// consensusRows adds the consensus rows of `shoal info` to its table:
// whether this agent votes and its raft state. row escapes every value.
func consensusRows(row func(k, v string), c *client.Consensus) {
	switch {
	case c == nil:
		row("consensus", "off (no consensus key: writer terms are not used)")
		return
	case !c.Voter:
		row("consensus", "on, this agent is not a voter")
		row("raft group", groupText(c))
		row("term keys", termKeysText(c.TermKeys))
		return
	}
	row("consensus", "voter "+c.ID+" ("+c.Addr+"), "+orDash(c.State))
	row("raft leader", leaderText(c))
	if c.Bootstrapped {
		row("raft bootstrap", fmt.Sprintf("bootstrapped (bootstrap_expect %d)", c.BootstrapExpect))
	} else {
		row("raft bootstrap", fmt.Sprintf("waiting for %d voters (bootstrap_expect)", c.BootstrapExpect))
	}
	row("raft group", groupText(c))
	row("raft log", fmt.Sprintf("term %d, last index %d, applied %d", c.RaftTerm, c.LastIndex, c.AppliedIndex))
	row("raft refused", refusedText(c.Refused))
	row("term keys", termKeysText(c.TermKeys))
	row("failover", failoverText(c))
	for _, cl := range slices.Sorted(maps.Keys(c.Failovers)) {
		row("failover of "+sanitize(cl), c.Failovers[cl])
	}
	for _, cl := range slices.Sorted(maps.Keys(c.Returned)) {
		row("this server in "+sanitize(cl), c.Returned[cl])
	}
}

// failoverText is the failover row: whether this agent, leading, replaces
// a dead writer.
func failoverText(c *client.Consensus) string {
	if c.Failover {
		return "on: as the raft leader, this agent replaces a dead writer (docs/consensus.md, Failover)"
	}
	return "off: a dead writer is not replaced until an operator acts (consensus.failover; shoal failover)"
}

// groupText is the raft group row: the group this agent follows, or the
// split when the voters name more than one.
func groupText(c *client.Consensus) string {
	if len(c.Groups) > 1 {
		var parts []string
		for _, g := range c.Groups {
			parts = append(parts, g.ID+" ("+strings.Join(g.Voters, ", ")+")")
		}
		return "SPLIT: voters of " + fmt.Sprint(len(c.Groups)) + " raft groups: " + strings.Join(parts, "; ") +
			"; no writes are routed where a writer term is required (docs/consensus.md, Fleet identity)"
	}
	if c.Group == "" {
		return "none known yet"
	}
	return c.Group
}

// termKeysText is the term keys row: the public keys writer terms are
// verified with (consensus.term_key takes them as they are shown).
func termKeysText(keys []string) string {
	if len(keys) == 0 {
		return "none: writer terms cannot be verified, so no writes are routed where a term is required"
	}
	return strings.Join(keys, ",")
}

// writeConsensusTables prints, under `shoal info`'s table, a voter's raft
// configuration and the writer terms this agent knows. Every string comes
// from the agent or another machine and goes through sanitize.
func writeConsensusTables(w io.Writer, c *client.Consensus) error {
	switch {
	case c == nil:
		return nil
	case !c.Voter:
		if len(c.Terms) == 0 {
			return nil
		}
		return writeTerms(w, c.Terms)
	}
	if err := writeVoters(w, c.Voters, c.State == "leader"); err != nil {
		return err
	}
	return writeTerms(w, c.Terms)
}

// leaderText names the leader and, on a follower, its last contact.
func leaderText(c *client.Consensus) string {
	switch {
	case c.State == "leader":
		return "this agent"
	case c.Leader == "" && c.LeaderAddr == "":
		return "none known"
	}
	s := orDash(c.Leader) + " (" + orDash(c.LeaderAddr) + ")"
	if !c.LastContact.IsZero() {
		s += ", last contact " + consensusTime(c.LastContact)
	}
	return s
}

// refusedText is the refused raft connections by reason, sorted.
func refusedText(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeVoters prints the raft configuration, one voter a line. Only the
// leader knows whose heartbeats fail: elsewhere STATUS is "-".
func writeVoters(w io.Writer, vs []client.ConsensusVoter, leads bool) error {
	if len(vs) == 0 {
		_, err := fmt.Fprintln(w, "\nno voters in the raft configuration yet")
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOTER\tRAFT ADDRESS\tLEADER\tSTATUS")
	for _, v := range vs {
		leader, status := "", "-"
		if v.Leader {
			leader = "leader"
		}
		switch {
		case v.Failing:
			status = "failing since " + consensusTime(v.LastContact)
		case leads:
			status = "ok"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sanitize(v.ID), sanitize(orDash(v.Addr)), leader, status)
	}
	return tw.Flush()
}

// writeTerms prints the writer terms this agent knows, by cluster.
func writeTerms(w io.Writer, ts []client.Term) error {
	if len(ts) == 0 {
		_, err := fmt.Fprintln(w, "\nno writer terms granted yet")
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tTERM\tWRITER\tADDRESS\tGRANTED\tWHY")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", sanitize(t.Cluster), t.Term, sanitize(orDash(t.Writer)),
			sanitize(orDash(t.Addr)), consensusTime(t.Granted), sanitize(orDash(t.Why)))
	}
	return tw.Flush()
}
