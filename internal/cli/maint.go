package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/pkg/client"
)

func newMaintCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "maint",
		Short: "Show, enable or disable maintenance mode of this agent's database node",
		Long: `A node in maintenance is out of the pool on every agent (reason
"maintenance"), whatever its health, until maintenance is disabled. With a
tags file (tags_file) the state survives agent restarts. Maintenance never
counts toward flap damping; when this agent's pool holds the node out by
damping (after repeated health removals), this command says so and until when.

  shoal maint enable --reason "kernel upgrade"
  shoal maint disable
  shoal maint`,
		Args: exactArgs(0, "no arguments (or a subcommand: enable, disable)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			st, err := g.client().Maint(cmd.Context())
			if err != nil {
				return err
			}
			return writeMaint(g, format, st)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")

	var reason string
	enable := &cobra.Command{
		Use:   "enable",
		Short: "Drain this node from the pool everywhere",
		Args:  exactArgs(0, "no arguments (the reason goes in --reason)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The agent refuses it too; refusing here is a usage error
			// (exit 2) that needs no agent.
			if err := config.CheckMaintReason(reason); err != nil {
				return usagef("maint enable: --reason: %v", err)
			}
			st, err := g.client().SetMaint(cmd.Context(), true, reason)
			if err != nil {
				return err
			}
			return writeMaint(g, "table", st)
		},
	}
	enable.Flags().StringVar(&reason, "reason", "", fmt.Sprintf("why, shown in every agent's pool (at most %d bytes)", tags.MaxMaintLen))
	disable := &cobra.Command{
		Use:   "disable",
		Short: "End maintenance: the node returns to the pool when healthy",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := g.client().SetMaint(cmd.Context(), false, "")
			if err != nil {
				return err
			}
			return writeMaint(g, "table", st)
		},
	}
	cmd.AddCommand(enable, disable)
	return cmd
}

func writeMaint(g *globals, format string, st *client.MaintStatus) error {
	if format == "json" {
		return writeJSONOut(g.stdout, st)
	}
	return writeMaintText(g.stdout, st)
}

func writeMaintText(w io.Writer, st *client.MaintStatus) error {
	if !st.Enabled {
		fmt.Fprintf(w, "node %s: maintenance off\n", sanitize(st.Node))
	} else {
		persist := "survives restarts"
		switch {
		case st.Warning != "":
			persist = "NOT SAVED, see the warning"
		case !st.Persisted:
			persist = "ends if the agent restarts: no tags_file"
		}
		fmt.Fprintf(w, "node %s: MAINTENANCE on (%s), out of the pool on every agent\nreason: %s\n",
			sanitize(st.Node), persist, sanitize(st.Reason))
	}
	if st.Warning != "" {
		fmt.Fprintf(w, "WARNING: %s\n", sanitize(st.Warning))
	}
	if !st.Damped {
		return nil
	}
	until := "until its penalty decays"
	if !st.DampedUntil.IsZero() {
		until = "until " + clock(st.DampedUntil) + " if it stays healthy"
	}
	_, err := fmt.Fprintf(w, "DAMPED: held out of this agent's pool by flap damping %s (%s)\n", until, sanitize(st.DampDetail))
	return err
}
