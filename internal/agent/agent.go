// Package agent runs a shoal agent and wires its parts together: serf's
// agent (so that the Serf RPC protocol is served unchanged) with the gossip
// layer of package gossip (transport, failure confirmation, name-conflict
// vote, peers file), the start-up join with retries, tags, keyring and API
// token persistence, the local MySQL probe and the health it publishes, the
// routing pool and its sinks (HAProxy, pool file), event hooks, history,
// maintenance, metrics and the Serf-compatible RPC gate. Start runs in
// steps (start.go) and shuts down what it started when one fails. The HTTP
// API is served by package api on top of the methods here. The package only
// wires: TestFunctionsStayShort keeps its functions under 80 lines.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/apitoken"
	"github.com/shoaldb/shoal/internal/config"
	"github.com/shoaldb/shoal/internal/fsutil"
	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/logging"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/probe"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/serfrpc"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/tags"
	"github.com/shoaldb/shoal/internal/view"
)

// monitorWriter is serf's log ring, used by `serf monitor` and our HTTP monitor.
type monitorWriter interface {
	Write([]byte) (int, error)
	RegisterHandler(sagent.LogHandler)
	DeregisterHandler(sagent.LogHandler)
}

// Agent is a running shoal agent.
type Agent struct {
	cfg     *config.Config
	logs    *logging.Logging
	log     *slog.Logger
	sa      *sagent.Agent
	ipc     *sagent.AgentIPC
	rpcGate *serfrpc.Gate
	rpcLn   net.Listener
	monitor monitorWriter
	events  *eventHub
	started time.Time

	keyWarning string

	apiToken     string // required by state-changing API and RPC requests
	apiTokenFile string

	mu   sync.Mutex
	join view.JoinStatus

	joinInFlight atomic.Int32
	conflicts    *gossip.Conflicts // the name-conflict vote; exists from New

	tagsFileMu  sync.Mutex
	tagsWritten map[string]string // tags last written to the tags file

	pubMu     sync.Mutex        // serializes changes of the local tags (publish)
	published map[string]string // the tags publish last set; under pubMu
	pub       pubState          // outcome of the last publish
	wantMu    sync.Mutex
	userWant  map[string]string // user tags to publish, whatever was gossiped

	role   string
	health tags.Health // published health (db agents)
	maint  string      // maintenance reason, "" when not in maintenance
	probe  *probe.Probe
	router *routing.Router
	sinks  []sink.Sink
	hist   *history.Log
	hooks  *hooks.Runner
	gate   *gossip.Gate      // nil when gossip.confirm_failures is off
	tr     *gossip.Transport // memberlist's; memberlist shuts it down too
	peers  *gossip.Peers     // nil without a snapshot
	locks  []*os.File        // held locks of the state files (statelock.go)

	// maintSaveErr is why the last maintenance change was not saved to
	// the tags file, under mu; shown while the file does not hold the
	// state (maint.go).
	maintSaveErr string

	// afterStep, when set (tests), runs after each step of Start; an error
	// fails Start there.
	afterStep func(step string) error

	metrics    *metrics.Agent
	flapMu     sync.Mutex
	failedSeen map[string]bool // members seen failed, for the flap counter
	dirty      chan struct{}

	fatalOnce sync.Once
	fatal     chan error
	leaveReq  chan struct{}
	leaveOnce sync.Once
	leave     leaveState
	stopping  chan struct{} // closed when Shutdown begins
	cancel    context.CancelFunc
	stopOnce  sync.Once
	wg        sync.WaitGroup
}

// New validates what it can without binding ports and prepares the agent.
func New(cfg *config.Config, logs *logging.Logging) (*Agent, error) {
	a := &Agent{
		cfg:      cfg,
		logs:     logs,
		log:      logs.Logger.With("component", "agent"),
		events:   newEventHub(),
		fatal:    make(chan error, 1),
		leaveReq: make(chan struct{}),
		stopping: make(chan struct{}),
		join:     view.JoinStatus{Addrs: cfg.Join},
		role:     cfg.EffectiveRole(),
		dirty:    make(chan struct{}, 1),
		health:   tags.Health{State: tags.Critical, Reason: "starting"},
		metrics:  metrics.NewAgent(),

		failedSeen: map[string]bool{},
	}
	a.events.onEvent = a.observeEvent
	// serf may log a conflict over our name while it is being created:
	// the vote exists before serf does and waits for it (Attach).
	a.conflicts = gossip.NewConflicts(gossip.ConflictConfig{
		Node:    cfg.Node,
		Joining: func() bool { return a.joinInFlight.Load() > 0 },
		Lost:    func(err error) { a.fail(nameConflictError(err)) },
		Log:     a.log,
	})
	if path := a.peersPath(); path != "" {
		a.peers = gossip.NewPeers(gossip.PeersConfig{
			Path: path, Self: cfg.Node,
			Members:       func() []serf.Member { return a.Serf().Members() },
			Join:          func(addrs []string) (int, error) { return a.joinCounted(addrs, false) },
			RetryInterval: cfg.RetryInterval, RetryMaxWait: cfg.RetryMaxWait,
			Log: a.log,
		})
	}
	return a, nil
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
	a.apiTokenFile = a.cfg.APITokenPath(os.Getenv, os.Geteuid())
	tok, created, err := apitoken.LoadOrCreate(a.apiTokenFile)
	if err != nil {
		return config.Invalid(fmt.Errorf("api_token_file: %w", err))
	}
	if created {
		a.log.Info("created the API token", "api_token_file", a.apiTokenFile)
	}
	a.apiToken = tok
	return nil
}

// APIToken is the token that state-changing and secret-revealing API and
// RPC requests must carry.
func (a *Agent) APIToken() string { return a.apiToken }

// APITokenFile is the file the API token was read from.
func (a *Agent) APITokenFile() string { return a.apiTokenFile }

// initialTags returns the tags to start with: the tags file when it exists
// (it holds runtime changes), else the configured tags.
func (a *Agent) initialTags() (map[string]string, error) {
	user := maps.Clone(a.cfg.Tags)
	if user == nil {
		user = map[string]string{}
	}
	if a.cfg.TagsFile == "" {
		return user, nil
	}
	fileTags, err := config.ReadTagsFile(a.cfg.TagsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return user, a.writeTagsFile(user)
	}
	if err != nil {
		return nil, fmt.Errorf("tags_file %s: %w", a.cfg.TagsFile, err)
	}
	a.tagsWritten = maps.Clone(fileTags)
	if reason, ok := fileTags[tags.KeyMaint]; ok {
		// Maintenance survives restarts: an operator who drained a node to
		// upgrade it does not want it back in the pool when the agent restarts.
		a.maint = maintReason(reason)
		delete(fileTags, tags.KeyMaint)
		a.log.Warn("this node is in maintenance (from the tags file): it stays out of the pool until `shoal maint disable`", "reason", a.maint)
	}
	if len(a.cfg.Tags) > 0 && !maps.Equal(fileTags, a.cfg.Tags) {
		a.log.Warn("tags file holds runtime tag changes and takes precedence over the configured tags; delete it to return to the configured tags", "tags_file", a.cfg.TagsFile)
	}
	return fileTags, nil
}

// writeTagsFile persists the user tags and the maintenance reason (under the
// reserved key "maint"). It writes only when they differ from what was last
// written: the local member-update event also fires for every health
// publish, which leaves both alone.
func (a *Agent) writeTagsFile(user map[string]string) error {
	if a.cfg.TagsFile == "" {
		return nil
	}
	a.tagsFileMu.Lock()
	defer a.tagsFileMu.Unlock()
	content := maps.Clone(user)
	if content == nil {
		content = map[string]string{}
	}
	a.mu.Lock()
	if a.maint != "" {
		content[tags.KeyMaint] = a.maint
	}
	a.mu.Unlock()
	if a.tagsWritten != nil && maps.Equal(a.tagsWritten, content) {
		return nil
	}
	data, err := json.MarshalIndent(content, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(a.cfg.TagsFile, append(data, '\n'), 0o600); err != nil {
		return err
	}
	a.tagsWritten = content
	return nil
}

// observeEvent runs inline in serf's event loop: keep it cheap.
func (a *Agent) observeEvent(e serf.Event) {
	me, ok := e.(serf.MemberEvent)
	if !ok {
		return
	}
	a.countEvent(me)
	if a.peers != nil {
		a.peers.MarkDirty()
	}
	if a.router != nil {
		a.router.Trigger()
	}
	if me.Type != serf.EventMemberUpdate {
		return
	}
	for _, m := range me.Members {
		if m.Name == a.cfg.Node {
			// Our own publish, or tags changed through the Serf RPC:
			// publish adopts and persists the latter, and rebuilds the
			// reserved tags from the agent's own state either way.
			a.markDirty()
		}
	}
}

func (a *Agent) fail(err error) {
	a.fatalOnce.Do(func() {
		a.log.Error("agent stopping", "err", err)
		a.fatal <- err
	})
}

// Fatal delivers an error that must stop the agent (name conflict, join
// given up, gossip shut down).
func (a *Agent) Fatal() <-chan error { return a.fatal }

// LeaveRequested is closed when a client asked the agent to leave (API or RPC).
func (a *Agent) LeaveRequested() <-chan struct{} { return a.leaveReq }

// RequestLeave asks the run loop to leave gracefully and exit.
func (a *Agent) RequestLeave() { a.leaveOnce.Do(func() { close(a.leaveReq) }) }

// Shutdown stops everything. It is idempotent.
func (a *Agent) Shutdown() {
	a.stopOnce.Do(func() {
		close(a.stopping)
		if a.cancel != nil {
			a.cancel()
		}
		if a.probe != nil {
			a.probe.Close()
		}
		a.closeSinks()
		if a.gate != nil {
			a.gate.Close()
		}
		if a.hooks != nil {
			_ = a.hooks.Close()
		}
		if a.rpcGate != nil {
			a.rpcGate.Close()
		}
		if a.ipc != nil {
			a.ipc.Shutdown()
		}
		if a.sa != nil {
			if err := a.sa.Shutdown(); err != nil {
				a.log.Warn("serf shutdown", "err", err)
			}
		}
		if a.tr != nil {
			_ = a.tr.Shutdown() // when serf never took it over
		}
		a.wg.Wait()
		if a.conflicts != nil {
			a.conflicts.Close()
		}
		if a.hist != nil {
			if err := a.hist.Close(); err != nil {
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
	if a.cfg.TagsFile == "" && !maps.Equal(cfg.Tags, a.wantedUserTags()) {
		if err := a.publish(maps.Clone(cfg.Tags)); err != nil {
			a.log.Error("reload tags", "err", err)
		} else {
			a.log.Info("reloaded tags", "tags", len(cfg.Tags))
		}
	}
	if specs, err := cfg.HookSpecs(); err != nil {
		a.log.Error("reload: event handlers not changed", "err", err)
	} else if err := a.hooks.Reload(specs); err != nil {
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
func (a *Agent) Serf() *serf.Serf { return a.sa.Serf() }

// Subscribe returns a subscription to serf events with a bounded buffer.
func (a *Agent) Subscribe(buf int) *Subscription { return a.events.subscribe(buf) }

// RPCAddr is the bound Serf RPC address, or "".
func (a *Agent) RPCAddr() string {
	if a.rpcLn == nil {
		return ""
	}
	return a.rpcLn.Addr().String()
}
