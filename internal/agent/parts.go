package agent

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sagent "github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"

	"github.com/shoaldb/shoal/internal/gossip"
	"github.com/shoaldb/shoal/internal/history"
	"github.com/shoaldb/shoal/internal/hooks"
	"github.com/shoaldb/shoal/internal/metrics"
	"github.com/shoaldb/shoal/internal/routing"
	"github.com/shoaldb/shoal/internal/serfrpc"
	"github.com/shoaldb/shoal/internal/sink"
	"github.com/shoaldb/shoal/internal/view"
)

// The agent's parts that have no package of their own: what each holds.
// The parts with a policy are packages (publish, maint, leave, hookevent);
// these hold the handles Start creates and Shutdown releases.

// lifecycle is the agent's run: when it started, how it stops. It has no
// mutex: the channels and Onces are safe to share, the rest is set by
// Start before any goroutine reads it.
type lifecycle struct {
	started   time.Time
	afterStep func(step string) error // tests: runs after each step of Start; an error fails Start there
	fatalOnce sync.Once
	fatal     chan error // the error that stops the agent
	leaveOnce sync.Once
	leaveReq  chan struct{} // closed when a client asked the agent to leave
	stopOnce  sync.Once
	stopping  chan struct{} // closed when Shutdown begins
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the agent's loops
	locks     []*os.File     // held locks of the state files (statelock.go)
}

func newLifecycle() lifecycle {
	return lifecycle{fatal: make(chan error, 1), leaveReq: make(chan struct{}), stopping: make(chan struct{})}
}

// mesh is the gossip layer as the agent holds it.
type mesh struct {
	sa         *sagent.Agent
	tr         *gossip.Transport // memberlist's; memberlist shuts it down too
	gate       *gossip.Gate      // nil when gossip.confirm_failures is off
	reach      *gossip.Reach     // isolation's reachability rounds (routing.Reacher)
	pos        *gossip.Positions // the position stream
	peers      *gossip.Peers     // nil without a snapshot
	events     *eventHub
	keyWarning string // about the keyring file, for Info
}

// joiner is the start-up join's status and the joins in flight, which the
// name-conflict vote needs to tell a conflict from a rejoin.
type joiner struct {
	// mu guards: status
	mu        sync.Mutex
	status    view.JoinStatus
	inFlight  atomic.Int32
	conflicts *gossip.Conflicts // the name-conflict vote; exists from New
}

// rpcParts is the Serf-compatible RPC and the token the RPC and the HTTP
// API require of state-changing requests.
type rpcParts struct {
	token     string
	tokenFile string
	ln        net.Listener // nil without rpc_addr
	gate      *serfrpc.Gate
	ipc       *sagent.AgentIPC
	monitor   monitorWriter // serf's log ring, for `serf monitor` and the HTTP monitor
}

// monitorWriter is serf's log ring, used by `serf monitor` and our HTTP monitor.
type monitorWriter interface {
	Write([]byte) (int, error)
	RegisterHandler(sagent.LogHandler)
	DeregisterHandler(sagent.LogHandler)
}

// poolParts is the routing pool and the local routers it feeds.
type poolParts struct {
	router *routing.Router
	sinks  []sink.Sink
}

// reporters are what the agent tells about what happens: the history, the
// hooks and the metrics.
type reporters struct {
	hist    *history.Log
	hooks   *hooks.Runner
	metrics *metrics.Agent
	flaps   *flapCounter
}

// flapCounter tells a flap (a member failed, then alive again) from serf's
// member events.
type flapCounter struct {
	// mu guards: failed
	mu     sync.Mutex
	failed map[string]bool // members seen failed
}

// observe returns how many members of me came back after they failed.
func (f *flapCounter) observe(me serf.MemberEvent) (flaps int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range me.Members {
		switch me.Type {
		case serf.EventMemberFailed:
			f.failed[m.Name] = true
		case serf.EventMemberJoin:
			if f.failed[m.Name] {
				flaps++
			}
			delete(f.failed, m.Name)
		case serf.EventMemberLeave, serf.EventMemberReap:
			delete(f.failed, m.Name)
		}
	}
	return flaps
}
