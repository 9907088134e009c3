// Package agent runs a shoal agent and wires its parts together: serf's
// agent (so that the Serf RPC protocol is served unchanged) with the gossip
// layer of package gossip (transport, failure confirmation, name-conflict
// vote, peers file), the start-up join with retries, keyring and API token
// persistence, the local MySQL probe, the routing pool and its sinks
// (HAProxy, pool file), event hooks, history, metrics and the
// Serf-compatible RPC gate. Start runs in steps (start.go) and shuts down
// what it started when one fails. The HTTP API is served by package api on
// top of the methods here.
//
// The policies are parts of their own, each with its own lock and tests:
// publishing the local tags, health first, with the tags file (package
// publish), maintenance mode (package maint), the graceful leave and the
// force-leave's name resolution (package leave), the hook events and
// `shoal hooks test` (package hookevent), what a router update changed
// (package poolevent), the writer terms this agent knows (package term),
// the fencing of its own server (package fencing) and its part in
// switchovers (package switchover, switchwiring.go). Agent only holds the
// parts and connects them (parts.go lists those without a package);
// TestAgentIsWiring bounds its fields and makes every mutex name what it
// guards, and TestFunctionsStayShort keeps functions under 80 lines. Time
// comes from one clock (Agent.clock), handed to every part.
package agent

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/agent/leave"
	"github.com/shoaldb/shoal/internal/agent/maint"
	"github.com/shoaldb/shoal/internal/agent/publish"
	"github.com/shoaldb/shoal/internal/apitoken"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/pool"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/term"
	"github.com/shoaldb/shoal/internal/view"
)

// Agent is a running shoal agent: wiring. Each field is one part; the
// parts that hold state behind a lock are types of their own, which say
// what their mutex guards (TestAgentIsWiring keeps it so).
type Agent struct {
	cfg   *config.Config // as started; Reload applies what it can elsewhere
	logs  *logging.Logging
	log   *slog.Logger
	clock clockwork.Clock // every part's time

	life  lifecycle          // start, fatal errors, the leave request, shutdown
	mesh  mesh               // serf, memberlist's transport, failure gate, peers, events
	join  joiner             // the start-up join and the name-conflict vote
	rpc   rpcParts           // the Serf-compatible RPC and the API token
	pub   *publish.Publisher // the local tags: health, maintenance, user tags
	maint *maint.Maint       // maintenance mode
	leave *leave.Leaver      // the graceful leave
	probe *probe.Probe       // the local MySQL probe (db agents), else nil
	pool  poolParts          // the router and its sinks
	rep   reporters          // history, hooks and metrics
	cons  consensusParts     // the raft voter (consensus.go), when this agent is one
}

// New validates what it can without binding ports and prepares the agent.
func New(cfg *config.Config, logs *logging.Logging) (*Agent, error) {
	a := &Agent{
		cfg:   cfg,
		logs:  logs,
		log:   logs.Logger.With("component", "agent"),
		clock: clockwork.NewRealClock(),
		life:  newLifecycle(),
		mesh:  mesh{events: newEventHub()},
		cons:  consensusParts{wake: make(chan struct{}, 1)},
		rep:   reporters{metrics: metrics.NewAgent(), flaps: &flapCounter{failed: map[string]bool{}}},
	}
	a.cons.terms = a.newTermBook()
	a.join.status = view.JoinStatus{Addrs: cfg.Join}
	a.mesh.events.onEvent = a.observeEvent
	a.cons.port = consensusPort(cfg)
	a.newTagParts()
	a.leave = leave.New(leave.Config{Node: cfg.Node, Clock: a.clock, Log: a.log, Stopping: a.life.stopping})
	// serf may log a conflict over our name while it is being created:
	// the vote exists before serf does and waits for it (Attach).
	a.join.conflicts = gossip.NewConflicts(gossip.ConflictConfig{
		Node:    cfg.Node,
		Joining: func() bool { return a.join.inFlight.Load() > 0 },
		Lost:    func(err error) { a.fail(nameConflictError(err)) },
		Log:     a.log,
	})
	if path := a.peersPath(); path != "" {
		a.mesh.peers = gossip.NewPeers(gossip.PeersConfig{
			Path: path, Self: cfg.Node,
			Members:       func() []serf.Member { return a.Serf().Members() },
			Join:          func(addrs []string) (int, error) { return a.joinCounted(addrs, false) },
			RetryInterval: cfg.RetryInterval, RetryMaxWait: cfg.RetryMaxWait,
			Log: a.log,
		})
	}
	return a, nil
}

// newTagParts builds the publisher of the local tags and the maintenance
// mode, which publishes through it.
func (a *Agent) newTagParts() {
	cfg := a.cfg
	var port uint16
	if cfg.EffectiveRole() == tags.RoleDB {
		port = uint16(cfg.MySQLPort())
	}
	a.pub = publish.New(publish.Config{
		Role: cfg.EffectiveRole(), Cluster: cfg.Cluster, TagsFile: cfg.TagsFile, Port: port,
		Serf:      func() publish.Local { return a.Serf() },
		Maint:     func() string { return a.maint.Reason() },
		Voter:     a.voterTag,
		Published: func() { a.pool.router.Trigger() },
		Streamed:  cfg.Gossip.Positions != gossip.PositionsTags,
		Clock:     a.clock, Log: a.log,
	})
	a.maint = maint.New(maint.Config{
		Node: cfg.Node, DB: cfg.EffectiveRole() == tags.RoleDB, TagsFile: cfg.TagsFile, Tags: a.pub,
		Pool: func() *pool.Pool {
			if a.pool.router == nil {
				return nil
			}
			return a.pool.router.Current().Pool
		},
		Changed: a.recordMaint,
		Log:     a.log,
	})
}

// nameConflictError is the error of a lost name-conflict vote: a
// configuration error (exit status 2), which the shipped systemd unit does
// not restart: a restart would only lose the vote again, every RestartSec.
func nameConflictError(err error) error {
	return config.Invalid(fmt.Errorf("%w; if this node only moved to a new address, start it again once `shoal members` shows its old address failed", err))
}

// peersPath is the peers file kept next to the snapshot, or "".
func (a *Agent) peersPath() string { return gossip.PeersPath(a.cfg.Snapshot) }

// loadAPIToken reads the API token from api_token_file, creating the file
// with a new token at the first start.
func (a *Agent) loadAPIToken() error {
	a.rpc.tokenFile = a.cfg.APITokenPath(os.Getenv, os.Geteuid())
	tok, created, err := apitoken.LoadOrCreate(a.rpc.tokenFile)
	if err != nil {
		return config.Invalid(fmt.Errorf("api_token_file: %w", err))
	}
	if created {
		a.log.Info("created the API token", "api_token_file", a.rpc.tokenFile)
	}
	a.rpc.token = tok
	return nil
}

// APIToken is the token that state-changing and secret-revealing API and
// RPC requests must carry.
func (a *Agent) APIToken() string { return a.rpc.token }

// APITokenFile is the file the API token was read from.
func (a *Agent) APITokenFile() string { return a.rpc.tokenFile }

// observeEvent runs inline in serf's event loop: keep it cheap.
func (a *Agent) observeEvent(e serf.Event) {
	if term.IsEvent(e) {
		a.cons.terms.Offer(e)
		return
	}
	me, ok := e.(serf.MemberEvent)
	if !ok {
		return
	}
	a.countEvent(me)
	if a.mesh.peers != nil {
		a.mesh.peers.MarkDirty()
	}
	if a.pool.router != nil {
		a.pool.router.Trigger()
	}
	a.wakeConsensus()
	if me.Type != serf.EventMemberUpdate {
		return
	}
	for _, m := range me.Members {
		if m.Name == a.cfg.Node {
			// Our own publish, or tags changed through the Serf RPC:
			// publish adopts and persists the latter, and rebuilds the
			// reserved tags from the agent's own state either way.
			a.pub.MarkDirty()
		}
	}
}

func (a *Agent) fail(err error) {
	a.life.fatalOnce.Do(func() {
		a.log.Error("agent stopping", "err", err)
		a.life.fatal <- err
	})
}

// Fatal delivers an error that must stop the agent (name conflict, join
// given up, gossip shut down).
func (a *Agent) Fatal() <-chan error { return a.life.fatal }

// LeaveRequested is closed when a client asked the agent to leave (API or RPC).
func (a *Agent) LeaveRequested() <-chan struct{} { return a.life.leaveReq }

// RequestLeave asks the run loop to leave gracefully and exit.
func (a *Agent) RequestLeave() { a.life.leaveOnce.Do(func() { close(a.life.leaveReq) }) }

// Shutdown stops everything. It is idempotent.
func (a *Agent) Shutdown() {
	a.life.stopOnce.Do(func() {
		close(a.life.stopping)
		if a.life.cancel != nil {
			a.life.cancel()
		}
		if a.cons.act != nil {
			_ = a.cons.act.Close()
		}
		if a.probe != nil {
			a.probe.Close()
		}
		a.closeSinks()
		if a.mesh.reach != nil {
			a.mesh.reach.Close()
		}
		if a.mesh.gate != nil {
			a.mesh.gate.Close()
		}
		if a.rep.hooks != nil {
			_ = a.rep.hooks.Close()
		}
		if a.rpc.gate != nil {
			a.rpc.gate.Close()
		}
		if a.rpc.ipc != nil {
			a.rpc.ipc.Shutdown()
		}
		if a.mesh.sa != nil {
			if err := a.mesh.sa.Shutdown(); err != nil {
				a.log.Warn("serf shutdown", "err", err)
			}
		}
		if a.mesh.tr != nil {
			_ = a.mesh.tr.Shutdown() // when serf never took it over
		}
		a.life.wg.Wait()
		a.closeConsensus()
		if a.join.conflicts != nil {
			a.join.conflicts.Close()
		}
		if a.rep.hist != nil {
			if err := a.rep.hist.Close(); err != nil {
				a.log.Warn("close history file", "err", err)
			}
		}
		a.logs.SetMonitor(nil)
		a.releaseLocks() // last: nothing writes a state file any more
	})
}

// Reload applies what can change at runtime: tags from the configuration
// (only when no tags file is configured: the tags file then owns the
// tags, runtime changes included), the event handlers and the log level.
func (a *Agent) Reload(cfg *config.Config) {
	if lv, err := logging.ParseLevel(cfg.LogLevel); err == nil {
		a.logs.Level.Set(lv)
		a.log.Info("reloaded log level", "level", cfg.LogLevel)
	}
	if a.cfg.TagsFile == "" && !maps.Equal(cfg.Tags, a.pub.Wanted()) {
		if err := a.pub.Publish(maps.Clone(cfg.Tags)); err != nil {
			a.log.Error("reload tags", "err", err)
		} else {
			a.log.Info("reloaded tags", "tags", len(cfg.Tags))
		}
	}
	if specs, err := cfg.HookSpecs(); err != nil {
		a.log.Error("reload: event handlers not changed", "err", err)
	} else if err := a.rep.hooks.Reload(specs); err != nil {
		a.log.Error("reload: event handlers not changed", "err", err)
	} else {
		a.log.Info("reloaded event handlers", "handlers", len(specs))
	}
	// a.cfg is the configuration the agent started with: what Reload does
	// not apply still runs as it says.
	var ignored []string
	for _, k := range changedKeys(*a.cfg, *cfg) {
		switch {
		case k == "tags" && a.cfg.TagsFile != "":
			ignored = append(ignored, "tags (tags_file holds the tags: change them with shoal tags)")
		case reloadable[k]:
		default:
			ignored = append(ignored, k)
		}
	}
	if len(ignored) > 0 {
		a.log.Warn("reload: these settings need a restart and were not changed", "settings", strings.Join(ignored, ", "))
	}
}

// Serf returns the serf instance.
func (a *Agent) Serf() *serf.Serf { return a.mesh.sa.Serf() }

// Subscribe returns a subscription to serf events with a bounded buffer.
func (a *Agent) Subscribe(buf int) *Subscription { return a.mesh.events.subscribe(buf) }

// RPCAddr is the bound Serf RPC address, or "".
func (a *Agent) RPCAddr() string {
	if a.rpc.ln == nil {
		return ""
	}
	return a.rpc.ln.Addr().String()
}
