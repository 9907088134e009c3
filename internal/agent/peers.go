package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/serf/serf"

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

func (a *Agent) peersPath() string {
	if a.cfg.Snapshot == "" {
		return ""
	}
	return a.cfg.Snapshot + ".peers"
}

// alivePeers returns the gossip addresses of alive members other than this
// one, sorted, at most maxPeersFile.
func (a *Agent) alivePeers() []string {
	var out []string
	for _, m := range a.Serf().Members() {
		if m.Status != serf.StatusAlive || m.Name == a.cfg.Node {
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

// peersLoop rewrites the peers file after member events (coalesced), when
// the set of alive peers changed.
func (a *Agent) peersLoop(ctx context.Context) {
	path := a.peersPath()
	var written []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.peersDirty:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(peersWriteDelay):
		}
		peers := a.alivePeers()
		if len(peers) == 0 || slices.Equal(peers, written) {
			// An agent that lost every peer keeps the last list: it is
			// what it should rejoin.
			continue
		}
		data, _ := json.Marshal(peers)
		if err := fsutil.WriteFileAtomic(path, append(data, '\n'), 0o600); err != nil {
			a.log.Warn("write peers file", "err", err)
			continue
		}
		written = peers
	}
}

func (a *Agent) markPeersDirty() {
	select {
	case a.peersDirty <- struct{}{}:
	default:
	}
}

// readPeers returns the addresses of the peers file, if any.
func (a *Agent) readPeers() ([]string, error) {
	data, err := os.ReadFile(a.peersPath())
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

// rejoinPeers joins the peers file's addresses after a restart, with
// backoff, while this agent sees no other alive member, for at most
// peersRejoinWindow. It is best effort: it never stops the agent.
func (a *Agent) rejoinPeers(ctx context.Context) {
	peers, err := a.readPeers()
	if err != nil {
		a.log.Warn("peers file unreadable; rejoin relies on the snapshot and join", "path", a.peersPath(), "err", err)
		return
	}
	if len(peers) == 0 {
		return
	}
	deadline := time.Now().Add(peersRejoinWindow)
	wait := a.cfg.RetryInterval
	// Give serf's own snapshot rejoin the first chance.
	first := time.After(wait)
	select {
	case <-ctx.Done():
		return
	case <-first:
	}
	for time.Now().Before(deadline) {
		if len(a.alivePeers()) > 0 {
			return
		}
		n, err := a.joinCounted(peers, false)
		if n > 0 {
			a.log.Info("rejoined the cluster through the peers file", "contacted", n, "path", a.peersPath())
			return
		}
		a.log.Debug("rejoin through the peers file failed", "err", err)
		sleep := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(sleep):
		}
		wait = min(wait*2, a.cfg.RetryMaxWait)
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
	case <-time.After(reclaim + time.Second):
	}
	peers := a.alivePeers()
	if len(peers) == 0 {
		return
	}
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	peers = peers[:min(3, len(peers))]
	if _, err := a.joinCounted(peers, false); err != nil {
		a.log.Debug("re-announce after the reclaim time", "err", flatten(err))
	}
}
