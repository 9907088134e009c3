package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/pkg/client"
)

func newPoolCmd(g *globals) *cobra.Command {
	var format, cluster string
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Show the routing pool: writers, readers, and who is out and why",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			p, err := g.client().Pool(cmd.Context(), cluster)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSONOut(g.stdout, p)
			}
			return writePool(g.stdout, p)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster")
	return cmd
}

func writePool(w io.Writer, p *client.PoolResponse) error {
	switch {
	case p.Isolated:
		fmt.Fprintf(w, "!! ISOLATED: %s\n\n", sanitize(p.Isolation))
	case p.Isolation != "":
		fmt.Fprintf(w, "!! ISOLATION EXPIRED: %s\n\n", sanitize(p.Isolation))
	case p.Held > 0:
		fmt.Fprintf(w, "%d node(s) held until their failure is verified (see DETAIL)\n\n", p.Held)
	}
	if len(p.Clusters) == 0 {
		fmt.Fprintln(w, "no database members in the cluster")
		return nil
	}
	for i, c := range p.Clusters {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "cluster %s\n", sanitize(c.Name))
		if c.Term != nil {
			fmt.Fprintln(w, termLine(*c.Term))
		}
		if c.Unsafe != "" {
			fmt.Fprintf(w, "unsafe: %s (%s)\n", sanitize(c.Unsafe), unsafeWhy(c.Unsafe))
		}
		if len(c.Conflict) > 0 {
			fmt.Fprintf(w, "!! WRITER CONFLICT: %s are all writable; writes go to at most one\n", sanitize(strings.Join(c.Conflict, ", ")))
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ROLE\tNODE\tADDRESS\tLAG\tREASON\tDETAIL")
		row := func(role string, n client.PoolNode) {
			reason, detail := n.Reason, n.Detail
			if reason == "" {
				reason = "-"
			}
			if !n.Until.IsZero() {
				detail = joinDetail(detail, "held out until "+clock(n.Until))
			}
			if detail == "" {
				detail = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", role, sanitize(n.Name), sanitize(n.Addr), lagText(n.Lag), sanitize(reason), sanitize(detail))
		}
		for _, n := range c.Writers {
			row("writer", n)
		}
		for _, n := range c.Readers {
			row("reader", n)
		}
		for _, n := range c.Out {
			row("out", n)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return writeSinks(w, p.Sinks, p.Generation)
}

// unsafeWhy says what a cluster's unsafe mark means, and what to do.
func unsafeWhy(unsafe string) string {
	if unsafe == "no writer term" {
		return "no db agent votes: writes go to any single writable server; turn consensus on: docs/consensus.md"
	}
	return "see docs/consensus.md"
}

// termLine is the writer term a cluster's writer rule followed, for a
// cluster that requires one: "term 3: db1, granted 2026-11-27T06:01:02Z",
// or "term: none known" (then the cluster has no writer).
func termLine(t client.Term) string {
	if t.Term == 0 {
		return "term: none known"
	}
	s := fmt.Sprintf("term %d: %s", t.Term, sanitize(t.Writer))
	if !t.Granted.IsZero() {
		s += ", granted " + t.Granted.UTC().Format(time.RFC3339)
	}
	return s
}

// lagText is a replica's lag as the tables show it: "3 tx / 1.2s (gtid)",
// "≥" before the seconds when they are a lower bound, "0s (sbm)",
// "unknown (sbm)" when Seconds_Behind_Master is NULL, "-" for a node
// without a lag.
func lagText(l *client.Lag) string {
	if l == nil {
		return "-"
	}
	sec := "unknown"
	if l.Seconds != nil {
		switch s := *l.Seconds; {
		case s <= 0:
			sec = "0s"
		case l.Source == "gtid": // measured: tenths
			sec = strconv.FormatFloat(s, 'f', 1, 64) + "s"
		default: // Seconds_Behind_Master: whole seconds
			sec = strconv.FormatFloat(s, 'f', 0, 64) + "s"
		}
		if l.AtLeast {
			sec = "≥" + sec
		}
	}
	if l.Transactions != nil {
		sec = strconv.FormatUint(*l.Transactions, 10) + " tx / " + sec
	}
	return sec + " (" + sanitize(l.Source) + ")"
}

// clock formats the end of a damping hold, in local time: a hold lasts at
// most a few minutes (pool.DefaultMaxHold), so the time of day is enough.
func clock(t time.Time) string {
	return t.Local().Format("15:04:05")
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// writeSinks prints each sink's state under the pool. APPLIED is the
// generation of the last pool the sink fully applied (see package sink),
// and "applied/gen" when that is behind gen, the generation of the pool
// shown ("-/gen": nothing applied yet).
func writeSinks(w io.Writer, sinks []client.SinkStatus, gen uint64) error {
	if len(sinks) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK	TARGET	STATE	LAST SUCCESS	APPLIED	FAILURES	LAST ERROR")
	for _, s := range sinks {
		last, lastErr, applied := "-", "-", "-"
		if !s.LastSuccess.IsZero() {
			last = s.LastSuccess.Local().Format("15:04:05.000")
		}
		if s.AppliedGeneration > 0 {
			applied = fmt.Sprint(s.AppliedGeneration)
		}
		if s.AppliedGeneration < gen {
			applied += fmt.Sprintf("/%d", gen)
		}
		if s.LastError != "" {
			lastErr = s.LastErrorAt.Local().Format("15:04:05.000") + " " + s.LastError
		}
		state := s.State
		if s.Frozen {
			state += " (frozen)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", sanitize(s.Name), sanitize(s.Target), sanitize(state), last, applied,
			s.Failures, sanitize(lastErr))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sinks {
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  %s: %s\n", sanitize(s.Name), sanitize(n))
		}
	}
	return nil
}

func newHealthCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Show whether this agent is healthy, and the local MySQL probe's state and facts (db agents)",
		Long: `Show whether this agent is healthy, as GET /v1/health decides (the
container HEALTHCHECK and load balancers use it). Healthy means all of:

  - gossip is alive (the agent is not leaving or shut down);
  - joined: the start-up join reached a node, or no join address is
    configured (alone on purpose); an agent whose join keeps failing, for
    example with the wrong gossip key, is not healthy;
  - its health tag reaches the cluster (tags publish);
  - on a db agent, the local MySQL probe says passing.

Exit status 0 when healthy; non-zero when not (the status line names the
first failing check) or when the agent cannot be reached.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			h, err := g.client().Health(cmd.Context())
			var ae *client.APIError
			if err != nil && !(errors.As(err, &ae) && ae.Status == 503 && h.Node != "") {
				return err
			}
			if format == "json" {
				if err := writeJSONOut(g.stdout, h); err != nil {
					return err
				}
			} else if err := writeHealth(g.stdout, h); err != nil {
				return err
			}
			if h.Status != "ok" {
				return fmt.Errorf("not healthy: %s", sanitize(h.Status))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func writeHealth(w io.Writer, h *client.HealthResponse) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Every value comes from the agent or the MySQL server: row escapes
	// them all.
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, sanitize(v)) }
	row("node", h.Node)
	row("role", h.Role)
	row("gossip", h.Gossip)
	row("status", h.Status)
	if m := h.MySQL; m != nil {
		state := m.State
		if m.Reason != "" {
			state += " (" + m.Reason + ")"
		}
		if !m.Since.IsZero() {
			state += " since " + m.Since.Format("15:04:05")
		}
		row("mysql", state)
		if m.Message != "" {
			row("message", m.Message)
		}
		row("target", m.Target)
		row("server", serverText(m))
		if f := factsText(m); f != "" {
			row("facts", f)
		}
		if g := positionText(m); g != "" {
			row("gtid position", g)
		}
		if m.Replica {
			lag := "unknown"
			if m.LagSeconds != nil {
				lag = fmt.Sprintf("%ds", *m.LagSeconds)
			}
			rx := ""
			if m.NotReceiving {
				rx = " (receives nothing from its source, not even heartbeats)"
			}
			row("replication", fmt.Sprintf("io %v%s, sql %v, lag %s", m.IORunning, rx, m.SQLRunning, lag))
			if m.LastIOError != "" {
				row("last io error", m.LastIOError)
			}
			if m.LastSQLError != "" {
				row("last sql error", m.LastSQLError)
			}
		}
		last := ""
		if m.LastDuration != "" {
			last = ", last took " + m.LastDuration
		}
		row("checks", fmt.Sprintf("%d (connections opened: %d%s)", m.Checks, m.Connects, last))
		row("published", m.Published)
		if f := m.Fence; f != nil {
			row("fenced", fenceText(*f))
		}
	}
	if p := h.Publish; p != nil {
		row("tags publish", publishText(*p))
	}
	return tw.Flush()
}

// serverText describes the MySQL server, or says it is unknown when the
// last check never reached it (its facts are then zero values, not facts).
func serverText(m *client.LocalHealth) string {
	switch {
	case m.Reachable || m.Version != "":
		return fmt.Sprintf("%s, server_id %d, read_only %v", m.Version, m.ServerID, m.ReadOnly)
	case m.LastCheck.IsZero():
		return "unknown (not checked yet)"
	}
	return "unknown (not reached in the last check)"
}

// positionText describes the server's GTID position, or why it has none
// and what judges its freshness then; "" when nothing is known.
func positionText(m *client.LocalHealth) string {
	switch {
	case m.GTIDPosition != "":
		return m.GTIDPosition
	case m.GTIDPositionNote != "":
		return "unknown (" + m.GTIDPositionNote + "): freshness judged by Seconds_Behind_Master"
	}
	return ""
}

// publishText describes whether the agent's tags reach the cluster.
func publishText(p client.PublishStatus) string {
	if p.OK {
		return "ok"
	}
	var b strings.Builder
	switch {
	case p.MinimalHealth:
		b.WriteString("FAILING: only a minimal critical health is published (this node is out of every pool)")
	case len(p.WithheldTags) > 0:
		fmt.Fprintf(&b, "DEGRADED: health published, user tags withheld: %s", sanitize(strings.Join(p.WithheldTags, ",")))
	default:
		b.WriteString("FAILING: retrying")
	}
	if !p.Since.IsZero() {
		b.WriteString(" since " + p.Since.Format("15:04:05"))
	}
	fmt.Fprintf(&b, " (%d failures): %s", p.Failures, sanitize(p.Error))
	return b.String()
}

// fenceText is the last fencing of a db agent's own server, on one line.
func fenceText(f client.FenceStatus) string {
	s := fmt.Sprintf("%s at %s (attempt %d): %s", f.Result, f.Time.Format("15:04:05"), f.Attempt, f.Why)
	if f.Result == "ok" {
		return s + fmt.Sprintf("; read-only, %d connections killed", f.Killed)
	}
	s += "; " + f.Error
	if !f.Retry.IsZero() {
		s += "; retry at " + f.Retry.Format("15:04:05")
	}
	return s
}
