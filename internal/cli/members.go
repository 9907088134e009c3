package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/pkg/client"
)

func newMembersCmd(g *globals) *cobra.Command {
	var (
		format, status, name string
		tags                 []string
		showTags             []string
	)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the cluster members the agent knows",
		Example: `  shoal members
  shoal members --status alive --tag role=db
  shoal members --format json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			tf, err := parseTagFilters(tags)
			if err != nil {
				return err
			}
			if err := checkRegex("--status", status); err != nil {
				return err
			}
			if err := checkRegex("--name", name); err != nil {
				return err
			}
			f := client.MemberFilter{Status: status, Name: name, Tags: tf}
			ms, err := g.client().Members(cmd.Context(), f)
			if err != nil {
				return err
			}
			return writeMembers(g.stdout, ms, format, showTags)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().StringVar(&status, "status", "", "only members whose status matches this regex (alive, failed, left, leaving)")
	cmd.Flags().StringVar(&name, "name", "", "only members whose name matches this regex")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "only members with tag key matching regex: key=regex (repeatable)")
	cmd.Flags().StringSliceVar(&showTags, "columns", nil, "tag keys to show as table columns (default: all tags in one column)")
	return cmd
}

// writeMembers prints members as an aligned table or as JSON.
func writeMembers(w io.Writer, ms []client.Member, format string, columns []string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if ms == nil {
			ms = []client.Member{}
		}
		return enc.Encode(client.MembersResponse{Members: ms})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"NAME", "ADDRESS", "STATUS", "LAG"}
	if len(columns) > 0 {
		for _, c := range columns {
			header = append(header, sanitize(strings.ToUpper(c)))
		}
	} else {
		header = append(header, "TAGS")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, m := range ms {
		status := m.Status
		if m.Invalid != nil {
			// Broke the rules for gossiped names and tags: never routed.
			status += " (" + m.Invalid.Reason + ")"
		}
		row := []string{sanitize(m.Name), sanitize(net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port)))), sanitize(status), lagText(m.Lag)}
		if len(columns) > 0 {
			for _, c := range columns {
				v := m.Tags[c]
				if v == "" {
					v = "-"
				}
				row = append(row, sanitize(v))
			}
		} else {
			row = append(row, formatTags(m.Tags))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func formatTags(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, sanitize(k)+"="+sanitize(tags[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// parseTagFilters parses repeated --tag key=regex flags.
func parseTagFilters(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range flags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, usagef("--tag %q: want key=regex", t)
		}
		if err := checkRegex("--tag "+k, v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// checkRegex refuses a filter the agent would refuse, before asking it:
// the agent matches the whole value, "^(?:" + expr + ")$".
func checkRegex(flag, expr string) error {
	if _, err := regexp.Compile("^(?:" + expr + ")$"); err != nil {
		// syntax.Error quotes the anchored form; its code alone is clearer.
		var se *syntax.Error
		if errors.As(err, &se) {
			return usagef("%s %q: bad regular expression: %s", flag, expr, se.Code)
		}
		return usagef("%s %q: bad regular expression: %w", flag, expr, err)
	}
	return nil
}
