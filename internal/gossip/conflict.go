package gossip

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/serf/serf"
)

// Name conflicts. serf's own resolution asks the other members which
// address they hold for the contested name and shuts down the side in the
// minority. With no other member to answer (a cluster of one plus the
// newcomer) it counts 0 of 0 and shuts BOTH sides down, the established
// node included. shoal turns serf's resolution off (SerfConfig) and runs
// the same vote itself, with one difference: when nobody answers, the side
// that was in the middle of joining when the conflict appeared is the
// newcomer and steps down; the established node never does.

const (
	// serf's internal conflict query and its response message type
	// (serf/internal_query.go, serf/messages.go; stable since serf 0.6).
	conflictQuery               = "_serf_conflict"
	messageConflictResponseType = 6
)

// conflictPrefix starts serf's log line for a conflict over its own name
// (serf/serf.go handleNodeConflict), the only place serf reports it.
const conflictPrefix = "Node name conflicts with another node at "

// ParseConflict reports whether a serf log line (component and message, as
// logging.ParseStdLine splits it) says another node claims our name, and
// the other node's address.
func ParseConflict(component, msg string) (addr string, ok bool) {
	if component != "serf" || !strings.HasPrefix(msg, conflictPrefix) {
		return "", false
	}
	addr = msg[len(conflictPrefix):]
	if j := strings.Index(addr, ". Names"); j > 0 {
		addr = addr[:j]
	}
	return addr, true
}

// ConflictConfig is what Conflicts needs. Lost is required.
type ConflictConfig struct {
	Node    string      // our node name
	Joining func() bool // a join of ours is in flight (nil: never)
	// Lost is called, once, when the vote says the name is the other
	// node's: the agent must stop.
	Lost func(err error)
	Log  *slog.Logger
}

// Conflicts runs the name-conflict vote when serf's log reports a conflict
// over our name (Observe). Votes wait for the serf instance (Attach): serf
// may log a conflict while it is still being created (its snapshot rejoin),
// before anything may use it.
type Conflicts struct {
	cfg   ConflictConfig
	ready chan struct{} // closed by Attach, after s is set
	s     *serf.Serf
	stop  chan struct{}
	wg    sync.WaitGroup

	attachOnce sync.Once
	mu         sync.Mutex
	resolving  bool
	closed     bool
	other      string // address of the other holder of our name, once lost
}

// NewConflicts returns the vote for cfg.Node.
func NewConflicts(cfg ConflictConfig) *Conflicts {
	if cfg.Joining == nil {
		cfg.Joining = func() bool { return false }
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Conflicts{cfg: cfg, ready: make(chan struct{}), stop: make(chan struct{})}
}

// Attach hands over the serf instance once it runs; votes start then.
func (c *Conflicts) Attach(s *serf.Serf) {
	c.attachOnce.Do(func() {
		c.s = s
		close(c.ready)
	})
}

// Observe is a serf log observer. It runs synchronously in the goroutine
// that found the conflict (during our own Join call when we are the
// newcomer), so it only notes whether we are joining and starts the vote.
func (c *Conflicts) Observe(component, msg string) {
	addr, ok := ParseConflict(component, msg)
	if !ok {
		return
	}
	joining := c.cfg.Joining()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resolving || c.closed {
		return
	}
	c.resolving = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-c.ready:
			c.resolve(addr, joining)
		case <-c.stop:
		}
		c.mu.Lock()
		c.resolving = false
		c.mu.Unlock()
	}()
}

// Lost returns the address of the node that holds our name, once the vote
// was lost, else "".
func (c *Conflicts) Lost() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.other
}

// Close stops votes that have not started and waits for one in progress
// (it ends with serf's query timeout, or sooner once serf shuts down).
func (c *Conflicts) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Conflicts) resolve(other string, joining bool) {
	responses, matching, err := vote(c.s, c.cfg.Node, c.cfg.Log)
	if err != nil {
		c.cfg.Log.Error("name conflict: resolution query failed", "other", other, "err", err)
		return
	}
	lose := joining
	if responses > 0 {
		lose = matching < responses/2+1
	}
	if !lose {
		c.cfg.Log.Warn("another node claims our name; the cluster keeps us", "node", c.cfg.Node, "other", other,
			"answers", responses, "for_us", matching)
		return
	}
	c.mu.Lock()
	c.other = other
	c.mu.Unlock()
	c.cfg.Lost(fmt.Errorf("node name %q is already used by a live member at %s: refusing to run with a duplicate name; pick another --node (%d of %d members answered for us)",
		c.cfg.Node, other, matching, responses))
}

// vote runs serf's conflict query for node and counts the answers: how
// many members answered, and how many of them hold our address for it.
func vote(s *serf.Serf, node string, log *slog.Logger) (responses, matching int, err error) {
	local := s.Memberlist().LocalNode()
	resp, err := s.Query(conflictQuery, []byte(node), nil)
	if err != nil {
		return 0, 0, err
	}
	for r := range resp.ResponseCh() {
		if len(r.Payload) < 1 || r.Payload[0] != messageConflictResponseType {
			continue
		}
		var m serf.Member
		if err := codec.NewDecoder(bytes.NewReader(r.Payload[1:]), &codec.MsgpackHandle{}).Decode(&m); err != nil {
			log.Warn("name conflict: undecodable answer", "from", r.From, "err", err)
			continue
		}
		responses++
		if m.Addr.Equal(local.Addr) && m.Port == local.Port {
			matching++
		}
	}
	return responses, matching, nil
}
