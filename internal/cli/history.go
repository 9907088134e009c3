package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/pkg/client"
)

func newHistoryCmd(g *globals) *cobra.Command {
	var (
		format, since string
		f             client.HistoryFilter
	)
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Show pool and health transitions recorded by the agent",
		Long: `Every pool change (a node entering or leaving a role, with its reason),
local health change, writer conflict, writer term change, isolation
freeze and maintenance change, oldest first. The agent keeps the last history.size entries in
memory; history.file keeps them on disk.

Kinds (--kind): pool (a node entered or left a role), health (this node's
health), conflict (two writers, begun or ended), term (the writer term a
cluster's writes follow changed, say from "3 (db1)" to "4 (db2)"),
isolation (this agent lost or regained the cluster),
maint (maintenance mode on or off), fence (this db agent set its own
server read-only and killed its clients: another node holds the term, or
its lease ran out).

  shoal history --since 10m
  shoal history --node db2 --format json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if _, err := history.ParseKind(f.Kind); err != nil {
				return usagef("--kind: %v", err)
			}
			if since != "" {
				t, err := history.ParseSince(since, time.Now())
				if err != nil {
					return usagef("%v", err)
				}
				f.Since = t
			}
			if f.Limit < 0 {
				return usagef("--limit %d: must be 0 (all) or more", f.Limit)
			}
			h, err := g.client().History(cmd.Context(), f)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSONOut(g.stdout, h)
			}
			return writeHistory(g.stdout, h)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().StringVar(&f.Node, "node", "", "only this node")
	cmd.Flags().StringVar(&f.Cluster, "cluster", "", "only this cluster")
	cmd.Flags().StringVar(&f.Kind, "kind", "", "only this kind: "+history.KindNames())
	cmd.Flags().StringVar(&since, "since", "", "only entries newer than this: a duration (10m) or an RFC3339 time")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "only the newest N entries (0: all)")
	return cmd
}

func writeHistory(w io.Writer, h *client.HistoryResponse) error {
	if len(h.Entries) == 0 {
		fmt.Fprintln(w, "no transitions recorded")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tKIND\tCLUSTER\tNODE\tFROM\tTO\tREASON\tDETAIL")
		dash := func(s string) string {
			if s == "" {
				return "-"
			}
			return sanitize(s)
		}
		for _, e := range h.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("2006-01-02 15:04:05.000"),
				dash(e.Kind), dash(e.Cluster), dash(e.Node), dash(e.From), dash(e.To), dash(e.Reason), dash(e.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if h.Evicted > 0 {
		fmt.Fprintf(w, "(%d older entries dropped from memory; the agent keeps %d", h.Evicted, h.Capacity)
		if h.File != "" {
			fmt.Fprintf(w, "; older ones are in %s and its rotated files", sanitize(h.File))
		}
		fmt.Fprintln(w, ")")
	}
	return nil
}
