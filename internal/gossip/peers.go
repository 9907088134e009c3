package gossip

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/jonboulle/clockwork"

	"github.com/shoaldb/shoal/internal/backoff"
	"github.com/shoaldb/shoal/internal/fsutil"
)

// serf's snapshot keeps new alive members in a write buffer that it flushes
// only when it appends another line more than 500 ms after the last flush.
// In a quiet cluster the last joins can stay unwritten for as long as the
// cluster stays quiet, so an agent killed with SIGKILL may restart with a
// snapshot that lists none of its peers, and not rejoin. The agent
// therefore keeps its own list of alive peers next to the snapshot
// (<snapshot>.peers, replaced atomically when the set changes), and joins
// them at start when the snapshot alone did not bring it back.

const (
	maxPeersFile      = 64               // addresses kept
	peersWriteDelay   = time.Second      // coalesces bursts of member events
	peersRejoinWindow = 10 * time.Minute // how long a restarted agent keeps trying
)

// PeersPath is the peers file kept next to a snapshot, or "" without one.
func PeersPath(snapshot string) string {
	if snapshot == "" {
		return ""
	}
	return snapshot + ".peers"
}

// PeersConfig is what Peers needs. Members and Join are required.
type PeersConfig struct {
	Path          string               // the peers file (PeersPath)
	Self          string               // our node name
	Members       func() []serf.Member // serf's members
	Join          func(addrs []string) (int, error)
	RetryInterval time.Duration // first rejoin wait, doubled up to RetryMaxWait
	RetryMaxWait  time.Duration
	Log           *slog.Logger
	Clock         clockwork.Clock // nil: the real clock
}

// Peers keeps the peers file and rejoins through it after a restart.
type Peers struct {
	cfg   PeersConfig
	dirty chan struct{}
}

// NewPeers returns the peers file keeper for cfg.
func NewPeers(cfg PeersConfig) *Peers {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &Peers{cfg: cfg, dirty: make(chan struct{}, 1)}
}

// AlivePeers returns the gossip addresses of alive members other than self,
// sorted, at most maxPeersFile.
func AlivePeers(members []serf.Member, self string) []string {
	var out []string
	for _, m := range members {
		if m.Status != serf.StatusAlive || m.Name == self {
			continue
		}
		out = append(out, net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))))
	}
	slices.Sort(out)
	if len(out) > maxPeersFile {
		rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		out = out[:maxPeersFile]
		slices.Sort(out)
	}
	return out
}

func (p *Peers) alive() []string { return AlivePeers(p.cfg.Members(), p.cfg.Self) }

// Run rewrites the peers file after member events (MarkDirty, coalesced),
// when the set of alive peers changed, until ctx ends.
func (p *Peers) Run(ctx context.Context) {
	var written []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.dirty:
		}
		select {
		case <-ctx.Done():
			return
		case <-p.cfg.Clock.After(peersWriteDelay):
		}
		peers := p.alive()
		if len(peers) == 0 || slices.Equal(peers, written) {
			// An agent that lost every peer keeps the last list: it is
			// what it should rejoin.
			continue
		}
		data, _ := json.Marshal(peers)
		if err := fsutil.WriteFileAtomic(p.cfg.Path, append(data, '\n'), 0o600); err != nil {
			p.cfg.Log.Warn("write peers file", "err", err)
			continue
		}
		written = peers
	}
}

// MarkDirty says the members changed. It never blocks.
func (p *Peers) MarkDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// read returns the addresses of the peers file, if any.
func (p *Peers) read() ([]string, error) {
	data, err := os.ReadFile(p.cfg.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var peers []string
	if err := json.Unmarshal(data, &peers); err != nil {
		return nil, err
	}
	return peers, nil
}

// Rejoin joins the peers file's addresses after a restart, with backoff
// (RetryInterval doubling up to RetryMaxWait, with jitter, so that agents
// restarted together do not retry in step), while this agent sees no other
// alive member, for at most peersRejoinWindow. It is best effort: it never
// stops the agent.
func (p *Peers) Rejoin(ctx context.Context) {
	peers, err := p.read()
	if err != nil {
		p.cfg.Log.Warn("peers file unreadable; rejoin relies on the snapshot and join", "path", p.cfg.Path, "err", err)
		return
	}
	if len(peers) == 0 {
		return
	}
	clock := p.cfg.Clock
	deadline := clock.Now().Add(peersRejoinWindow)
	// Give serf's own snapshot rejoin the first chance.
	first := clock.NewTimer(p.cfg.RetryInterval)
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.Chan():
	}
	retry := backoff.New(backoff.Policy{Initial: p.cfg.RetryInterval, Max: p.cfg.RetryMaxWait, Jitter: true}, clock)
	for clock.Now().Before(deadline) {
		if len(p.alive()) > 0 {
			return
		}
		n, err := p.cfg.Join(peers)
		if n > 0 {
			p.cfg.Log.Info("rejoined the cluster through the peers file", "contacted", n, "path", p.cfg.Path)
			return
		}
		p.cfg.Log.Debug("rejoin through the peers file failed", "err", err)
		if _, ok := retry.Wait(ctx); !ok {
			return
		}
	}
}
