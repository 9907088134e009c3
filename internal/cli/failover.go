package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/pkg/client"
)

func newFailoverCmd(g *globals) *cobra.Command {
	var req client.FailoverRequest
	var format string
	cmd := &cobra.Command{
		Use:   "failover [--cluster C] [--dry-run]",
		Short: "Replace a dead writer with the most advanced replica, by the raft leader's rules",
		Long: `The failover of a cluster whose writer is dead (docs/consensus.md,
"Failover"), run by the raft leader whether or not consensus.failover is on,
by the same rules as the automatic one:

  - the writer must be dead by more than one witness: its own agent reports
    mysqld down (or is gone) and every replica lost it; a replica that still
    receives from it means no failover;
  - every other voter of the cluster stops its IO thread and applies what it
    received; the one that has every transaction any of them has (none with
    errant transactions or a broken SQL thread) gets the next writer term,
    is made writable, and the others replicate from it; when none has them
    all, nothing is promoted.

--dry-run changes nothing: it shows the verdict and the candidate the
gossiped positions point to (the run surveys each candidate first). Run it
on a voter's agent (a db agent with the consensus key); another voter than
the leader asks the leader to run it.

Exit status 0 when the failover promoted a replica (with --dry-run: the
writer is dead and a candidate may be promoted); 2 for a bad request (an
unknown cluster, none named where several have a term); 1 otherwise: the
writer is not dead, no candidate may be promoted, or the agent says why.

  shoal failover --dry-run
  shoal failover --cluster main`,
		Args: exactArgs(0, "no arguments (the cluster goes in --cluster)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			res, err := g.client().Failover(cmd.Context(), req)
			if err != nil {
				var ae *client.APIError
				if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
					return &usageError{err}
				}
				return err
			}
			if format == "json" {
				if err := writeJSONOut(g.stdout, res); err != nil {
					return err
				}
			} else {
				writeFailover(g.stdout, res)
			}
			switch {
			case !res.Dead:
				return fmt.Errorf("%s is not dead by its witnesses: no failover", sanitize(res.Writer))
			case res.DryRun && res.Pick == "":
				return errors.New("no candidate may be promoted")
			case !res.DryRun && !res.Done:
				return errors.New("failover not done: " + sanitize(res.Outcome))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Cluster, "cluster", "", "the cluster (default: the only one with a writer term)")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "only show the verdict and the candidate; change nothing")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// writeFailover prints the verdict, the candidates and what was done.
// Every string from the agent is escaped: names come from other hosts.
func writeFailover(w io.Writer, r *client.Failover) {
	fmt.Fprintf(w, "cluster %s: writer %s (term %d)\n", sanitize(r.Cluster), sanitize(r.Writer), r.Term)
	verdict := "alive"
	if r.Dead {
		verdict = "DEAD"
	}
	fmt.Fprintf(w, "verdict: %s: %s\n", verdict, sanitize(r.Death))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CANDIDATE\tGOSSIPED POSITION\t")
	for _, c := range r.Candidates {
		what := "the pick"
		if c.Out != "" {
			what = "passed over: " + c.Out
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", sanitize(c.Node), orDash(sanitize(c.Position)), sanitize(what))
	}
	_ = tw.Flush()
	if r.Why != "" {
		fmt.Fprintf(w, "%s\n", sanitize(r.Why))
	}
	if !r.DryRun && r.Outcome != "" {
		fmt.Fprintf(w, "the raft leader: %s\n", sanitize(r.Outcome))
	}
	switch {
	case r.DryRun:
		fmt.Fprintln(w, "dry run: nothing was changed")
	case r.Done:
		fmt.Fprintf(w, "failed over: %s holds term %d\n", sanitize(r.Pick), r.NewTerm)
	}
}
