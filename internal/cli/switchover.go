package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/view"
	"github.com/shoaldb/shoal/pkg/client"
)

func newSwitchoverCmd(g *globals) *cobra.Command {
	var req client.SwitchoverRequest
	var catchUp, applied time.Duration
	var format string
	cmd := &cobra.Command{
		Use:   "switchover --to NODE [--cluster C]",
		Short: "Move a cluster's writer to another server, out before in across the fleet",
		Long: `A planned move of the writer, run on a voter's agent (a db agent with the
consensus key, which signs every step):

  1. the old writer is set read-only and its client connections killed;
  2. the target waits until it has applied the old writer's last
     transaction (GTID), up to --catch-up;
  3. the quorum grants the target the next writer term;
  4. the target stops replicating and is made writable;
  5. the cluster's other servers replicate from the target (the old
     writer with mysql.replication_user, or its own account);
  6. every router (an agent that drives a sink) reports that it applied
     the new term, up to --applied.

A target behind the writer by more than 2s is refused unless --force: every
write waits while it catches up (the lag is shown in the first step). If
step 2 or 3 fails, the old writer is made writable again. Exit status 0
when every step passed and every reachable router applied the term; 2 when
the request is wrong and nothing was done (no --to, an unknown node or
cluster, a wait not from 1s to 2m); 1 otherwise: nothing was done because
of the fleet's state (the agent says why), or the steps say what happened.

  shoal switchover --to db2
  shoal switchover --to db2 --cluster main --catch-up 1m`,
		Args: exactArgs(0, "no arguments (the target goes in --to)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			// The API takes 0 for the default; a flag set to 0 is a
			// mistake (the flags' defaults are shown in --help), and the
			// flags' message names no such default.
			for _, f := range []struct {
				name string
				d    time.Duration
			}{{"catch-up", catchUp}, {"applied", applied}} {
				if cmd.Flags().Changed(f.name) && (f.d < view.MinSwitchoverWait || f.d > view.MaxSwitchoverWait) {
					return usagef("switchover: --%s %s: must be from %s to %s", f.name, f.d, view.MinSwitchoverWait, view.MaxSwitchoverWait)
				}
			}
			vr, err := view.SwitchoverRequest{To: req.To, Cluster: req.Cluster, CatchUp: catchUp, Applied: applied, Force: req.Force}.Normalize()
			if err != nil {
				return switchoverUsage(err)
			}
			req.CatchUpSeconds, req.AppliedSeconds = vr.CatchUp.Seconds(), vr.Applied.Seconds()
			res, err := g.client().Switchover(cmd.Context(), req)
			if err != nil {
				return switchoverUsage(err)
			}
			if format == "json" {
				if err := writeJSONOut(g.stdout, res); err != nil {
					return err
				}
			} else {
				writeSwitchover(g.stdout, res)
			}
			switch {
			case res.Error != "":
				return errors.New("switchover failed: " + sanitize(res.Error))
			case len(res.Routers.Pending) > 0:
				return fmt.Errorf("switchover done, but %d of %d reachable routers did not apply term %d in %s",
					len(res.Routers.Pending), len(res.Routers.Pending)+len(res.Routers.Applied), res.Term, vr.Applied)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.To, "to", "", "the node that becomes the writer (required)")
	cmd.Flags().StringVar(&req.Cluster, "cluster", "", "the cluster (default: the target's)")
	cmd.Flags().DurationVar(&catchUp, "catch-up", view.DefaultSwitchoverCatchUp, "longest wait for the target to catch up (writes wait as long), from 1s to 2m")
	cmd.Flags().DurationVar(&applied, "applied", view.DefaultSwitchoverApplied, "longest wait for the routers to apply the new term, from 1s to 2m")
	cmd.Flags().BoolVar(&req.Force, "force", false, "switch over to a target behind the writer by more than 2s (every write waits while it catches up)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// switchoverFlags are the flags of the request's fields.
var switchoverFlags = map[string]string{view.SwitchoverFieldTo: "--to", view.SwitchoverFieldCluster: "--cluster",
	view.SwitchoverFieldCatchUp: "--catch-up", view.SwitchoverFieldApplied: "--applied"}

// switchoverUsage makes a refusal of the request itself a usage error
// (exit 2): one found here (view.SwitchoverRequestError) names the flag,
// one the agent found is its HTTP 400. Any other error is returned as it is.
func switchoverUsage(err error) error {
	var re *view.SwitchoverRequestError
	if errors.As(err, &re) {
		if flag, ok := switchoverFlags[re.Field]; ok && re.Field == view.SwitchoverFieldTo && re.Value == `""` {
			return usagef("switchover: %s NODE is required", flag)
		} else if ok {
			return usagef("switchover: %s %s: %s", flag, re.Value, re.Reason)
		}
		return &usageError{err}
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		return &usageError{err}
	}
	return err
}

// writeSwitchover prints the steps, the write outage and the routers.
// Every string from the agent is escaped: names come from other hosts.
func writeSwitchover(w io.Writer, r *client.Switchover) {
	fmt.Fprintf(w, "switchover %s of cluster %s: %s (term %d) -> %s", sanitize(r.ID), sanitize(r.Cluster), sanitize(r.Old), r.From, sanitize(r.Target))
	if r.Term > 0 {
		fmt.Fprintf(w, " (term %d)", r.Term)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for i, s := range r.Steps {
		mark := "ok"
		if !s.OK {
			mark = "FAILED"
		}
		fmt.Fprintf(tw, "  %d.\t%s\t%s\t%s\t%.3fs\t%s\n", i+1, sanitize(s.Name), sanitize(s.Node), mark, s.Seconds, sanitize(s.Detail))
	}
	_ = tw.Flush()
	if r.ReadOnlySeconds > 0 {
		fmt.Fprintf(w, "no server took writes for %.3f s\n", r.ReadOnlySeconds)
	}
	if r.Term == 0 || r.Error != "" && len(r.Routers.Applied) == 0 && len(r.Routers.Pending) == 0 {
		return
	}
	ra := r.Routers
	fmt.Fprintf(w, "applied on %d/%d routers in %.2f s\n", len(ra.Applied), len(ra.Applied)+len(ra.Pending), ra.Seconds)
	for _, name := range slices.Sorted(maps.Keys(ra.Pending)) {
		fmt.Fprintf(w, "  not applied: %s: %s\n", sanitize(name), sanitize(ra.Pending[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(ra.Unreachable)) {
		fmt.Fprintf(w, "  not reachable: %s (%s)\n", sanitize(name), sanitize(ra.Unreachable[name]))
	}
}
