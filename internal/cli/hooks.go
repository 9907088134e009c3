package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/pkg/client"
)

func newHooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "List event handlers, or run them once with a synthetic event",
	}
	var format string
	list := &cobra.Command{
		Use:   "list",
		Short: "Event handlers with queue depth, drops, last run, exit code and duration",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			r, err := g.client().Hooks(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSONOut(g.stdout, r)
			}
			return writeHooks(g.stdout, r.Handlers)
		},
	}
	list.Flags().StringVar(&format, "format", "table", "output format: table or json")

	var name, payload, testFormat string
	test := &cobra.Command{
		Use:   "test EVENT",
		Short: "Run the handlers matching EVENT once, with a synthetic event, and show how they ended",
		Long: `EVENT is member-join, member-leave, member-failed, member-update,
member-reap (the event carries this agent's own member), user or query
(--name and --payload), pool-change (the current pool) or health-change (the
current probe state). Output goes to the agent's log, like every run.

  shoal hooks test user --name deploy --payload v42
  shoal hooks test pool-change`,
		Args: exactArgs(1, "one event type"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(testFormat); err != nil {
				return err
			}
			if err := checkTestEvent(args[0], name); err != nil {
				return err
			}
			r, err := g.client().TestHook(cmd.Context(), client.HookTestRequest{Event: args[0], Name: name, Payload: []byte(payload)})
			if err != nil {
				return err
			}
			if testFormat == "json" {
				return writeJSONOut(g.stdout, r)
			}
			if len(r.Handlers) == 0 {
				fmt.Fprintf(g.stdout, "no handler matches %s\n", sanitize(args[0]))
				return nil
			}
			if err := writeHooks(g.stdout, r.Handlers); err != nil {
				return err
			}
			if r.Response != nil {
				fmt.Fprintf(g.stdout, "query response: %s\n", sanitize(string(r.Response)))
			}
			if r.TimedOut {
				return fmt.Errorf("stopped waiting before every handler finished")
			}
			for _, h := range r.Handlers {
				if h.LastExitCode != 0 {
					return fmt.Errorf("handler %q exited with %d", h.Spec, h.LastExitCode)
				}
			}
			return nil
		},
	}
	test.Flags().StringVar(&name, "name", "", "user event or query name")
	test.Flags().StringVar(&payload, "payload", "", "user event or query payload")
	test.Flags().StringVar(&testFormat, "format", "table", "output format: table or json")
	cmd.AddCommand(list, test)
	return cmd
}

func writeHooks(w io.Writer, hs []client.HookStats) error {
	if len(hs) == 0 {
		_, err := fmt.Fprintln(w, "no event handlers configured (event_handlers, --event-handler)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HANDLER\tQUEUE\tRAN\tFAILED\tTIMED OUT\tDROPPED\tLAST START\tEXIT\tDURATION\tLAST ERROR")
	for _, h := range hs {
		last, exit, dur, lastErr := "-", "-", "-", "-"
		if !h.LastStart.IsZero() {
			last = h.LastStart.Local().Format("15:04:05.000")
			exit = fmt.Sprint(h.LastExitCode)
			if h.Running {
				exit = "running"
			}
		}
		if h.LastDuration != "" {
			dur = h.LastDuration
		}
		if h.LastError != "" {
			lastErr = h.LastError
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", sanitize(h.Spec), h.QueueDepth, h.QueueMax,
			h.Ran, h.Failed, h.TimedOut, formatDrops(h), last, exit, sanitize(dur), sanitize(lastErr))
	}
	return tw.Flush()
}

// formatDrops shows a handler's drops with their split by event class:
// "1092 (user 1090, query 2)". A member, pool or health drop is the one to
// look at: user events and queries are dropped first by design.
func formatDrops(h client.HookStats) string {
	if h.Dropped == 0 {
		return "0"
	}
	var parts []string
	for _, class := range hooks.Classes() {
		var n uint64
		for _, c := range h.DroppedByClass[class] {
			n += c
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", class, n))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprint(h.Dropped)
	}
	return fmt.Sprintf("%d (%s)", h.Dropped, strings.Join(parts, ", "))
}

// testEvents are the events `hooks test` can synthesize (agent.TestHook).
var testEvents = []string{hooks.MemberJoin, hooks.MemberLeave, hooks.MemberFailed, hooks.MemberUpdate,
	hooks.MemberReap, hooks.User, hooks.Query, hooks.PoolChange, hooks.HealthChange}

// checkTestEvent refuses, before asking the agent, an event it cannot
// synthesize, or a user event or query without --name.
func checkTestEvent(event, name string) error {
	if !slices.Contains(testEvents, event) {
		return usagef("hooks test: unknown event %q (want %s)", event, strings.Join(testEvents, ", "))
	}
	if (event == hooks.User || event == hooks.Query) && name == "" {
		return usagef("hooks test %s: --name is required", event)
	}
	return nil
}
