package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/fence"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/serfrpc"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/term"
)

// startup is what Start's steps hand on to each other.
type startup struct {
	serfOut io.Writer // serf's and memberlist's log output (see newSerfOut)
	sc      *serf.Config
	kr      *memberlist.Keyring // nil: gossip is not encrypted
	// newIPC serves serf's RPC protocol on ln, with serf's log ring for
	// its monitor command (serf's type for the ring is unexported).
	newIPC func(ln net.Listener, logOutput io.Writer) *sagent.AgentIPC
}

// startStep is one step of Start. What a step starts is recorded on the
// agent as soon as it exists, so that Shutdown releases it.
type startStep struct {
	name string
	run  func(ctx context.Context, st *startup) error
}

// startSteps are Start's steps in order: everything that only reads files
// and builds parts first, ports and goroutines last.
func (a *Agent) startSteps() []startStep {
	return []startStep{
		{"config", a.startConfig},       // serf config, files, keyring, API token, tags
		{"probe", a.startProbe},         // the MySQL probe (db agents), not yet running
		{"pool", a.startPool},           // router and sinks, not yet running
		{"history", a.startHistory},     // the history file
		{"serf", a.startSerfAgent},      // serf's agent (not started) and the hooks
		{"gossip", a.startGossip},       // transport, handlers, serf started
		{"rpc", a.startRPC},             // the Serf-compatible RPC listener
		{"consensus", a.startConsensus}, // the raft voter (db agents and witnesses with a consensus key)
		{"run", a.startLoops},           // probe, sinks, join and the other loops
	}
}

// Start binds the gossip ports, starts serf, the RPC listener and the join.
// When a step fails, everything the steps before it started is shut down
// (Shutdown) before Start returns the error.
func (a *Agent) Start(ctx context.Context) (err error) {
	a.life.started = a.clock.Now()
	ctx, a.life.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			a.Shutdown()
		}
	}()
	st := &startup{}
	for _, s := range a.startSteps() {
		if err := s.run(ctx, st); err != nil {
			return err
		}
		if a.life.afterStep != nil {
			if err := a.life.afterStep(s.name); err != nil {
				return err
			}
		}
	}
	local := a.Serf().LocalMember()
	a.log.Info("agent started", "node", a.cfg.Node, "gossip", net.JoinHostPort(local.Addr.String(), strconv.Itoa(int(local.Port))),
		"profile", a.cfg.Profile, "encrypted", st.kr != nil, "snapshot", a.cfg.Snapshot)
	return nil
}

// startConfig checks what the configuration names and builds serf's
// configuration, the keyring, the API token and the initial tags.
func (a *Agent) startConfig(_ context.Context, st *startup) error {
	st.serfOut = a.newSerfOut()
	gs, err := a.cfg.GossipSettings()
	if err != nil {
		return config.Invalid(err)
	}
	sc, err := gossip.SerfConfig(gs, st.serfOut)
	if err != nil {
		return err
	}
	st.sc = sc
	// The checks --config-check runs: every file the configuration names.
	files, err := a.cfg.CheckFiles(os.Getenv, os.Geteuid())
	if err != nil {
		return config.Invalid(err)
	}
	for _, w := range files.Warnings {
		a.log.Warn(w)
	}
	// Before anything writes a state file (the tags, temporaries removed).
	if err := a.startLock(); err != nil {
		return err
	}
	kr, warn, err := setupKeyring(a.cfg.Encrypt, a.cfg.KeyringFile)
	if err != nil {
		return config.Invalid(fmt.Errorf("keyring_file: %w", err))
	}
	sc.MemberlistConfig.Keyring, st.kr = kr, kr
	a.mesh.keyWarning = warn
	if warn != "" {
		a.log.Warn(warn)
	}
	if kr == nil {
		a.log.Warn("gossip encryption is OFF: any host that can reach the gossip port can join and read cluster traffic", "insecure_no_encryption", a.cfg.InsecureNoEncryption, "dev", a.cfg.Dev)
	}
	if err := a.loadAPIToken(); err != nil {
		return err
	}
	a.removeStaleTemps()
	return a.startTags(sc)
}

// startTags sets the tags serf starts with and what publish starts from:
// the tags file when it exists (it holds runtime changes, and the
// maintenance state), else the configured tags.
func (a *Agent) startTags(sc *serf.Config) error {
	saved, err := a.pub.Load(a.cfg.Tags)
	if err != nil {
		return config.Invalid(err)
	}
	if saved.InMaint {
		// Maintenance survives restarts: an operator who drained a node to
		// upgrade it does not want it back in the pool when the agent restarts.
		a.maint.Restore(saved.Maint)
		a.log.Warn("this node is in maintenance (from the tags file): it stays out of the pool until `shoal maint disable`", "reason", a.maint.Reason())
	}
	full, err := a.pub.Init(saved.User)
	if err != nil {
		return config.Invalid(err)
	}
	sc.Tags = full
	return nil
}

// startProbe builds the MySQL probe of a db agent; startLoops runs it.
func (a *Agent) startProbe(context.Context, *startup) error {
	if a.cfg.EffectiveRole() != tags.RoleDB {
		return nil
	}
	pc, err := probeConfig(a.cfg, os.Getenv)
	if err != nil {
		return config.Invalid(err)
	}
	pc.Clock = a.clock
	a.probe, err = probe.New(pc, a.logs.Logger, probe.NotifierFunc(a.onProbe)) // probe adds its component
	if err != nil {
		return fmt.Errorf("mysql probe: %w", err)
	}
	a.cons.act = fence.New(fence.FromProbe(pc, fence.DefaultTimeout))
	a.cons.fence = a.newFencer(pc)
	if a.cons.replUser, a.cons.replPassword, err = a.cfg.ReplicationAccount(); err != nil {
		return config.Invalid(err)
	}
	return nil
}

// startPool builds the router and the sinks; startLoops runs them.
func (a *Agent) startPool(_ context.Context, st *startup) (err error) {
	ps := a.cfg.Pool
	// The rounds run only once the router asks, after serf has started.
	a.mesh.reach = gossip.NewSerfReach(gossip.SerfReachConfig{
		Serf: func() *serf.Serf { return a.mesh.sa.Serf() }, Transport: func() *gossip.Transport { return a.mesh.tr },
		Memberlist: st.sc.MemberlistConfig, Done: func() { a.pool.router.Trigger() }, Log: a.logs.Logger.With("component", "gossip"),
	})
	// Every agent takes part in the position stream; gossip.positions
	// decides only how this agent's own positions travel (onProbe).
	a.mesh.pos = gossip.NewSerfPositions(gossip.SerfPositionsConfig{
		Serf: func() *serf.Serf { return a.mesh.sa.Serf() }, Transport: func() *gossip.Transport { return a.mesh.tr },
		Memberlist: st.sc.MemberlistConfig, Changed: func() { a.pool.router.Trigger() }, Log: a.logs.Logger.With("component", "gossip"),
	})
	a.pool.router = routing.New(routing.Config{Policy: ps.Policy(), Damp: ps.Damp(), NoDamping: !ps.Damping,
		IsolationWindow: ps.IsolationWindow, IsolationMax: ps.IsolationMax, Self: a.cfg.Node, Reach: a.mesh.reach,
		Terms: a.cons.terms.View, WriterLease: a.cfg.Consensus.LeaseDuration(), Clock: a.clock},
		a.poolMembers, a.logs.Logger.With("component", "pool"))
	a.pool.sinks, err = a.newSinks()
	return err
}

// startHistory opens the history file.
func (a *Agent) startHistory(context.Context, *startup) (err error) {
	a.rep.hist, err = history.Open(a.cfg.History.WithDefaults(), a.logs.Logger)
	return err
}

// startSerfAgent creates serf's agent (nothing runs yet) and the hooks. The
// hooks' local member is read from this serf agent: by construction it
// exists before any event can reach a hook, and serf's agent sets its serf
// before it starts the event loop that feeds them.
func (a *Agent) startSerfAgent(_ context.Context, st *startup) (err error) {
	ac := sagent.DefaultConfig()
	ac.NodeName = a.cfg.Node
	sa, err := sagent.Create(ac, st.sc, st.serfOut)
	if err != nil {
		return fmt.Errorf("create serf agent: %w", err)
	}
	a.mesh.sa = sa
	if a.rep.hooks, err = a.newHooks(func() serf.Member { return sa.Serf().LocalMember() }); err != nil {
		return err
	}
	a.pool.router.Listen(a.onPool())
	return nil
}

// startGossip binds the gossip ports and starts serf with the event
// handlers: the failure gate in front of the events and the hooks when
// gossip.confirm_failures is on.
func (a *Agent) startGossip(_ context.Context, st *startup) error {
	lw := sagent.NewLogWriter(512)
	a.rpc.monitor = lw
	a.logs.SetMonitor(lw)
	st.newIPC = func(ln net.Listener, out io.Writer) *sagent.AgentIPC {
		return sagent.NewAgentIPC(a.mesh.sa, "", ln, out, lw, false)
	}

	mc := st.sc.MemberlistConfig
	tr, err := gossip.NewTransport(mc, log.New(st.serfOut, "", log.LstdFlags))
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", a.cfg.Bind, err)
	}
	a.mesh.tr, mc.Transport = tr, tr
	tr.SetPositions(a.mesh.pos)

	sa := a.mesh.sa
	if a.cfg.Gossip.ConfirmFailures {
		a.mesh.gate = gossip.NewSerfGate(gossip.SerfGateConfig{
			Serf: sa.Serf, Transport: tr, Memberlist: mc,
			Emit: func(e serf.Event) {
				a.mesh.events.HandleEvent(e)
				term.HideEvents(a.rep.hooks).HandleEvent(e)
			},
			Log: a.logs.Logger.With("component", "gossip"),
		})
		sa.RegisterEventHandler(a.mesh.gate)
	} else {
		sa.RegisterEventHandler(a.mesh.events)
		sa.RegisterEventHandler(term.HideEvents(a.rep.hooks))
	}
	if err := sa.Start(); err != nil {
		return fmt.Errorf("start gossip on %s: %w", a.cfg.Bind, err)
	}
	// From now on, streams from addresses that are no member's get the
	// strangers' limits (docs/security.md, "Streams").
	tr.SetMembers(gossip.SerfMemberIPs(sa.Serf()))
	a.join.conflicts.Attach(sa.Serf())
	return nil
}

// startRPC serves the Serf RPC protocol behind the gate, when rpc_addr is
// set.
func (a *Agent) startRPC(_ context.Context, st *startup) error {
	if a.cfg.RPCAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.RPCAddr)
	if err != nil {
		return fmt.Errorf("rpc_addr %s: %w", a.cfg.RPCAddr, err)
	}
	// serf serves the protocol behind the gate, which does the auth:
	// rpc_auth when set (then for every command), else the API token.
	token := cmp.Or(a.cfg.RPCAuth, a.APIToken())
	gate, err := serfrpc.New(ln, serfrpc.Config{Token: token, Strict: a.cfg.RPCAuth != "",
		CheckTags: a.CheckTagChange, EventHandlers: a.serfInfoHandlers, Leave: a.LeaveForRPC, AfterLeave: a.RequestLeave,
		Logger: a.logs.Logger.With("component", "rpc")})
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("rpc_addr %s: %w", a.cfg.RPCAddr, err)
	}
	a.rpc.ln, a.rpc.gate = ln, gate
	// The IPC's own logger must not feed the monitor stream it serves.
	ipcOut := &logging.StdWriter{Logger: a.logs.Plain}
	a.rpc.ipc = st.newIPC(gate.Backend(), ipcOut)
	a.log.Info("serf-compatible rpc listening", "addr", ln.Addr().String(), "rpc_auth", a.cfg.RPCAuth != "")
	return nil
}

// startLoops runs the probe, the sinks and the agent's loops until ctx ends
// (Shutdown cancels it and waits for them).
func (a *Agent) startLoops(ctx context.Context, _ *startup) error {
	if a.probe != nil {
		if err := a.probe.Start(ctx); err != nil {
			return fmt.Errorf("mysql probe: %w", err)
		}
	}
	a.startSinks(ctx)
	loops := []func(context.Context){a.reannounce, a.pub.Run, a.pool.router.Run, a.retryJoin, a.watchSerf, a.runConsensus, a.cons.terms.Run, a.runFence, a.cons.sw.Resume, a.runFailover}
	loops = append(loops, func(ctx context.Context) { a.mesh.pos.Run(ctx.Done()) })
	if a.mesh.peers != nil {
		loops = append(loops, a.mesh.peers.Run, a.mesh.peers.Rejoin)
		a.mesh.peers.MarkDirty()
	}
	for _, loop := range loops {
		a.life.wg.Add(1)
		go func() {
			defer a.life.wg.Done()
			loop(ctx)
		}()
	}
	return nil
}

// watchSerf stops the agent when serf shuts down by itself: not for a
// name conflict this agent lost (that already stops it), nor when ctx ends.
func (a *Agent) watchSerf(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-a.mesh.sa.ShutdownCh():
		if a.join.conflicts.Lost() == "" {
			a.fail(errors.New("gossip layer shut down unexpectedly (see the log)"))
		}
	}
}

// reannounce pushes this agent's state to a few alive peers once, just after
// the dead-node reclaim time has passed since start. An agent that restarts
// at a new address within that time after it was declared dead is refused
// by its peers ("conflicting address"), and memberlist would only retry at
// the next push-pull, up to push_pull_interval later; this makes it one
// reclaim time.
func (a *Agent) reannounce(ctx context.Context) {
	reclaim := a.cfg.Gossip.DeadNodeReclaimTime
	if reclaim <= 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-a.clock.After(reclaim + time.Second):
	}
	peers := gossip.AlivePeers(a.Serf().Members(), a.cfg.Node)
	if len(peers) == 0 {
		return
	}
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	peers = peers[:min(3, len(peers))]
	if _, err := a.joinCounted(peers, false); err != nil {
		a.log.Debug("re-announce after the reclaim time", "err", flatten(err))
	}
}
