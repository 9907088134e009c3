// Package cli holds the cobra commands of the shoal binary.
package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/pkg/client"
)

// Exit codes: 0 success, 1 failure (the agent or the cluster could not
// do it), 2 usage (the command line, a request or the configuration is
// wrong: running it again unchanged fails again). Execute is the one place
// that turns an error into one of them: a usageError, or a
// config.InvalidError found at start, is 2; any other error is 1.
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
	token    string // --token; SHOAL_HTTP_TOKEN when empty
	caFile   string // --ca-file; SHOAL_HTTP_CA_FILE when empty
	tls      *tls.Config
	// httpLimits bound the agent's HTTP server (tests shorten them).
	httpLimits api.Limits
	getenv     func(string) string
	stdout     io.Writer
	stderr     io.Writer
}

// loadTLS reads --ca-file (or SHOAL_HTTP_CA_FILE) before any command runs.
func (g *globals) loadTLS() error {
	ca := g.caFile
	if ca == "" {
		ca = g.getenv("SHOAL_HTTP_CA_FILE")
	}
	if ca == "" {
		return nil
	}
	cfg, err := caTLSConfig(ca)
	if err != nil {
		return err
	}
	g.tls = cfg
	return nil
}

// client returns the API client for --http-addr: with --token (or
// SHOAL_HTTP_TOKEN) when given, else finding the token by itself when the
// agent asks for it; with --ca-file for an https:// address.
func (g *globals) client() *client.Client {
	// No timeout of the client's: a command waits as long as the agent
	// takes (a join of dead addresses, a long query), and Ctrl-C ends it.
	opts := []client.Option{client.WithTimeout(0)}
	tok := g.token
	if tok == "" {
		tok = g.getenv("SHOAL_HTTP_TOKEN")
	}
	if tok != "" {
		opts = append(opts, client.WithToken(tok))
	} else {
		opts = append(opts, client.WithTokenFinder(findToken))
	}
	if g.tls != nil {
		opts = append(opts, client.WithTLSConfig(g.tls))
	}
	return client.New(g.httpAddr, opts...)
}

// Execute runs the CLI with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := checkCommand(root, args)
	if err == nil {
		err = root.ExecuteContext(ctx)
	}
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "Error:", errorText(err))
	var ue *usageError
	var ie *config.InvalidError
	if errors.As(err, &ue) || errors.As(err, &ie) {
		return ExitUsage
	}
	return ExitError
}

// checkCommand refuses an unknown command before cobra runs it: cobra's
// own error for it is untyped (exit 1), and a group such as "hooks" given
// an unknown subcommand would only print its help (exit 0).
func checkCommand(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return &usageError{fmt.Errorf("%w (see 'shoal --help')", err)}
	}
	if cmd != root && cmd.HasAvailableSubCommands() && !cmd.Runnable() &&
		len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && rest[0] != "help" {
		return usagef("unknown command %q for %q (see '%s --help')", rest[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

// errorText is err as printed: an error the agent answered (its message
// may quote other machines: join, force-leave, keys, query) is escaped
// whole, newlines included; the CLI's own errors keep their line breaks.
// When no agent answered, it says how to start one or point elsewhere.
func errorText(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return sanitize(err.Error())
	}
	msg := err.Error()
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		msg = strings.Replace(msg, ue.Error(), ue.Error()+unreachableAdvice, 1)
	}
	return sanitizeLines(msg)
}

// unreachableAdvice follows the client's error when no agent answered.
const unreachableAdvice = "; start one with `shoal agent`, or point elsewhere with --http-addr or SHOAL_HTTP_ADDR"

// NewRoot builds the command tree.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr, getenv: os.Getenv, httpLimits: api.DefaultLimits()}
	root := &cobra.Command{
		Use:   "shoal",
		Short: "shoal keeps MySQL/MariaDB traffic on healthy servers",
		Long: `shoal runs an agent on every database and application host. The agents form one
gossip cluster (serf/memberlist), share each server's health and compute the
same routing pool everywhere. The other commands query a running agent.

Exit status: 0 success; 1 failure (no agent reachable, the agent or the
cluster could not do it, an unconfirmed leave); 2 usage error (unknown
command or flag, bad argument or filter, invalid configuration): running
it again unchanged fails again.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("SHOAL_HTTP_ADDR")
	if def == "" {
		def = client.DefaultAddr
	}
	root.PersistentFlags().StringVar(&g.httpAddr, "http-addr", def, "HTTP API address of the agent to talk to: host:port, or https://host:port for an agent serving TLS [$SHOAL_HTTP_ADDR]")
	// No default shown for the token: help output must not print it.
	root.PersistentFlags().StringVar(&g.token, "token", "", "API token for writes, keys and logs [$SHOAL_HTTP_TOKEN] (default: read from the agent's api_token_file, as root or the agent's user, when the agent is on this host)")
	root.PersistentFlags().StringVar(&g.caFile, "ca-file", "", "PEM CA certificate(s) that verify an https:// agent [$SHOAL_HTTP_CA_FILE] (default: the system roots)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Name() == "agent" {
			return nil // the agent is a server, not a client of the API
		}
		return g.loadTLS()
	}
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
