// Command shoal-demo runs shoal's real job on one machine: three MariaDB
// servers (a primary and two GTID replicas), a shoal agent for each, an app
// agent driving HAProxy, and a load client; then a narrated fault tour. See
// docs/demo.md. The Makefile's demo, demo-fault and demo-stop targets call
// it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/demo"
)

// usageError is a bad flag or environment value: exit 2.
type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var dir, shoal string
	var base int
	root := &cobra.Command{
		Use:           "shoal-demo",
		Short:         "Run shoal's real job on this machine: MariaDB, agents, HAProxy, a load client",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	defDir := os.Getenv("DEMO_DIR")
	if defDir == "" {
		defDir = demo.DefaultDir
	}
	root.PersistentFlags().StringVar(&dir, "dir", defDir, "state directory [$DEMO_DIR]")
	root.PersistentFlags().IntVar(&base, "port-base", demo.DefaultPortBase, "ports are this base + 1 to 34 [$DEMO_PORT_BASE]")
	root.PersistentFlags().StringVar(&shoal, "shoal", "", "shoal binary (default: shoal next to shoal-demo)")

	layout := func(cmd *cobra.Command) (*demo.Layout, error) {
		if !cmd.Flags().Changed("port-base") {
			if v := os.Getenv("DEMO_PORT_BASE"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, usageError{fmt.Errorf("DEMO_PORT_BASE=%q: not a number", v)}
				}
				base = n
			}
		}
		bin := shoal
		if bin == "" {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			bin = filepath.Join(filepath.Dir(self), "shoal")
		}
		l, err := demo.NewLayout(dir, base, bin)
		if err != nil {
			return nil, usageError{err}
		}
		return l, nil
	}
	sub := func(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, l *demo.Layout, args []string) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}, RunE: func(cmd *cobra.Command, a []string) error {
			l, err := layout(cmd)
			if err != nil {
				return err
			}
			return run(cmd, l, a)
		}}
	}
	root.AddCommand(
		sub("up", "start the demo in the background (a running one in the same dir is stopped first)", cobra.NoArgs,
			func(cmd *cobra.Command, l *demo.Layout, _ []string) error {
				return l.Up(cmd.Context(), cmd.OutOrStdout())
			}),
		sub("tour", "narrated fault tour against the running demo (make demo-fault)", cobra.NoArgs,
			func(cmd *cobra.Command, l *demo.Layout, _ []string) error {
				return l.Tour(cmd.Context(), cmd.OutOrStdout())
			}),
		sub("down", "stop every process of the demo by its PID (make demo-stop)", cobra.NoArgs,
			func(cmd *cobra.Command, l *demo.Layout, _ []string) error { return l.Down(cmd.OutOrStdout()) }),
		sub("status", "processes, pool, HAProxy and the client's last seconds", cobra.NoArgs,
			func(cmd *cobra.Command, l *demo.Layout, _ []string) error {
				return l.Status(cmd.Context(), cmd.OutOrStdout())
			}),
		sub("client", "the load client in the foreground (up runs one in the background)", cobra.NoArgs,
			func(cmd *cobra.Command, l *demo.Layout, _ []string) error {
				return l.RunClient(cmd.Context(), cmd.OutOrStdout())
			}),
		sub("start-db NODE", "start a db node's mariadbd again (after kill -9)", cobra.ExactArgs(1),
			func(cmd *cobra.Command, l *demo.Layout, a []string) error { return l.StartDB(cmd.Context(), a[0]) }),
	)
	return root
}
