// Package cli holds the cobra commands of the shoal binary.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/pkg/client"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// globals are the flags every client command shares.
type globals struct {
	httpAddr string
	stdout   io.Writer
	stderr   io.Writer
}

func (g *globals) client() *client.Client { return client.New(g.httpAddr) }

// Execute runs the CLI with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "Error:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitError
}

// NewRoot builds the command tree.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "shoal",
		Short: "shoal keeps MySQL/MariaDB traffic on healthy servers",
		Long: `shoal runs an agent on every database and application host. The agents form one
gossip cluster (serf/memberlist), share each server's health and compute the
same routing pool everywhere. The other commands query a running agent.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("SHOAL_HTTP_ADDR")
	if def == "" {
		def = client.DefaultAddr
	}
	root.PersistentFlags().StringVar(&g.httpAddr, "http-addr", def, "HTTP API address of the agent to talk to [$SHOAL_HTTP_ADDR]")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(
		newAgentCmd(g),
		newMembersCmd(g),
		newJoinCmd(g),
		newLeaveCmd(g),
		newForceLeaveCmd(g),
		newEventCmd(g),
		newQueryCmd(g),
		newMonitorCmd(g),
		newTagsCmd(g),
		newPoolCmd(g),
		newHealthCmd(g),
		newMaintCmd(g),
		newHistoryCmd(g),
		newHooksCmd(g),
		newInfoCmd(g),
		newKeygenCmd(g),
		newKeysCmd(g),
		newVersionCmd(g),
	)
	return root
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %s, got %d argument(s)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("%s: want %s, got %d argument(s)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func checkFormat(f string) error {
	if f != "table" && f != "json" {
		return usagef("--format %q: want table or json", f)
	}
	return nil
}
