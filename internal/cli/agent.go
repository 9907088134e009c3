package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/agent"
	"github.com/shoaldb/shoal/internal/api"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/metrics"
)

func newAgentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a shoal agent",
		Long: `Run a shoal agent: join the gossip cluster, serve the HTTP API and the
Serf-compatible RPC, and stay until SIGINT/SIGTERM (graceful leave; a second
signal forces exit). SIGHUP reloads tags and the log level.

Settings come from defaults, then --config files (YAML), then SHOAL_*
environment variables, then flags.`,
		Args: exactArgs(0, "no arguments"),
	}
	flags := config.BindFlags(cmd.Flags())
	// The agent's --http-addr is its listen address: same flag, same default.
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := flags.Load(os.Getenv)
		if err != nil {
			return &usageError{fmt.Errorf("invalid configuration:\n%w", indentErrors(err))}
		}
		if flags.Check != "" {
			fmt.Fprintf(g.stdout, "configuration %s is valid\n", flags.Check)
			return nil
		}
		return runAgent(cmd.Context(), g, cfg, flags)
	}
	return cmd
}

// indentErrors prints joined errors one per line.
func indentErrors(err error) error {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		s := ""
		for i, e := range j.Unwrap() {
			if i > 0 {
				s += "\n"
			}
			s += "  " + e.Error()
		}
		return errors.New(s)
	}
	return errors.New("  " + err.Error())
}

func runAgent(ctx context.Context, g *globals, cfg *config.Config, flags *config.Flags) error {
	lvl, _ := logging.ParseLevel(cfg.LogLevel)
	logs := logging.New(g.stderr, cfg.LogFormat, lvl)
	log := logs.Logger.With("component", "agent")

	// Signals are handled here, not through ctx: the first INT/TERM leaves
	// gracefully, a second one forces exit, HUP reloads.
	sigCh := make(chan os.Signal, 4)
	signal.Notify(sigCh, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigCh)
	ctx = context.WithoutCancel(ctx)

	a, err := agent.New(cfg, logs)
	if err != nil {
		return err
	}
	// The registry exists before the agent starts, so that serf's and
	// memberlist's telemetry is bridged from the first message.
	reg := metrics.New()
	if err := metrics.BridgeGossip(reg); err != nil {
		log.Warn("gossip telemetry not exported", "err", err)
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	defer a.Shutdown()

	var srv *http.Server
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http_addr %s: %w", cfg.HTTPAddr, err)
		}
		reg.MustRegister(a.Collectors()...)
		handler := api.New(a, logs.Logger.With("component", "api"), ln.Addr().String(), metrics.Handler(reg))
		srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http api stopped", "err", err)
			}
		}()
		log.Info("http api listening", "addr", ln.Addr().String())
	}
	defer func() {
		if srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}
	}()

	for {
		select {
		case sig := <-sigCh:
			if sig == syscall.SIGHUP {
				reload(a, flags, log)
				continue
			}
			log.Info("caught signal, leaving the cluster (send it again to exit at once)", "signal", sig.String())
			return leaveAndExit(a, sigCh, log)
		case <-a.LeaveRequested():
			log.Info("leave requested through the API")
			return leaveAndExit(a, sigCh, log)
		case err := <-a.Fatal():
			return err
		}
	}
}

func reload(a *agent.Agent, flags *config.Flags, log interface {
	Info(string, ...any)
	Error(string, ...any)
}) {
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		log.Error("reload: configuration invalid, keeping the running one", "err", err)
		return
	}
	a.Reload(cfg)
	log.Info("reload done")
}

// leaveAndExit leaves gracefully (bounded by leave_timeout); another signal
// cuts it short.
func leaveAndExit(a *agent.Agent, sigCh <-chan os.Signal, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) error {
	done := make(chan error, 1)
	go func() { done <- a.Leave() }()
	for {
		select {
		case err := <-done:
			a.Shutdown()
			if err != nil {
				log.Warn("graceful leave incomplete", "err", err)
				return err
			}
			return nil
		case sig := <-sigCh:
			if sig == syscall.SIGHUP {
				continue
			}
			log.Warn("second signal: exiting without completing the leave", "signal", sig.String())
			return errors.New("forced exit before the graceful leave completed")
		}
	}
}
