package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
signal forces exit). SIGHUP reloads the log level, the tags (unless tags_file
is set: then shoal tags changes them) and the event handlers (with
hooks.coalesce); every other changed setting is logged as needing a restart.

A leave (signal, shoal leave, serf leave over the RPC) is complete, exit 0,
once every peer is leaving too (a whole cluster stopped at once) or no peer
is left, or once a peer answered after the leave was sent. If no alive peer
answers within leave_timeout (peers stopped or cut off), the agent says
which and exits 1: the leave was not confirmed, though it may still reach
them. Exit 2: the configuration is invalid.

Settings come from defaults, then --config files (YAML), then SHOAL_*
environment variables, then flags.`,
		Args: exactArgs(0, "no arguments"),
	}
	flags := config.BindFlags(cmd.Flags())
	// The agent's --http-addr is its listen address: same flag, same default.
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := flags.Load(os.Getenv)
		if err != nil {
			// Every problem at once: the file checks of what could be read too.
			if cfg != nil && cfg.FilesRead() {
				_, ferr := cfg.CheckFiles(os.Getenv, os.Geteuid())
				err = config.MergeErrors(err, ferr)
			}
			return &usageError{fmt.Errorf("invalid configuration:\n%w", indentErrors(err))}
		}
		if flags.Check != "" {
			return configCheck(g, cfg, flags)
		}
		return runAgent(cmd.Context(), g, cfg, flags)
	}
	return cmd
}

// configCheck runs, without the network and without changing any file,
// every check the agent runs at start (config.CheckFiles, which Start
// calls too): a configuration it accepts is one the agent starts with.
// Warnings (a handler program that cannot be run now) go to stderr and do
// not fail the check, as they do not stop the agent.
func configCheck(g *globals, cfg *config.Config, flags *config.Flags) error {
	for _, n := range cfg.Notices() {
		fmt.Fprintf(g.stderr, "notice: %s\n", n)
	}
	files, err := cfg.CheckFiles(os.Getenv, os.Geteuid())
	if err != nil {
		return &usageError{fmt.Errorf("invalid configuration:\n%w", indentErrors(err))}
	}
	for _, w := range files.Warnings {
		fmt.Fprintf(g.stderr, "warning: %s\n", w)
	}
	if w := cfg.NoTermWarning(); w != "" {
		fmt.Fprintf(g.stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(g.stdout, "configuration %s is valid\n", flags.Check)
	return nil
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
	defer limitProcs()()
	lvl, _ := logging.ParseLevel(cfg.LogLevel)
	logs := logging.New(g.stderr, cfg.LogFormat, lvl)
	log := logs.Logger.With("component", "agent")

	// Signals are handled here, not through ctx: the first INT/TERM leaves
	// gracefully, a second one forces exit, HUP reloads.
	sigCh := make(chan os.Signal, 4)
	signal.Notify(sigCh, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigCh)
	ctx = context.WithoutCancel(ctx)

	for _, w := range flags.SecretWarnings() {
		log.Warn(w)
	}
	for _, n := range cfg.Notices() {
		log.Info(n)
	}
	a, err := agent.New(cfg, logs)
	if err != nil {
		return err
	}
	// Every return from here shuts the agent down (Shutdown is idempotent;
	// a failed Start has already rolled back what it started).
	defer a.Shutdown()
	// The registry exists before the agent starts, so that serf's and
	// memberlist's telemetry is bridged from the first message.
	reg := metrics.New()
	if err := metrics.BridgeGossip(reg); err != nil {
		log.Warn("gossip telemetry not exported", "err", err)
	}
	if err := a.Start(ctx); err != nil {
		return startError(err)
	}

	var srv *http.Server
	if cfg.HTTPAddr != "" {
		ln, err := listenHTTP(cfg, g.httpLimits.MaxConns, reg)
		if err != nil {
			return startError(err)
		}
		reg.MustRegister(a.Collectors()...)
		handler := api.New(a, logs.Logger.With("component", "api"), ln.Addr().String(), metrics.Handler(reg))
		handler.AllowHosts(apiHostNames(cfg)...)
		srv = api.NewHTTPServer(handler, g.httpLimits)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http api stopped", "err", err)
			}
		}()
		scheme := "http"
		if cfg.HTTPTLS() {
			scheme = "https"
		}
		log.Info("http api listening", "addr", ln.Addr().String(), "scheme", scheme, "api_token_file", a.APITokenFile())
		if !cfg.HTTPLoopback() && !cfg.HTTPTLS() {
			log.Warn("the HTTP API listens beyond loopback without TLS (insecure_http): anyone who can reach it reads members, pool, health, history and metrics, and the API token of every write crosses the network in cleartext; set http_tls_cert_file and http_tls_key_file, or listen on 127.0.0.1",
				"addr", ln.Addr().String(), "insecure_http", cfg.InsecureHTTP)
		}
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
			log.Info("leave requested by a client (HTTP API or serf rpc)")
			return leaveAndExit(a, sigCh, log)
		case err := <-a.Fatal():
			return err
		}
	}
}

// startError is an error of the agent's start as printed: a configuration
// error found only now (config.InvalidError, exit 2 in Execute, which the
// shipped unit's RestartPreventExitStatus=2 does not restart) says so.
func startError(err error) error {
	var ie *config.InvalidError
	if errors.As(err, &ie) {
		return fmt.Errorf("invalid configuration:\n  %w", err)
	}
	return err
}

// apiHostNames are the names the API answers in Host besides IP literals
// and localhost: http_allowed_hosts, the host name, and the names in
// http_addr and advertise.
func apiHostNames(cfg *config.Config) []string {
	names := append([]string{cfg.HTTPAddr, cfg.Advertise}, cfg.HTTPAllowedHosts...)
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	return names
}

// listenHTTP opens the API's listener on http_addr: at most maxConns
// connections at once (its metrics in reg, if not nil), and TLS (1.2 or
// later) when a certificate is set.
func listenHTTP(cfg *config.Config, maxConns int, reg prometheus.Registerer) (net.Listener, error) {
	var tlsCfg *tls.Config
	if cfg.HTTPTLS() {
		cert, err := tls.LoadX509KeyPair(cfg.HTTPTLSCertFile, cfg.HTTPTLSKeyFile)
		if err != nil {
			return nil, config.Invalid(fmt.Errorf("http_tls_cert_file %s, http_tls_key_file %s: %w", cfg.HTTPTLSCertFile, cfg.HTTPTLSKeyFile, err))
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http_addr %s: %w", cfg.HTTPAddr, err)
	}
	lim := api.LimitListener(ln, maxConns)
	if reg != nil {
		reg.MustRegister(lim.Collectors()...)
	}
	ln = lim
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
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
