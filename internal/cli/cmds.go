package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/version"
	"github.com/shoaldb/shoal/pkg/client"
)

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newJoinCmd(g *globals) *cobra.Command {
	var replay bool
	cmd := &cobra.Command{
		Use:   "join ADDR...",
		Short: "Ask the agent to join the cluster through one or more members",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("join: want at least one address")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := g.client().Join(cmd.Context(), args, replay)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Successfully joined cluster by contacting %d nodes.\n", n)
			return nil
		},
	}
	cmd.Flags().BoolVar(&replay, "replay", false, "replay past user events to this agent")
	return cmd
}

func newLeaveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "leave",
		Short: "Make the agent leave the cluster gracefully and exit",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.client().Leave(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, "Graceful leave started.")
			return nil
		},
	}
}

func newForceLeaveCmd(g *globals) *cobra.Command {
	var prune bool
	cmd := &cobra.Command{
		Use:   "force-leave NODE",
		Short: "Mark a failed member as left (with --prune, forget it entirely)",
		Long: `Mark a failed member as left, so that the cluster stops trying to reconnect
to it; with --prune, remove it (failed, leaving or left) from the member list
at once instead of after the reap time. NODE is the name shoal members shows.

An alive member is never touched: the command says it is alive and
unaffected, and exits 0. A left member without --prune is unchanged too.
An unknown NODE is an error (exit 1).`,
		Args: exactArgs(1, "one node name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := g.client().ForceLeaveNode(cmd.Context(), args[0], prune)
			if err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, forceLeaveText(args[0], r))
			return nil
		},
	}
	cmd.Flags().BoolVar(&prune, "prune", false, "remove the member from the member list entirely")
	return cmd
}

// forceLeaveText says what a force-leave did.
func forceLeaveText(asked string, r client.ForceLeaveResponse) string {
	node := sanitize(cmp.Or(r.Node, asked))
	switch r.Result {
	case client.ForceLeaveLeft:
		return fmt.Sprintf("Node %s was %s; it is now marked left.", node, sanitize(r.Before))
	case client.ForceLeavePruned:
		return fmt.Sprintf("Node %s (%s) was removed from the member list.", node, sanitize(r.Before))
	case client.ForceLeaveUnchanged:
		if r.Before == "alive" {
			return fmt.Sprintf("Node %s is alive: force-leave left it unaffected.", node)
		}
		return fmt.Sprintf("Node %s is %s: nothing changed (--prune removes it from the member list).", node, sanitize(r.Before))
	}
	return fmt.Sprintf("Force-leave of %s sent.", node) // an agent that does not say what it did
}

func newEventCmd(g *globals) *cobra.Command {
	var coalesce bool
	cmd := &cobra.Command{
		Use:   "event NAME [PAYLOAD]",
		Short: "Broadcast a user event to the cluster",
		Args:  rangeArgs(1, 2, "a name and an optional payload"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var payload []byte
			if len(args) == 2 {
				payload = []byte(args[1])
			}
			if err := g.client().Event(cmd.Context(), args[0], payload, coalesce); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Event '%s' dispatched.\n", sanitize(args[0]))
			return nil
		},
	}
	cmd.Flags().BoolVar(&coalesce, "coalesce", true, "let receivers coalesce events of the same name")
	return cmd
}

func newQueryCmd(g *globals) *cobra.Command {
	var (
		nodes  []string
		tags   []string
		ack    bool
		tmo    time.Duration
		format string
	)
	cmd := &cobra.Command{
		Use:   "query NAME [PAYLOAD]",
		Short: "Send a query to the cluster and print the responses",
		Args:  rangeArgs(1, 2, "a name and an optional payload"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			req := client.QueryRequest{Name: args[0], FilterNode: nodes, RequestAck: ack}
			if len(args) == 2 {
				req.Payload = []byte(args[1])
			}
			if tmo > 0 {
				req.Timeout = tmo.String()
			}
			if len(tags) > 0 {
				var err error
				if req.FilterTags, err = parseTagFilters(tags); err != nil {
					return err
				}
			}
			r, err := g.client().Query(cmd.Context(), req)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSONOut(g.stdout, r)
			}
			froms := make([]string, 0, len(r.Responses))
			for f := range r.Responses {
				froms = append(froms, f)
			}
			sort.Strings(froms)
			for _, a := range r.Acks {
				fmt.Fprintf(g.stdout, "Ack from '%s'\n", sanitize(a))
			}
			for _, f := range froms {
				fmt.Fprintf(g.stdout, "Response from '%s': %s\n", sanitize(f), sanitize(string(r.Responses[f])))
			}
			fmt.Fprintf(g.stdout, "Total Acks: %d\nTotal Responses: %d\n", len(r.Acks), len(r.Responses))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&nodes, "node", nil, "only these nodes answer (repeatable)")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "only nodes with tag key matching regex: key=regex (repeatable)")
	cmd.Flags().BoolVar(&ack, "ack", false, "request delivery acknowledgements")
	cmd.Flags().DurationVar(&tmo, "timeout", 0, "how long to wait for responses (default: serf's, scaled to cluster size)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func newMonitorCmd(g *globals) *cobra.Command {
	var level string
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Stream the agent's log",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.client().Monitor(cmd.Context(), level, func(line string) {
				fmt.Fprintln(g.stdout, sanitize(line))
			})
		},
	}
	cmd.Flags().StringVar(&level, "log-level", "info", "lowest level shown: trace, debug, info, warn, error")
	return cmd
}

func newTagsCmd(g *globals) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:   "tags",
		Short: "Change the agent's tags (persisted when the agent has a tags file)",
		Example: `  shoal tags --set dc=eu1 --set rack=r12
  shoal tags --delete rack`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(set) == 0 && len(del) == 0 {
				return usagef("tags: give --set key=value and/or --delete key")
			}
			m := map[string]string{}
			for _, s := range set {
				k, v, err := config.ParseTag(s)
				if err != nil {
					return &usageError{fmt.Errorf("--set: %w", err)}
				}
				m[k] = v
			}
			if err := checkTagChange(m, del); err != nil {
				return err
			}
			tags, err := g.client().UpdateTags(cmd.Context(), m, del)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Tags now: %s\n", formatTags(tags))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&set, "set", nil, "set a tag key=value (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "delete a tag (repeatable)")
	return cmd
}

// checkTagChange refuses, as a usage error, what the agent would refuse
// whatever its tags: a reserved or invalid key, a value that is not
// printable text, tags set that alone exceed the budget.
func checkTagChange(set map[string]string, del []string) error {
	if err := tags.CheckUserTags(set); err != nil {
		return usagef("--set: %w", err)
	}
	for _, k := range del {
		if tags.IsReserved(k) {
			return usagef("--delete %q: the tag is reserved by shoal and cannot be deleted", k)
		}
	}
	return nil
}

func newInfoCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the agent's own state: node, gossip, encryption, join, timings",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			info, err := g.client().Info(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSONOut(g.stdout, info)
			}
			return writeInfo(g.stdout, info)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func writeInfo(w io.Writer, in *client.Info) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Every value comes from the agent: row escapes them all.
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, sanitize(v)) }
	row("node", in.Node)
	row("gossip address", in.Addr)
	row("gossip state", in.Status)
	row("version", in.Version+" ("+in.GoVersion+")")
	row("uptime", in.Uptime)
	row("tags", formatTags(in.Tags))
	enc := "off (insecure)"
	if in.Encrypted {
		enc = "on"
		if in.KeyringFile != "" {
			enc += ", keyring " + in.KeyringFile
		}
	}
	row("encryption", enc)
	if in.KeyWarning != "" {
		row("key warning", in.KeyWarning)
	}
	join := "no join addresses configured"
	if len(in.Join.Addrs) > 0 {
		switch {
		case in.Join.Joined:
			join = fmt.Sprintf("joined via %s (contacted %d, %d attempts)", strings.Join(in.Join.Addrs, ","), in.Join.JoinedNodes, in.Join.Attempts)
		default:
			join = fmt.Sprintf("NOT JOINED via %s after %d attempts: %s", strings.Join(in.Join.Addrs, ","), in.Join.Attempts, in.Join.LastError)
		}
	}
	row("join", join)
	t := in.Timings
	row("profile", fmt.Sprintf("%s (probe %s/%s, suspicion x%d, gossip %s, retransmit x%d)", in.Profile, t.ProbeInterval, t.ProbeTimeout, t.SuspicionMult, t.GossipInterval, t.RetransmitMult))
	row("health score", fmt.Sprint(in.HealthScore))
	row("tags publish", publishText(in.Publish))
	row("members", fmt.Sprintf("%d (failed %d, left %d)", in.Serf.Members, in.Serf.Failed, in.Serf.Left))
	if in.RPCAddr != "" {
		row("serf rpc", in.RPCAddr)
	}
	if in.APITokenFile != "" {
		row("api token file", in.APITokenFile)
	}
	if in.Snapshot != "" {
		row("snapshot", in.Snapshot)
	}
	consensusRows(row, in.Consensus)
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeConsensusTables(w, in.Consensus)
}

func newKeygenCmd(g *globals) *cobra.Command {
	var fleet string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen [--fleet DIR [--force]]",
		Short: "Generate a new key, or with --fleet every key a new fleet needs",
		Long: `Print a new random 32-byte key, base64: a gossip key (encrypt), or a
consensus key (consensus.key), which must be another key than the gossip key.

` + fleetKeygenHelp,
		Args: exactArgs(0, "no arguments (the directory is --fleet DIR)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("fleet") {
				if force {
					return usagef("keygen: --force only goes with --fleet DIR")
				}
				k, err := agent.GenerateKey()
				if err != nil {
					return err
				}
				fmt.Fprintln(g.stdout, k)
				return nil
			}
			if err := fleetDir(fleet); err != nil {
				return err
			}
			k, err := newFleetKeys()
			if err != nil {
				return err
			}
			if err := writeFleet(fleet, k, force); err != nil {
				return err
			}
			writeFleetGuide(g.stdout, fleet, k.termKey)
			return nil
		},
	}
	cmd.Flags().StringVar(&fleet, "fleet", "", "create a new fleet's gossip keyring, consensus keyring and term key in this directory (mode 0700)")
	cmd.Flags().BoolVar(&force, "force", false, "with --fleet: replace the files if they exist")
	return cmd
}

func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the cluster's gossip keyring (rotation: install, use, remove)",
		Long: `Rotate the gossip key without downtime:
  shoal keys install NEWKEY   # every member learns the new key
  shoal keys use NEWKEY       # every member encrypts with it
  shoal keys remove OLDKEY    # every member forgets the old one`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys in use and how many members hold each",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := g.client().ListKeys(cmd.Context())
			if err := reportKeys(g, "list", r, err); err != nil {
				return err
			}
			keys := make([]string, 0, len(r.Keys))
			for k := range r.Keys {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(g.stdout, "%s\t[%d/%d]\n", sanitize(k), r.Keys[k], r.NumNodes)
			}
			return nil
		},
	}
	cmd.AddCommand(list)
	for _, op := range []string{"install", "use", "remove"} {
		cmd.AddCommand(&cobra.Command{
			Use:   op + " KEY",
			Short: strings.ToUpper(op[:1]) + op[1:] + " a key on every member",
			Args:  exactArgs(1, "one key"),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := config.CheckKey(args[0]); err != nil {
					return usagef("keys %s: KEY argument: %v", op, err)
				}
				r, err := g.client().KeyOp(cmd.Context(), op, args[0])
				if err := reportKeys(g, op, r, err); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s: done on %d/%d members\n", op, r.NumResp, r.NumNodes)
				return nil
			},
		})
	}
	return cmd
}

func reportKeys(g *globals, op string, r *client.KeyResponse, err error) error {
	if r != nil && len(r.Messages) > 0 {
		nodes := make([]string, 0, len(r.Messages))
		for n := range r.Messages {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			fmt.Fprintf(g.stderr, "  %s: %s\n", sanitize(n), sanitize(r.Messages[n]))
		}
	}
	if err != nil {
		if r != nil && r.NumNodes > 0 {
			return fmt.Errorf("keys %s: %d of %d members reported errors: %w", op, r.NumErr, r.NumNodes, err)
		}
		return err
	}
	return nil
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(g.stdout, versionText())
			return nil
		},
	}
}

// versionText is what shoal version and shoal --version print: the
// revision once (a build from an untagged tree has it as its version).
func versionText() string {
	v := "shoal " + version.Version
	if r := version.Revision; r != "" && !strings.Contains(version.Version, r) {
		v += " (revision " + r + ")"
	}
	return v
}
