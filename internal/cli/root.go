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
	// tokenFilePath is --token-file; SHOAL_API_TOKEN_FILE, then the
	// agent's default path, when empty.
	tokenFilePath string
	caFile        string // --ca-file; SHOAL_HTTP_CA_FILE when empty
	tls           *tls.Config
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

// client returns the API client for --http-addr (the default port added
// when it has none): with --token (or SHOAL_HTTP_TOKEN) when given, else
// reading the token file when the agent asks for the token (tokenFile);
// with --ca-file for an https:// address.
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
		f := g.tokenFile()
		opts = append(opts, client.WithHTTPClient(f.httpClient()), client.WithTokenFinder(f.find))
	}
	if g.tls != nil {
		opts = append(opts, client.WithTLSConfig(g.tls))
	}
	return client.New(withDefaultPort(g.httpAddr), opts...)
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
// an unknown subcommand would only print its help (exit 0). cobra's help
// and completion commands are added first (cobra adds them only when it
// runs), and its shell-completion requests pass as they are.
func checkCommand(root *cobra.Command, args []string) error {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return nil
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	cmd, rest, err := root.Find(args)
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return usagef("%s (see 'shoal --help')%s", msg, didYouMean(root, firstArg(args)))
	}
	if cmd.Name() == "help" && cmd.Parent() == root && len(rest) > 0 {
		if _, _, err := root.Find(rest); err != nil {
			return usagef("shoal help: unknown command %q (see 'shoal --help')%s", rest[0], didYouMean(root, rest[0]))
		}
	}
	if cmd != root && cmd.HasAvailableSubCommands() && !cmd.Runnable() &&
		len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && rest[0] != "help" {
		return usagef("unknown command %q for %q (see '%s --help')%s", rest[0], cmd.CommandPath(), cmd.CommandPath(), didYouMean(cmd, rest[0]))
	}
	return nil
}

// firstArg is the first argument that is not a flag (the unknown command
// cobra complains about, for a command line without global flags before
// it; otherwise possibly a flag's value, which suggests nothing).
func firstArg(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// didYouMean is a line suggesting the subcommands of cmd close to arg, or
// "".
func didYouMean(cmd *cobra.Command, arg string) string {
	if arg == "" {
		return ""
	}
	cmd.SuggestionsMinimumDistance = 2
	s := cmd.SuggestionsFor(arg)
	if len(s) == 0 {
		return ""
	}
	return "\nDid you mean this? " + strings.Join(s, ", ")
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
		Version:       versionText(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("SHOAL_HTTP_ADDR")
	if def == "" {
		def = client.DefaultAddr
	}
	root.PersistentFlags().StringVar(&g.httpAddr, "http-addr", def, "HTTP API address of the agent to talk to: host[:port], or https://host[:port] for an agent serving TLS; port 8946 when none is given [$SHOAL_HTTP_ADDR]")
	// No default shown for the token: help output must not print it.
	root.PersistentFlags().StringVar(&g.token, "token", "", "API token for writes, keys and logs [$SHOAL_HTTP_TOKEN] (default: read from --token-file)")
	root.PersistentFlags().StringVar(&g.tokenFilePath, "token-file", "", "file holding the API token, the agent's api_token_file, read as root or the agent's user and sent only to a process of this host running as the file's owner or root [$SHOAL_API_TOKEN_FILE] (default: $STATE_DIRECTORY/api-token, /var/lib/shoal/api-token for root, else ~/.local/state/shoal/api-token)")
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
		newSwitchoverCmd(g),
		newFailoverCmd(g),
		newHistoryCmd(g),
		newHooksCmd(g),
		newInfoCmd(g),
		newKeygenCmd(g),
		newTermKeyCmd(g),
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
